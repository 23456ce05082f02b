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

// InheritedFDs is not known on Windows.
func InheritedFDs() ([]int, error) { return nil, errors.ErrUnsupported }

func fdsLine([]int) string { return "fds unsupported" }

func junkFDs() string { return "junkfds unsupported" }

func killParent() string { return "killparent unsupported" }

func passFDs(string) error { return fmt.Errorf("passfds: %w", errors.ErrUnsupported) }
