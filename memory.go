package pilot

import (
	"errors"
	"fmt"
	"runtime"
)

// followsMemory is whether pilot can measure a worker's tree here: its
// supervisor reads each process's resident memory from /proc.
const followsMemory = runtime.GOOS == "linux"

// errMemoryLimitUnsupported is the error of a task with a memory limit on
// a platform where pilot cannot follow a tree's memory (all but Linux):
// the limit would not hold, so nothing is started. Callers match it with
// [errors.ErrUnsupported].
var errMemoryLimitUnsupported = fmt.Errorf("memory limits are enforced on Linux only, where pilot reads the tree's memory from /proc: %w", errors.ErrUnsupported)
