//go:build unix && !linux

package supervise

import (
	"net"
	"os"
	"syscall"
	"testing"
)

// A client killed with replies unread resets the control socket: the
// supervisor's read must end (so that it terminates every job) rather than
// panic on the error's counts. The chaos suite found this: a SIGKILLed
// pilot's grandchildren were left to init.
func TestReadEndsOnAResetControlSocket(t *testing.T) {
	fds, err := socketpair()
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "supervisor-side")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	uc := c.(*net.UnixConn)
	defer uc.Close()
	s := &server{conn: uc}
	// A reply the client never reads, then the client is gone.
	s.send(&msg{Op: opExited, ID: 1})
	syscall.Close(fds[1])

	reqs := make(chan request)
	done := make(chan any)
	go func() {
		defer func() { done <- recover() }()
		s.read(uc, reqs)
	}()
	for range reqs {
		t.Error("a request from a closed socket")
	}
	if p := <-done; p != nil {
		t.Fatalf("read panicked: %v", p)
	}
}
