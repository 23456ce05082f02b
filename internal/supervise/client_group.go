//go:build unix && !linux

package supervise

import (
	"os"
	"syscall"
)

// selfExe is the running executable's path. If the file there was replaced
// since the program started, the supervisor runs the new one.
func selfExe() (string, error) { return os.Executable() }

// socketpair returns a connected pair of close-on-exec Unix stream sockets.
// Without SOCK_CLOEXEC, the descriptors are marked under ForkLock, as
// os.Pipe does, so that no concurrent fork inherits them.
func socketpair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return fds, err
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	return fds, nil
}
