//go:build !unix

package temporal

import "os"

// terminateGroup ends process pid; the owning pilot ends the rest of the
// tree and writes the verdict.
func terminateGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// terminate ends process pid.
func terminate(pid int) { terminateGroup(pid) }
