package pilot

import (
	"fmt"
	"os"
	"syscall"
)

// newPipe returns a close-on-exec pipe. The end pilot keeps (the read end
// if pollRead, else the write end) is non-blocking, so pilot uses it
// through the runtime poller and Close unblocks a Read or Write; the
// worker's end stays blocking, as ordinary programs expect.
func newPipe(name string, pollRead bool) (r, w *os.File, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("pilot: pipe: %w", err)
	}
	mine := p[1]
	if pollRead {
		mine = p[0]
	}
	if err := syscall.SetNonblock(mine, true); err != nil {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, nil, fmt.Errorf("pilot: pipe: %w", err)
	}
	return os.NewFile(uintptr(p[0]), name), os.NewFile(uintptr(p[1]), name), nil
}

// loadedExecutable is the file the running program was loaded from:
// /proc/self/exe, which stays that file even when path now holds another.
func loadedExecutable(path string) string { return "/proc/self/exe" }
