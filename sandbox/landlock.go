package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"

	"github.com/pilotworkers/pilot/internal/landlock"
)

// ScopeABI is the first Landlock ABI that keeps a worker from signalling
// processes outside its tree and from their abstract unix sockets.
const ScopeABI = 6

// NeedsABI returns the Landlock ABI the mode needs on Linux: secrets 1,
// workspace 3 (truncate handled), strict 4 (TCP connect rules); 0 for Off.
func (m Mode) NeedsABI() int {
	switch m {
	case Secrets:
		return 1
	case Workspace:
		return 3
	case Strict:
		return 4
	}
	return 0
}

// LandlockABI returns the Landlock ABI this kernel offers, and, where it
// offers none, why: its error says what the kernel lacks.
func LandlockABI() (int, error) {
	if runtime.GOOS != "linux" {
		return 0, fmt.Errorf("pilot enforces sandboxes with Landlock, which %s does not have", runtime.GOOS)
	}
	abi, err := landlock.ABI()
	switch {
	case errors.Is(err, syscall.ENOSYS):
		err = fmt.Errorf("%w: this kernel is built without Landlock", err)
	case errors.Is(err, syscall.EOPNOTSUPP):
		err = fmt.Errorf("%w: Landlock is built into this kernel but not enabled (add landlock to its lsm= boot parameter)", err)
	}
	return abi, err
}
