//go:build unix

package temporal

import "syscall"

// terminateGroup sends SIGTERM to the process group of pid (a pilot
// worker leads its own group); the owning pilot then ends the rest of the
// tree and writes the verdict.
func terminateGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
}

// terminate sends SIGTERM to process pid.
func terminate(pid int) { _ = syscall.Kill(pid, syscall.SIGTERM) }
