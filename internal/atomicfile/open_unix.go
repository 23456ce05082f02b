//go:build unix

package atomicfile

import (
	"os"
	"syscall"
)

// OpenFile is os.OpenFile for a regular file that is only written to in
// turn, without os.OpenFile's attempt to register it with the runtime's
// poller (on Linux four fcntl calls and an epoll_ctl that fails for a
// regular file): an open and one fcntl.
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := syscall.Open(name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}
