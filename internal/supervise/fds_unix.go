//go:build unix

package supervise

import (
	"os"
	"strconv"
	"syscall"
)

// closeOnExecListed marks close-on-exec every descriptor from 3 up that
// dir (/proc/self/fd, /dev/fd) lists.
func closeOnExecListed(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd < 3 {
			continue
		}
		// The directory's own descriptor is closed by now: EBADF.
		if _, _, errno := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFD, syscall.FD_CLOEXEC); errno != 0 && errno != syscall.EBADF {
			return errno
		}
	}
	return nil
}
