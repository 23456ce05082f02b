//go:build unix

package loop

import (
	"os"
	"syscall"
)

// lockLoop takes the task loop's lock at path: an exclusive flock on the
// file, without waiting. It is held until unlock, or until the process
// ends, however it ends. Another holder, in this process or another, is
// errLoopHeld.
func lockLoop(path string) (unlock func() error, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, errLoopHeld
		}
		return nil, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	return f.Close, nil // closing the descriptor releases the flock
}
