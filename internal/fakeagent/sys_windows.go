package fakeagent

import (
	"errors"
	"fmt"
	"syscall"
)

// closeOnExec does nothing: Windows handles are not inherited unless asked.
func closeOnExec(int) {}

func setsid(*syscall.SysProcAttr) error {
	return fmt.Errorf("spawn:setsid: %w", errors.ErrUnsupported)
}
