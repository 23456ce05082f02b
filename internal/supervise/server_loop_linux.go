package supervise

import (
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// On Linux the supervisor's one locked thread waits in ppoll(2) on the
// control socket, each running leader's pidfd and a wake-up pipe written on
// signals. A request or a leader's exit wakes that thread directly: no
// goroutine reads the socket or relays SIGCHLD, whose hand-overs to a locked
// thread cost tens of microseconds each on every dispatch. SIGCHLD still
// wakes the loop through the pipe: adopted orphans have no pidfd, and a
// kernel without pidfds has only it.

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

	var fr frames
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(16*4))
	drain := make([]byte, 128)
	var set []pollFd
	for {
		set = append(set[:0], pollFd{fd: int32(fd), events: pollIn}, pollFd{fd: int32(wake[0]), events: pollIn})
		for _, j := range s.jobs {
			if !j.exited && j.pidfd >= 0 {
				set = append(set, pollFd{fd: int32(j.pidfd), events: pollIn})
			}
		}
		timeout := -1
		if s.anyCleaning() {
			timeout = int(cleanupTick.Milliseconds())
		}
		if err := ppoll(set, timeout); err != nil && err != syscall.EINTR {
			return 99
		}
		if set[1].revents != 0 {
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
		for _, p := range set[2:] {
			if p.revents != 0 {
				s.reap()
				break
			}
		}
		if set[0].revents != 0 {
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
