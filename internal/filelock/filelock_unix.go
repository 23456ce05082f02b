//go:build unix

package filelock

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

func lock(f *os.File, wait bool) error {
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		switch err {
		case nil:
			return nil
		case syscall.EINTR:
			continue
		case syscall.EWOULDBLOCK:
			return fmt.Errorf("%w (%w)", ErrLocked, err)
		default:
			return err
		}
	}
}

func fix(err error) string {
	switch {
	case errors.Is(err, syscall.ENOLCK):
		return "its file system gives no file locks (ENOLCK: an NFS mount without its lock daemon, or a FUSE mount): put the state directory on a local file system"
	case errors.Is(err, syscall.EROFS):
		return "its file system is read-only (EROFS): choose a state directory on a writable one"
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "its file system is full (or the quota used up): free space, or choose another state directory"
	case errors.Is(err, os.ErrPermission):
		return "make its directory writable or choose another state directory"
	}
	return ""
}
