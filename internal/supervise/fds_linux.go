package supervise

import "syscall"

const (
	sysCloseRange     = 436 // close_range(2), the same number on every Linux architecture
	closeRangeCloexec = 1 << 2
)

// closeOnExecAll marks every descriptor from 3 up close-on-exec: the
// control socket and whatever the supervisor inherited from the program
// that started pilot (a shell's stray descriptors pass through os/exec), so
// that a worker starts with exactly its stdin, stdout and stderr.
func closeOnExecAll() error {
	_, _, errno := syscall.RawSyscall(sysCloseRange, 3, ^uintptr(0)>>1, closeRangeCloexec)
	if errno == 0 {
		return nil
	}
	// Before Linux 5.11: one descriptor at a time.
	return closeOnExecListed("/proc/self/fd")
}
