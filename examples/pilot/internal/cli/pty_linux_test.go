package cli

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"unsafe"
)

// openPTY returns a pseudo-terminal's controller and its terminal of
// width×height, or skips the test.
func openPTY(t *testing.T, width, height int) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	ioctl := func(f *os.File, req uintptr, arg unsafe.Pointer) error {
		rc, err := f.SyscallConn()
		if err != nil {
			return err
		}
		var errno syscall.Errno
		rc.Control(func(fd uintptr) { _, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg)) })
		if errno != 0 {
			return errno
		}
		return nil
	}
	var unlock int32
	var n uint32
	if err := ioctl(ptm, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		ptm.Close()
		t.Skipf("unlocking the pseudo-terminal: %v", err)
	}
	if err := ioctl(ptm, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		ptm.Close()
		t.Skipf("naming the pseudo-terminal: %v", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		ptm.Close()
		t.Skipf("opening the pseudo-terminal: %v", err)
	}
	ws := struct{ Row, Col, X, Y uint16 }{uint16(height), uint16(width), 0, 0}
	if err := ioctl(pts, syscall.TIOCSWINSZ, unsafe.Pointer(&ws)); err != nil {
		t.Fatal(err)
	}
	return ptm, pts
}
