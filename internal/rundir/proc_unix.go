//go:build unix && !linux

package rundir

import (
	"errors"
	"strconv"
	"syscall"
)

func lookProc(pid int) proc {
	err := syscall.Kill(pid, 0)
	call := "kill(" + strconv.Itoa(pid) + ", 0)"
	switch {
	case err == nil:
		return proc{exists: true, proof: call}
	case errors.Is(err, syscall.EPERM):
		return proc{exists: true, proof: call + ": another user's process"}
	}
	return proc{proof: call + ": " + err.Error()}
}

// runHasProcesses cannot tell without /proc.
func runHasProcesses(string) bool { return false }

// killRun kills nothing: without /proc a process's environment cannot be
// read, so no process can be proven the run's. pilot's supervisor ends the
// worker groups of a pilot that died.
func killRun(string, int) (killed, survivors []int, note string) {
	return nil, nil, "the run's processes were not looked for: this system has no /proc to prove which are the run's"
}
