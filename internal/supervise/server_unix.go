//go:build unix

package supervise

import (
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

func init() {
	if fd := os.Getenv(EnvSupervisor); fd != "" {
		n, err := strconv.Atoi(fd)
		if err != nil {
			os.Exit(97)
		}
		os.Exit(serve(n))
	}
}

// job is the supervisor's view of one worker.
type job struct {
	id     uint64
	pid    int
	cookie []byte // "NAME=value" as it appears in /proc/PID/environ
	grace  time.Duration

	exited   bool
	cleaning bool
	termAt   time.Time
	killed   bool
	seen     map[int]bool // processes signalled during cleanup (Linux)
	left     bool         // the group outlived its leader (process groups)
}

type server struct {
	conn   *net.UnixConn
	self   int
	jobs   map[uint64]*job
	byPid  map[int]*job
	orphan map[int]map[uint64]bool // unattributed orphans → jobs live when found (Linux)
	out    []byte                  // replies not yet written (flush)
}

type request struct {
	m   *msg
	fds []int
}

// serve runs the supervisor on the control socket fd and returns its exit
// status.
func serve(fd int) int {
	// Workers get Pdeathsig on Linux, which fires when the forking thread
	// exits (golang/go#27505): fork only from this goroutine, locked to a
	// thread that lives as long as the process.
	runtime.LockOSThread()
	if err := setup(); err != nil {
		return 98
	}
	f := os.NewFile(uintptr(fd), "control")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return 99
	}
	s := &server{
		conn:   c.(*net.UnixConn),
		self:   os.Getpid(),
		jobs:   map[uint64]*job{},
		byPid:  map[int]*job{},
		orphan: map[int]map[uint64]bool{},
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	reqs := make(chan request)
	go s.read(reqs)

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
				tick.Reset(2 * time.Millisecond)
			} else {
				tick.Stop()
			}
			ticking = want
		}
	}
}

// read turns the control socket into requests; it closes reqs at end of
// file or on any error.
func (s *server) read(reqs chan<- request) {
	defer close(reqs)
	var pending []byte
	var fds []int
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(16*4))
	for {
		n, oobn, _, _, err := s.conn.ReadMsgUnix(buf, oob)
		if err != nil {
			// On an error (ECONNRESET when the client was killed
			// with replies unread) the counts may be -1: a slice
			// with them would panic and leave every tree running.
			n, oobn = max(n, 0), max(oobn, 0)
		}
		if oobn > 0 {
			if cmsgs, perr := syscall.ParseSocketControlMessage(oob[:oobn]); perr == nil {
				for _, cm := range cmsgs {
					if rights, rerr := syscall.ParseUnixRights(&cm); rerr == nil {
						fds = append(fds, rights...)
					}
				}
			}
		}
		pending = append(pending, buf[:n]...)
		for len(pending) >= 4 {
			size := int(binary.BigEndian.Uint32(pending))
			if size > maxFrame {
				return
			}
			if len(pending) < 4+size {
				break
			}
			m, ferr := readFrame(bytes.NewReader(pending[:4+size]))
			pending = pending[4+size:]
			if ferr != nil {
				return
			}
			r := request{m: m}
			if m.Op == opStart {
				if len(fds) < 3 {
					return
				}
				r.fds, fds = fds[:3:3], fds[3:]
			}
			reqs <- r
		}
		if err != nil || n == 0 {
			return
		}
	}
}

// send queues a reply; flush writes the queue.
func (s *server) send(m *msg) {
	frame, err := encodeFrame(m)
	if err != nil {
		s.conn.CloseRead()
		return
	}
	s.out = append(s.out, frame...)
}

func (s *server) flush() {
	if len(s.out) == 0 {
		return
	}
	_, err := s.conn.Write(s.out)
	s.out = s.out[:0]
	if err != nil {
		// The client is gone: the read side will see it too and shut
		// everything down.
		s.conn.CloseRead()
	}
}

func (s *server) handle(r request) {
	switch r.m.Op {
	case opStart:
		s.start(r.m, r.fds)
	case opSignal:
		j := s.jobs[r.m.ID]
		if j == nil {
			return
		}
		sig := syscall.Signal(r.m.Sig)
		if j.exited {
			if sig == syscall.SIGKILL {
				j.killed = true // escalate the cleanup now
			}
			return
		}
		s.signalRunning(j, sig)
	}
}

func (s *server) start(m *msg, fds []int) {
	defer func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}()
	attr := &syscall.ProcAttr{
		Dir:   m.Dir,
		Env:   m.Env,
		Files: []uintptr{uintptr(fds[0]), uintptr(fds[1]), uintptr(fds[2])},
		Sys:   workerAttr(),
	}
	pid, err := syscall.ForkExec(m.Path, m.Argv, attr)
	if err != nil {
		s.send(&msg{Op: opStarted, ID: m.ID, Err: err.Error()})
		return
	}
	j := &job{
		id:     m.ID,
		pid:    pid,
		cookie: []byte(m.Cookie),
		grace:  time.Duration(m.GraceMS) * time.Millisecond,
		seen:   map[int]bool{},
	}
	s.jobs[j.id] = j
	s.byPid[pid] = j
	s.send(&msg{Op: opStarted, ID: m.ID, Pid: pid})
}

// reap collects every exited child: job leaders are reported, orphans are
// simply reaped.
func (s *server) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		delete(s.orphan, pid)
		j := s.byPid[pid]
		if j == nil {
			continue
		}
		delete(s.byPid, pid)
		j.exited = true
		j.cleaning = true
		s.send(&msg{Op: opExited, ID: j.id, Status: uint32(ws)})
	}
}

func (s *server) anyCleaning() bool {
	for _, j := range s.jobs {
		if j.cleaning {
			return true
		}
	}
	return false
}

// signalGroup sends sig to the process group pgid, and SIGCONT after a
// SIGTERM so a stopped process can act on it.
func signalGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
	if sig == syscall.SIGTERM {
		_ = syscall.Kill(-pgid, syscall.SIGCONT)
	}
}
