package temporal

import (
	"os"
	"strings"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/procfs"
)

// pidStart returns the start time of process pid, in clock ticks since
// boot (/proc/<pid>/stat, field 22), which tells a reused pid apart; ok is
// false for a process that is gone or a zombie.
func pidStart(pid int) (uint64, bool) { return procfs.StartTime(pid) }

// bootID names this boot of the host (/proc/sys/kernel/random/boot_id):
// a process of a fence recorded under another boot is gone, whatever
// process now has its pid and start time.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// runProcs lists the live processes of pilot run runID: every process a
// worker starts inherits pilot.EnvRunID, setsid'd descendants too (the
// run's whole tree, as far as this user may read environments).
func runProcs(runID string) []int {
	if runID == "" {
		return nil
	}
	return procfs.WithEnv(pilot.EnvRunID + "=" + runID)
}
