//go:build unix && !linux

package supervise

import (
	"errors"
	"fmt"
)

// runConfined refuses: Landlock is Linux's (darwin confines a worker with
// sandbox-exec, which the pilot package puts in its command line).
func (f *fork) runConfined() {
	f.err = fmt.Errorf("landlock: %w", errors.ErrUnsupported)
}
