package supervise

import (
	"os"
	"syscall"
	"time"
	"unsafe"

	"github.com/pilotworkers/pilot/internal/procfs"
)

// On Linux the supervisor is a child subreaper: a worker's descendants that
// double-fork or call setsid are re-parented to it, not to init, so they
// stay in its process tree, which it reads from /proc. Workers get
// Pdeathsig SIGKILL: they die with the supervisor.

const prSetChildSubreaper = 36

// Comm is the supervisor's name in ps, top and pstree: its comm, which
// the kernel keeps to 15 bytes (so not "pilot-supervisor"; the command
// line, as ps -f shows it, still ends in pilot-supervisor).
const Comm = "pilot-supervise"

// setup makes the supervisor a child subreaper, named Comm.
func setup() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	// Writing /proc/self/comm names the process's main thread, whichever
	// thread writes. Without it the supervisor shows as "exe" (it runs
	// as /proc/self/exe). A failure only leaves that name.
	_ = os.WriteFile("/proc/self/comm", []byte(Comm), 0)
	return nil
}

func workerAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalRunning sends sig to every process of a running job's tree: its
// process group, and each descendant, whatever group it moved to.
func (s *server) signalRunning(j *job, sig syscall.Signal) {
	pids, _ := s.tree(j)
	if sig == syscall.SIGKILL {
		freeze(pids)
	}
	signalGroup(j.pid, sig)
	for _, p := range pids {
		signalProc(p, sig)
	}
}

// memory measures a running job's tree: the resident memory of each of its
// processes, from /proc.
func (s *server) memory(j *job) (Memory, bool) {
	var m Memory
	pids, _ := s.tree(j)
	for _, p := range pids {
		rss, comm, ok := procfs.RSS(p)
		if !ok {
			continue
		}
		m.RSS += rss
		m.Procs++
		if rss > m.TopRSS || m.Top == 0 {
			m.Top, m.TopComm, m.TopRSS = p, comm, rss
		}
	}
	return m, true
}

// maxRSS is ru's peak resident memory in bytes (Linux counts kilobytes).
func maxRSS(ru *syscall.Rusage) int64 { return int64(ru.Maxrss) * 1024 }

// progress moves every exited job's cleanup along: leftovers get SIGTERM,
// then SIGKILL once the grace period is over; a job whose tree is empty is
// done.
func (s *server) progress() {
	now := time.Now()
	for _, j := range s.jobs {
		if !j.cleaning {
			continue
		}
		pids, unsettled := s.tree(j)
		if len(pids) == 0 {
			if !unsettled {
				s.finish(j)
			}
			continue // an orphan not yet known to be another job's may be j's
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
// supervisor that carry j's cookie, with their descendants. unsettled
// says an orphan's environment read empty (a process in the middle of
// execve, for as long as the machine's load keeps it there): it may be
// j's, so j's cleanup is not done until it reads otherwise, or until
// unsettledLimit makes it an orphan of every job.
func (s *server) tree(j *job) (pids []int, unsettled bool) {
	if j.exited && !hasChildren() {
		// A subreaper without children has no descendants at all: the
		// common case of a worker that left nothing behind, answered
		// without reading /proc.
		return nil, false
	}
	for {
		pids, dead, unsettled := s.treeOnce(j)
		if len(pids) > 0 || !dead {
			return pids, unsettled
		}
		s.reap()
	}
}

// unsettledLimit is how long an orphan's environment may read empty
// before the supervisor believes it (the process cleared it) and holds
// the orphan for every job then running.
const unsettledLimit = time.Second

func (s *server) treeOnce(j *job) (out []int, dead, unsettled bool) {
	if !j.exited {
		out = append(out, j.pid)
		sub, d := subtree(j.pid)
		out = append(out, sub...)
		dead = d
	}
	for _, c := range s.adopted() {
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
		switch s.place(c, env, j, time.Now()) {
		case placeMine:
			out = append(out, c)
			sub, d := subtree(c)
			out = append(out, sub...)
			dead = dead || d
		case placeUnsettled:
			unsettled = true
		}
	}
	return out, dead, unsettled
}

// adopted lists the children of the supervisor's main thread: every
// orphan re-parented to the supervisor, with the workers that thread
// forked. The kernel gives an orphan to the first live thread of its
// subreaper (find_new_reaper, find_alive_thread), which is the process's
// main thread while it lives, and the children of a thread that exits go
// there too; the workers forked on other threads (forkers, and a thread
// per confined worker) are listed under those threads, and are job
// leaders, not orphans. So the orphans are found by reading one file,
// not one per thread: the supervisor has a thread per running confined
// worker, and reading all of theirs for every job's sample and cleanup
// cost the square of the running workers. Where the one file cannot be
// read, every thread's children are listed.
func (s *server) adopted() []int {
	if kids, ok := procfs.ThreadChildren(s.self, s.self); ok {
		return kids
	}
	return procfs.Children(s.self)
}

type placement int

const (
	placeOther     placement = iota // another job's, or held for every job
	placeMine                       // carries the job's cookie
	placeUnsettled                  // its environment read empty: not yet known
)

// place says whose orphan c is, whose environment read env at now, as j's
// tree is being listed. An orphan no job's cookie claims is held for every
// job then running (finish ends it when the last of them ends), except
// that an empty environment, which a process shows while in execve, is
// not believed until it has read empty for unsettledLimit.
func (s *server) place(c int, env []byte, j *job, now time.Time) placement {
	if procfs.HasEntry(env, j.cookie) {
		delete(s.unsettled, c)
		return placeMine
	}
	if s.orphan[c] != nil || s.ownedByAny(env) {
		delete(s.unsettled, c)
		return placeOther
	}
	if len(env) == 0 {
		since, ok := s.unsettled[c]
		if !ok {
			since = now
			s.unsettled[c] = now
		}
		if now.Sub(since) < unsettledLimit {
			return placeUnsettled
		}
	}
	delete(s.unsettled, c)
	owners := map[uint64]bool{}
	for id := range s.jobs {
		owners[id] = true
	}
	s.orphan[c] = owners
	return placeOther
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
