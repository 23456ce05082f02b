//go:build unix

package supervise

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"sync"
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
	pidfd  int    // the leader's pidfd until it is reaped (Linux), or -1
	cookie []byte // "NAME=value" as it appears in /proc/PID/environ
	grace  time.Duration

	exited   bool
	cleaning bool
	termAt   time.Time
	killed   bool
	seen     map[int]bool // processes signalled during cleanup (Linux)
	left     bool         // the group outlived its leader (process groups)
	// release ends the thread that forked a confined worker (runConfined),
	// once the worker is reaped; nil for a worker forked unconfined.
	release chan struct{}
}

type server struct {
	conn   ctlConn
	self   int
	jobs   map[uint64]*job
	byPid  map[int]*job
	orphan map[int]map[uint64]bool // unattributed orphans → jobs live when found (Linux)
	// unsettled holds the orphans whose environment read empty, since
	// when (Linux): not yet anyone's, nor every job's.
	unsettled map[int]time.Time
	out       []byte        // replies not yet written (flush)
	forks     chan forkTask // to the forker threads (startForkers)
	ep        *epollSet     // the loop's (Linux), nil before it runs
}

// ctlConn is the supervisor's side of the control socket, as flush writes
// to it.
type ctlConn interface {
	Write(p []byte) (int, error)
	CloseRead() error
}

// cleanupTick is how often a job's cleanup is moved along while its
// leftovers are being ended.
const cleanupTick = 2 * time.Millisecond

type request struct {
	m   *msg
	fds []int
	// noFDs: a start whose descriptors the supervisor could not take
	// (it is out of descriptors itself); it is answered with EMFILE.
	noFDs bool
}

