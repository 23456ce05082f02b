package filelock

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

var procLockFileEx = syscall.NewLazyDLL("kernel32.dll").NewProc("LockFileEx")

const (
	lockfileFailImmediately = 0x1
	lockfileExclusiveLock   = 0x2
	errorLockViolation      = syscall.Errno(33)
	allBytes                = ^uint32(0)
)

// lock locks every byte of f, as cmd/go's lockedfile does. Windows locks
// are mandatory: another handle cannot read or write the file while it is
// held.
func lock(f *os.File, wait bool) error {
	flags := uint32(lockfileExclusiveLock)
	if !wait {
		flags |= lockfileFailImmediately
	}
	var ol syscall.Overlapped
	r, _, err := procLockFileEx.Call(f.Fd(), uintptr(flags), 0, uintptr(allBytes), uintptr(allBytes), uintptr(unsafe.Pointer(&ol)))
	if r != 0 {
		return nil
	}
	if err == errorLockViolation {
		return fmt.Errorf("%w (%w)", ErrLocked, err)
	}
	return err
}

func fix(err error) string {
	if errors.Is(err, os.ErrPermission) {
		return "make its directory writable or choose another state directory"
	}
	return ""
}
