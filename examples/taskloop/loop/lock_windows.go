package loop

import (
	"os"
	"syscall"
	"unsafe"
)

var procLockFileEx = syscall.NewLazyDLL("kernel32.dll").NewProc("LockFileEx")

const lockfileExclusiveLock = 0x2

// lockFile takes an exclusive lock (LockFileEx, over every byte) on the
// file at path, creating it, and waits while another handle holds it. It
// is held until unlock, or until the process ends.
func lockFile(path string) (unlock func() error, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	var ol syscall.Overlapped
	all := ^uint32(0)
	r, _, err := procLockFileEx.Call(f.Fd(), lockfileExclusiveLock, 0, uintptr(all), uintptr(all), uintptr(unsafe.Pointer(&ol)))
	if r == 0 {
		f.Close()
		return nil, &os.PathError{Op: "LockFileEx", Path: path, Err: err}
	}
	return f.Close, nil // closing the handle releases the lock
}
