//go:build unix && !linux

package supervise

import (
	"net"
	"os"
	"syscall"
	"time"
)

// loop serves the control socket fd until it ends or a terminating signal
// arrives: requests come from a reading goroutine, signals from sigs.
func (s *server) loop(fd int, sigs chan os.Signal) int {
	f := os.NewFile(uintptr(fd), "control")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return 99
	}
	uc := c.(*net.UnixConn)
	s.conn = uc
	reqs := make(chan request)
	go s.read(uc, reqs)

	tick := time.NewTicker(time.Hour)
	tick.Stop()
	ticking := false
	for {
		select {
		case r, ok := <-reqs:
			if !ok {
				s.flush()
				s.shutdown()
				return 0
			}
			s.handle(r)
			s.flush() // a started reply does not wait for the cleanups below
		case sig := <-sigs:
			if sig != syscall.SIGCHLD {
				s.flush()
				s.shutdown()
				return 0
			}
			s.reap()
		case <-tick.C:
		}
		s.progress()
		// The replies of this turn in one write: a worker that exits
		// leaving nothing gets its exited and done together.
		s.flush()
		if want := s.anyCleaning(); want != ticking {
			if want {
				tick.Reset(cleanupTick)
			} else {
				tick.Stop()
			}
			ticking = want
		}
	}
}

// read turns the control socket into requests; it closes reqs at end of
// file or on any error.
func (s *server) read(conn *net.UnixConn, reqs chan<- request) {
	defer close(reqs)
	var fr frames
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(16*4))
	for {
		n, oobn, flags, _, err := conn.ReadMsgUnix(buf, oob)
		// On an error (ECONNRESET when the client was killed with
		// replies unread) the counts may be -1: a slice with them would
		// panic and leave every tree running.
		n, oobn = max(n, 0), max(oobn, 0)
		got, ok := fr.add(buf[:n], rights(oob[:oobn]), err == nil && flags&syscall.MSG_CTRUNC != 0)
		for _, r := range got {
			reqs <- r
		}
		if !ok || err != nil || n == 0 {
			return
		}
	}
}

// forkExec starts a worker; there are no pidfds here.
func forkExec(path string, argv []string, attr *syscall.ProcAttr) (pid, pidfd int, err error) {
	pid, err = syscall.ForkExec(path, argv, attr)
	return pid, -1, err
}

// epollSet is Linux's: the loop here waits on channels.
type epollSet struct{}

func (s *server) watchLeader(int)   {}
func (s *server) unwatchLeader(int) {}
