package pilot

import (
	"errors"
	"fmt"
	"runtime"
)

// TreeMemory is one look at the resident memory of a worker's process
// tree: the worker and every descendant pilot's supervisor holds.
type TreeMemory struct {
	// RSSBytes is the sum of the processes' resident memory.
	RSSBytes  int64 `json:"rss_bytes"`
	Processes int   `json:"processes"`
	// Top is the process that held the most.
	Top ProcessRSS `json:"top"`
}

// ProcessRSS is one process of a worker's tree and the resident memory it
// held.
type ProcessRSS struct {
	Pid int `json:"pid"`
	// Command is its command name as the kernel keeps it (comm: at most
	// 15 bytes, "node", "claude").
	Command  string `json:"command"`
	RSSBytes int64  `json:"rss_bytes"`
}

// followsMemory is whether pilot can measure a worker's tree here: its
// supervisor reads each process's resident memory from /proc.
const followsMemory = runtime.GOOS == "linux"

// ErrMemoryLimitUnsupported is the error of a task with a memory limit on
// a platform where pilot cannot follow a tree's memory (all but Linux):
// the limit would not hold, so nothing is started. It wraps
// [errors.ErrUnsupported].
var ErrMemoryLimitUnsupported = fmt.Errorf("memory limits are enforced on Linux only, where pilot reads the tree's memory from /proc: %w", errors.ErrUnsupported)
