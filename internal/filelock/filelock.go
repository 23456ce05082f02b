// Package filelock takes exclusive advisory locks on open files, across
// processes: flock on Unix, LockFileEx on Windows.
package filelock

import (
	"errors"
	"os"
)

// ErrLocked is returned by TryLock when another open file holds the lock.
var ErrLocked = errors.New("filelock: locked by another open file")

// Lock takes an exclusive lock on f, waiting for it. The lock belongs to
// the open file: it is released when f is closed, and another open file of
// the same path, in this process or another, waits for it.
func Lock(f *os.File) error { return lock(f, true) }

// TryLock is Lock without the wait: if the lock is held, it returns an
// error wrapping ErrLocked.
func TryLock(f *os.File) error { return lock(f, false) }

// Fix says what to do about err, an error of opening or locking a lock
// file in a state directory, when its cause names the fix: no lock
// manager (ENOLCK: NFS without its lock daemon, some FUSE mounts), a
// read-only file system, no permission, no space. It returns "" for
// another error.
func Fix(err error) string {
	return fix(err)
}
