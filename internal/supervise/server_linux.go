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
	"unsafe"

	"github.com/pilotworkers/pilot/internal/procfs"
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

const prSetChildSubreaper = 36

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
	seen     map[int]bool // processes signalled during cleanup
}

type server struct {
	conn   *net.UnixConn
	self   int
	jobs   map[uint64]*job
	byPid  map[int]*job
	orphan map[int]map[uint64]bool // unattributed orphans → jobs live when found
}

type request struct {
	m   *msg
	fds []int
}

// serve runs the supervisor on the control socket fd and returns its exit
// status.
func serve(fd int) int {
	// Workers get Pdeathsig, which fires when the forking thread exits
	// (golang/go#27505): fork only from this goroutine, locked to a thread
	// that lives as long as the process.
	runtime.LockOSThread()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
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
				s.shutdown()
				return 0
			}
			s.handle(r)
		case sig := <-sigs:
			if sig != syscall.SIGCHLD {
				s.shutdown()
				return 0
			}
			s.reap()
		case <-tick.C:
		}
		s.progress()
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

func (s *server) send(m *msg) {
	frame, err := encodeFrame(m)
	if err == nil {
		_, err = s.conn.Write(frame)
	}
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
		pids := s.tree(j)
		if sig == syscall.SIGKILL {
			freeze(pids)
		}
		_ = syscall.Kill(-j.pid, sig)
		if sig == syscall.SIGTERM {
			_ = syscall.Kill(-j.pid, syscall.SIGCONT)
		}
		for _, p := range pids {
			signalProc(p, sig)
		}
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
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
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

// progress moves every exited job's cleanup along: leftovers get SIGTERM,
// then SIGKILL once the grace period is over; a job whose tree is empty is
// done.
func (s *server) progress() {
	now := time.Now()
	for _, j := range s.jobs {
		if !j.cleaning {
			continue
		}
		pids := s.tree(j)
		if len(pids) == 0 {
			s.finish(j)
			continue
		}
		switch {
		case j.killed || (!j.termAt.IsZero() && now.Sub(j.termAt) >= j.grace):
			j.killed = true
			freeze(pids)
			for _, p := range pids {
				j.seen[p] = true
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		case j.termAt.IsZero():
			j.termAt = now
			for _, p := range pids {
				j.seen[p] = true
				signalProc(p, syscall.SIGTERM)
			}
		default:
			for _, p := range pids {
				if !j.seen[p] {
					j.seen[p] = true
					signalProc(p, syscall.SIGTERM)
				}
			}
		}
	}
	s.reap()
}

func (s *server) finish(j *job) {
	delete(s.jobs, j.id)
	s.send(&msg{Op: opDone, ID: j.id, Leftovers: len(j.seen)})
	for pid, owners := range s.orphan {
		delete(owners, j.id)
		if len(owners) == 0 {
			delete(s.orphan, pid)
			sub, _ := subtree(pid)
			for _, p := range append(sub, pid) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
	}
}

// tree lists the live processes that belong to j: the leader's descendants
// (and the leader while it lives), plus orphans re-parented to the
// supervisor that carry j's cookie, with their descendants.
func (s *server) tree(j *job) []int {
	if j.exited && !hasChildren() {
		// A subreaper without children has no descendants at all: the
		// common case of a worker that left nothing behind, answered
		// without reading /proc.
		return nil
	}
	for {
		pids, dead := s.treeOnce(j)
		if len(pids) > 0 || !dead {
			return pids
		}
		s.reap()
	}
}

func (s *server) treeOnce(j *job) (out []int, dead bool) {
	if !j.exited {
		out = append(out, j.pid)
		sub, d := subtree(j.pid)
		out = append(out, sub...)
		dead = d
	}
	for _, c := range procfs.Children(s.self) {
		if s.byPid[c] != nil {
			continue
		}
		if !procfs.Alive(c) {
			dead = true
			continue
		}
		env, err := settledEnviron(c)
		if err != nil {
			continue
		}
		if procfs.HasEntry(env, j.cookie) {
			out = append(out, c)
			sub, d := subtree(c)
			out = append(out, sub...)
			dead = dead || d
			continue
		}
		if s.orphan[c] == nil && !s.ownedByAny(env) {
			owners := map[uint64]bool{}
			for id := range s.jobs {
				owners[id] = true
			}
			s.orphan[c] = owners
		}
	}
	return out, dead
}

// settledEnviron reads pid's environment. A process in the middle of
// execve shows an empty one for a moment (its new memory map exists before
// the kernel records where its environment lies), which would make a
// worker's descendant look like a stranger: an empty answer is asked again
// a few times, briefly, before it is believed (a process may really have
// cleared its environment).
func settledEnviron(pid int) ([]byte, error) {
	delay := 100 * time.Microsecond
	for i := 0; ; i++ {
		env, err := procfs.Environ(pid)
		if err != nil || len(env) > 0 || i == 6 {
			return env, err
		}
		time.Sleep(delay)
		delay *= 2
	}
}

func (s *server) ownedByAny(env []byte) bool {
	for _, j := range s.jobs {
		if procfs.HasEntry(env, j.cookie) {
			return true
		}
	}
	return false
}

// shutdown terminates everything below the supervisor: SIGTERM, the longest
// grace period of any job, then SIGKILL until nothing is left.
func (s *server) shutdown() {
	grace := time.Duration(0)
	for _, j := range s.jobs {
		if j.grace > grace {
			grace = j.grace
		}
	}
	termed := map[int]bool{}
	deadline := time.Now().Add(grace)
	delay := time.Millisecond
	for {
		s.reap()
		pids := s.settledSubtree()
		if len(pids) == 0 && !hasChildren() {
			// No child at all, so no descendant: a walk of /proc can
			// miss a process while it is being re-parented to the
			// supervisor (its parent exiting), but that parent is
			// still a child of the supervisor until it is reaped.
			return
		}
		if time.Now().Before(deadline) {
			for _, p := range pids {
				if !termed[p] {
					termed[p] = true
					signalProc(p, syscall.SIGTERM)
				}
			}
		} else {
			freeze(pids)
			for _, p := range pids {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		time.Sleep(delay)
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}

// hasChildren reports whether the supervisor has any child, live or
// zombie, without reaping it.
func hasChildren() bool {
	const pAll, wNowait = 0, 0x1000000
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pAll, 0, uintptr(unsafe.Pointer(&info[0])),
			syscall.WEXITED|syscall.WNOHANG|wNowait, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		return errno != syscall.ECHILD
	}
}

// signalProc sends sig to pid, and SIGCONT after a SIGTERM so a stopped
// process can act on it.
func signalProc(pid int, sig syscall.Signal) {
	_ = syscall.Kill(pid, sig)
	if sig == syscall.SIGTERM {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}

// freeze stops pids so none of them can fork while the tree is being killed.
func freeze(pids []int) {
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGSTOP)
	}
}

// subtree lists pid's live descendants, breadth first. dead reports that a
// listed child had died: its own children may have been re-parented after
// the list was read, so an empty answer with dead set must be asked again.
func subtree(pid int) (pids []int, dead bool) {
	queue := procfs.Children(pid)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if !procfs.Alive(p) {
			dead = true
			continue
		}
		pids = append(pids, p)
		queue = append(queue, procfs.Children(p)...)
	}
	return pids, dead
}

// settledSubtree is subtree(self) asked until the answer is not clouded by
// a process that died during the walk, reaping in between.
func (s *server) settledSubtree() []int {
	for {
		pids, dead := subtree(s.self)
		if len(pids) > 0 || !dead {
			return pids
		}
		s.reap()
	}
}
