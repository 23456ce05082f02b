package supervise

import (
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// On Linux the supervisor's one locked thread waits in epoll_wait(2) on the
// control socket, each running leader's pidfd and a wake-up pipe written on
// signals. A request or a leader's exit wakes that thread directly: no
// goroutine reads the socket or relays SIGCHLD, whose hand-overs to a locked
// thread cost tens of microseconds each on every dispatch. SIGCHLD still
// wakes the loop through the pipe: adopted orphans have no pidfd, and a
// kernel without pidfds has only it. The set is epoll's, kept as leaders
// start and are reaped, so that a wake-up costs what is ready, not what
// runs: a ppoll(2) set rebuilt at every wake-up made each of them (a
// memory sample, say) cost a look at every running leader's pidfd, the
// square of the running workers per second.

// loop serves the control socket fd until it ends or a terminating signal
// arrives.
func (s *server) loop(fd int, sigs chan os.Signal) int {
	if err := syscall.SetNonblock(fd, true); err != nil {
		return 99
	}
	s.conn = rawConn(fd)
	var wake [2]int
	if err := syscall.Pipe2(wake[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return 99
	}
	var stop atomic.Bool
	go func() {
		for sig := range sigs {
			if sig != syscall.SIGCHLD {
				stop.Store(true)
			}
			// EAGAIN: the pipe is full, a wake-up is pending already.
			_, _ = syscall.Write(wake[1], []byte{0})
		}
	}()

	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return 99
	}
	s.ep = &epollSet{fd: ep}
	if s.ep.add(fd, tagControl) != nil || s.ep.add(wake[0], tagWake) != nil {
		return 99
	}
	var fr frames
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(16*4))
	drain := make([]byte, 128)
	events := make([]syscall.EpollEvent, 128)
	for {
		timeout := -1
		if s.anyCleaning() {
			timeout = int(cleanupTick.Milliseconds())
		}
		n, err := syscall.EpollWait(ep, events, timeout)
		if err != nil && err != syscall.EINTR {
			return 99
		}
		var control, woken, exited bool
		for _, e := range events[:max(n, 0)] {
			switch e.Fd {
			case tagControl:
				control = true
			case tagWake:
				woken = true
			default:
				exited = true // a leader's pidfd
			}
		}
		if woken {
			for {
				if n, _ := syscall.Read(wake[0], drain); n <= 0 {
					break
				}
			}
			if stop.Load() {
				s.flush()
				s.shutdown()
				return 0
			}
			s.reap()
		}
		if exited {
			s.reap()
		}
		if control {
			reqs, open := receive(fd, &fr, buf, oob)
			s.handleAll(reqs)
			if !open {
				s.flush()
				s.shutdown()
				return 0
			}
		}
		s.progress()
		// The replies of this turn in one write: a worker that exits
		// leaving nothing gets its exited and done together.
		s.flush()
	}
}

// The tags of the loop's own descriptors in its epoll set; a leader's
// pidfd is tagged with itself (never negative).
const (
	tagControl = -1
	tagWake    = -2
)

// An epollSet is the supervisor loop's epoll instance.
type epollSet struct{ fd int }

// add watches fd for input, tagged tag.
func (e *epollSet) add(fd int, tag int32) error {
	return syscall.EpollCtl(e.fd, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: tag})
}

// watchLeader adds a new leader's pidfd to the loop's set: it becomes
// readable when the leader exits. A server without a loop (tests) has no
// set; one whose set refuses the pidfd (out of memory) still reaps the
// leader on SIGCHLD.
func (s *server) watchLeader(pidfd int) {
	if s.ep != nil && pidfd >= 0 {
		_ = s.ep.add(pidfd, int32(pidfd))
	}
}

// unwatchLeader takes a reaped leader's pidfd out of the set before it is
// closed: a copy held for a moment by a worker being forked would keep
// it in the set otherwise.
func (s *server) unwatchLeader(pidfd int) {
	if s.ep != nil && pidfd >= 0 {
		_ = syscall.EpollCtl(s.ep.fd, syscall.EPOLL_CTL_DEL, pidfd, nil)
	}
}

// receive reads the control socket fd until it would block and returns
// the requests that completes; open is false once the socket has ended (end
// of file, an error, or a frame that cannot be read).
func receive(fd int, fr *frames, buf, oob []byte) (reqs []request, open bool) {
	for {
		n, oobn, flags, _, err := syscall.Recvmsg(fd, buf, oob, syscall.MSG_CMSG_CLOEXEC)
		switch err {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return reqs, true
		}
		// On an error (ECONNRESET when the client was killed with
		// replies unread) the counts may be -1: a slice with them would
		// panic and leave every tree running.
		n, oobn = max(n, 0), max(oobn, 0)
		got, ok := fr.add(buf[:n], rights(oob[:oobn]), err == nil && flags&syscall.MSG_CTRUNC != 0)
		reqs = append(reqs, got...)
		if !ok || err != nil || n == 0 {
			return reqs, false
		}
	}
}

// rawConn is the control socket as a non-blocking descriptor the loop
// polls itself.
type rawConn int

// Write writes all of p, waiting while the socket is full (as a blocking
// write would). MSG_NOSIGNAL: a client that is gone is an EPIPE, not a
// signal.
func (c rawConn) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := syscall.SendmsgN(int(c), p[n:], nil, nil, syscall.MSG_NOSIGNAL)
		switch err {
		case nil:
			n += m
		case syscall.EINTR:
		case syscall.EAGAIN:
			if err := ppoll([]pollFd{{fd: int32(c), events: pollOut}}, -1); err != nil && err != syscall.EINTR {
				return n, err
			}
		default:
			return n, err
		}
	}
	return n, nil
}

func (c rawConn) CloseRead() error { return syscall.Shutdown(int(c), syscall.SHUT_RD) }

// forkExec starts a worker and returns its pidfd too (-1 where the kernel
// has none).
func forkExec(path string, argv []string, attr *syscall.ProcAttr) (pid, pidfd int, err error) {
	pidfd = -1
	sys := *attr.Sys
	sys.PidFD = &pidfd
	withFD := *attr
	withFD.Sys = &sys
	pid, err = syscall.ForkExec(path, argv, &withFD)
	if err == syscall.ENOSYS || err == syscall.EINVAL {
		// A kernel older than pidfds (5.3).
		pid, err = syscall.ForkExec(path, argv, attr)
		return pid, -1, err
	}
	return pid, pidfd, err
}

type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

const (
	pollIn  = 0x1
	pollOut = 0x4
)

// ppoll waits for an event on set, at most timeoutMS milliseconds (-1:
// without a limit).
func ppoll(set []pollFd, timeoutMS int) error {
	var ts *syscall.Timespec
	if timeoutMS >= 0 {
		t := syscall.NsecToTimespec(int64(timeoutMS) * 1e6)
		ts = &t
	}
	_, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&set[0])), uintptr(len(set)), uintptr(unsafe.Pointer(ts)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
