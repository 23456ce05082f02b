package cli

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/pilotworkers/pilot/internal/landlock"
)

// probeLandlock is landlock.ABI, its error saying what it means.
func probeLandlock() (int, error) {
	abi, err := landlock.ABI()
	switch {
	case errors.Is(err, syscall.ENOSYS):
		err = fmt.Errorf("%w: this kernel is built without Landlock", err)
	case errors.Is(err, syscall.EOPNOTSUPP):
		err = fmt.Errorf("%w: Landlock is built into this kernel but not enabled (add landlock to its lsm= boot parameter)", err)
	}
	return abi, err
}
