//go:build !linux

package temporal

import (
	"os"
	"syscall"
)

// pidStart reports whether process pid exists; without /proc its start
// time is unknown (0), so a reused pid is not told apart.
func pidStart(pid int) (uint64, bool) {
	p, err := os.FindProcess(pid)
	if err != nil {
		return 0, false
	}
	return 0, p.Signal(syscall.Signal(0)) == nil
}

// bootID is unknown here.
func bootID() string { return "" }

// runProcs is unknown here: a run's liveness is its owner's and its
// worker's pids.
func runProcs(runID string) []int { return nil }
