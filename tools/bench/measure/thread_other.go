//go:build !linux

package measure

import "time"

// threadCPU is 0 where a thread's own CPU time is not read: the sampling
// is then counted in the process's time.
func threadCPU() time.Duration { return 0 }
