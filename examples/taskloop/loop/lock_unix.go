//go:build unix

package loop

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on the file at path, creating it, and
// waits while another holds it, in this process or another. It is held
// until unlock, or until the process ends, however it ends.
func lockFile(path string) (unlock func() error, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	return f.Close, nil // closing the descriptor releases the flock
}
