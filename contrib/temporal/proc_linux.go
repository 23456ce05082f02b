package temporal

import "github.com/pilotworkers/pilot/internal/procfs"

// pidStart returns the start time of process pid, in clock ticks since
// boot (/proc/<pid>/stat, field 22), which tells a reused pid apart; ok is
// false for a process that is gone or a zombie.
func pidStart(pid int) (uint64, bool) { return procfs.StartTime(pid) }