// serve runs the supervisor on the control socket fd and returns its exit
// status.
func serve(fd int) int {
	// Workers get Pdeathsig on Linux, which fires when the forking thread
	// exits (golang/go#27505): fork only from goroutines locked to threads
	// that live as long as the process, this one and the forkers
	// (startForkers).
	runtime.LockOSThread()
	if err := setup(); err != nil {
		return 98
	}
	if err := closeOnExecAll(); err != nil {
		return 98
	}
	s := &server{
		self:   os.Getpid(),
		jobs:   map[uint64]*job{},
		byPid:  map[int]*job{},
		orphan: map[int]map[uint64]bool{},

		unsettled: map[int]time.Time{},
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	return s.loop(fd, sigs)
}

// frames assembles requests from the bytes read from the control socket
// and the descriptors that came with them (a frame may take several reads,
// and one read may bring several frames).
type frames struct {
	pending []byte
	fds     []int
	// lost counts the start requests whose descriptors did not all
	// arrive: the read that brought them was truncated (MSG_CTRUNC), as
	// when the supervisor has no descriptors left to take them into.
	lost int
}

// add takes what one read brought and returns the requests it completes;
// ok is false at a frame that cannot be read, after which the socket is
// dropped. truncated says the read's descriptors did not all arrive: those
// that did are closed, and the start request they came with is answered
// with EMFILE (one sendmsg's descriptors are never split between reads,
// nor joined to another's).
func (f *frames) add(data []byte, fds []int, truncated bool) (reqs []request, ok bool) {
	f.pending = append(f.pending, data...)
	if truncated {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		fds = nil
		f.lost++
	}
	f.fds = append(f.fds, fds...)
	for len(f.pending) >= 4 {
		size := int(binary.BigEndian.Uint32(f.pending))
		if size > maxFrame {
			return reqs, false
		}
		if len(f.pending) < 4+size {
			break
		}
		m, err := readFrame(bytes.NewReader(f.pending[:4+size]))
		f.pending = f.pending[4+size:]
		if err != nil {
			return reqs, false
		}
		r := request{m: m}
		if m.Op == opStart {
			switch {
			case len(f.fds) >= 3:
				r.fds, f.fds = f.fds[:3:3], f.fds[3:]
			case f.lost > 0:
				r.noFDs = true
				f.lost--
			default:
				return reqs, false
			}
		}
		reqs = append(reqs, r)
	}
	if len(f.pending) == 0 {
		f.pending = f.pending[:0:0] // let a big frame's buffer go
	}
	return reqs, true
}

// rights returns the descriptors passed in the control messages oob.
func rights(oob []byte) []int {
	if len(oob) == 0 {
		return nil
	}
	cmsgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, cm := range cmsgs {
		if r, err := syscall.ParseUnixRights(&cm); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
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
		s.startAll([]request{r})
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
	case opSample:
		j := s.jobs[r.m.ID]
		if j == nil || j.exited {
			return
		}
		if m, ok := s.memory(j); ok {
			s.send(&msg{Op: opSample, ID: j.id, Memory: &m})
		}
	}
}

// handleAll handles reqs in order, a run of starts at once (startAll).
func (s *server) handleAll(reqs []request) {
	for len(reqs) > 0 {
		n := 0
		for n < len(reqs) && reqs[n].m.Op == opStart {
			n++
		}
		if n == 0 {
			s.handle(reqs[0])
			n = 1
		} else {
			s.startAll(reqs[:n])
		}
		s.flush() // a started reply does not wait for the cleanups below
		reqs = reqs[n:]
	}
}

// A fork is one worker being started.
type fork struct {
	req        request
	pid, pidfd int
	err        error
	release    chan struct{} // see job.release
}

// run forks and execs the worker and closes the descriptors it was given.
func (f *fork) run() {
	if f.req.m.Sandbox != nil {
		f.runConfined()
	} else {
		f.exec()
	}
	for _, fd := range f.req.fds {
		syscall.Close(fd)
	}
}

// exec forks and execs the worker from the calling thread.
func (f *fork) exec() {
	m, fds := f.req.m, f.req.fds
	attr := &syscall.ProcAttr{
		Dir:   m.Dir,
		Env:   m.Env,
		Files: []uintptr{uintptr(fds[0]), uintptr(fds[1]), uintptr(fds[2])},
		Sys:   workerAttr(),
	}
	f.pid, f.pidfd, f.err = forkExec(m.Path, m.Argv, attr)
}

// startAll starts the workers of the start requests reqs and queues their
// replies. Several are forked at once, one on this thread and the others
// on forker threads: a fork holds its thread until the worker has exec'd,
// so one thread would start a fanout's workers one at a time.
func (s *server) startAll(reqs []request) {
	reqs = slices.DeleteFunc(slices.Clone(reqs), func(r request) bool {
		if r.noFDs {
			s.send(&msg{Op: opStarted, ID: r.m.ID, Err: "receiving the worker's stdin, stdout and stderr: " + syscall.EMFILE.Error(), Errno: int(syscall.EMFILE)})
		}
		return r.noFDs
	})
	if len(reqs) == 0 {
		return
	}
	fs := make([]fork, len(reqs))
	confined := 0
	for i, r := range reqs {
		fs[i].req = r
		if r.m.Sandbox != nil {
			confined++
		}
	}
	switch {
	case confined == len(fs) && len(fs) > 1:
		// Each confined worker is forked from a thread of its own
		// (runConfined): start them all at once.
		var wg sync.WaitGroup
		wg.Add(len(fs))
		for i := range fs {
			go func() {
				defer wg.Done()
				fs[i].run()
			}()
		}
		wg.Wait()
	case len(fs) > 1:
		s.startForkers()
		var wg sync.WaitGroup
		wg.Add(len(fs) - 1)
		for i := range fs[1:] {
			s.forks <- forkTask{&fs[i+1], &wg}
		}
		fs[0].run()
		wg.Wait()
	default:
		fs[0].run()
	}
	for _, f := range fs {
		m := f.req.m
		if f.err != nil {
			r := &msg{Op: opStarted, ID: m.ID, Err: f.err.Error()}
			if e, ok := f.err.(syscall.Errno); ok {
				r.Errno = int(e)
			}
			s.send(r)
			continue
		}
		j := &job{
			id:      m.ID,
			pid:     f.pid,
			pidfd:   f.pidfd,
			cookie:  []byte(m.Cookie),
			grace:   time.Duration(m.GraceMS) * time.Millisecond,
			seen:    map[int]bool{},
			release: f.release,
		}
		s.jobs[j.id] = j
		s.byPid[f.pid] = j
		s.watchLeader(f.pidfd)
		s.send(&msg{Op: opStarted, ID: m.ID, Pid: f.pid})
	}
}

type forkTask struct {
	f  *fork
	wg *sync.WaitGroup
}

// startForkers starts, once, the forker goroutines: as many as the
// processors Go uses, each locked to its own thread for good. Workers get
// Pdeathsig on Linux, which fires when the forking thread exits
// (golang/go#27505): a forker thread never does, as its goroutine never
// returns nor unlocks.
func (s *server) startForkers() {
	if s.forks != nil {
		return
	}
	s.forks = make(chan forkTask)
	for range runtime.GOMAXPROCS(0) {
		go func() {
			runtime.LockOSThread()
			for t := range s.forks {
				t.f.run()
				t.wg.Done()
			}
		}()
	}
}

// reap collects every exited child: job leaders are reported, orphans are
// simply reaped.
func (s *server) reap() {
	for {
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, &ru)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		delete(s.orphan, pid)
		delete(s.unsettled, pid)
		j := s.byPid[pid]
		if j == nil {
			continue
		}
		delete(s.byPid, pid)
		if j.release != nil {
			close(j.release)
			j.release = nil
		}
		if j.pidfd >= 0 {
			s.unwatchLeader(j.pidfd)
			syscall.Close(j.pidfd)
			j.pidfd = -1
		}
		j.exited = true
		j.cleaning = true
		s.send(&msg{Op: opExited, ID: j.id, Status: uint32(ws), MaxRSS: maxRSS(&ru)})
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
