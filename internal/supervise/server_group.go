//go:build unix && !linux

package supervise

import (
	"runtime"
	"syscall"
	"time"
)

// Without a child subreaper (darwin has none) the supervisor holds a
// worker's tree by its process group alone. The worker leads a group of its
// own; signals go to the whole group; when the leader exits, whatever is
// still in the group (kill(-pgid, 0) answers) gets SIGTERM, the grace
// period, then SIGKILL, and the job is done when the group is empty. A
// descendant that leaves the group, by setsid or setpgid (as agent CLIs do
// for their tools), is out of reach: it is neither signalled, nor waited
// for, nor counted, nor killed, and it outlives the job under launchd. A
// double fork that stays in the group is still caught. Leftovers is 1 when
// the group outlived its leader, whatever the number of processes: they
// cannot be counted without listing them. And as there is no Pdeathsig, a
// supervisor that is itself SIGKILLed leaves its workers running.

func setup() error { return nil }

func workerAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func (s *server) signalRunning(j *job, sig syscall.Signal) { signalGroup(j.pid, sig) }

// memory is not measured here: there is no /proc to read a process's
// resident memory from without cgo.
func (s *server) memory(*job) (Memory, bool) { return Memory{}, false }

// maxRSS is ru's peak resident memory in bytes: darwin counts bytes, the
// BSDs kilobytes.
func maxRSS(ru *syscall.Rusage) int64 {
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) * 1024
}

// groupAlive reports whether any process is left in the group pgid.
func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) != syscall.ESRCH
}

// progress moves every exited job's cleanup along: the group gets SIGTERM,
// then SIGKILL once the grace period is over; a job whose group is empty is
// done.
func (s *server) progress() {
	now := time.Now()
	for _, j := range s.jobs {
		if !j.cleaning {
			continue
		}
		if !groupAlive(j.pid) {
			s.finish(j)
			continue
		}
		j.left = true
		switch {
		case j.killed || (!j.termAt.IsZero() && now.Sub(j.termAt) >= j.grace):
			j.killed = true
			_ = syscall.Kill(-j.pid, syscall.SIGKILL)
		case j.termAt.IsZero():
			j.termAt = now
			signalGroup(j.pid, syscall.SIGTERM)
		}
	}
	s.reap()
}

func (s *server) finish(j *job) {
	delete(s.jobs, j.id)
	left := 0
	if j.left {
		left = 1
	}
	s.send(&msg{Op: opDone, ID: j.id, Leftovers: left})
}

// shutdown terminates every job's group: SIGTERM, the longest grace period
// of any job, then SIGKILL until every group is empty.
func (s *server) shutdown() {
	grace := time.Duration(0)
	for _, j := range s.jobs {
		grace = max(grace, j.grace)
		signalGroup(j.pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	delay := time.Millisecond
	for {
		s.reap()
		alive := false
		for _, j := range s.jobs {
			if groupAlive(j.pid) {
				alive = true
				if !time.Now().Before(deadline) {
					_ = syscall.Kill(-j.pid, syscall.SIGKILL)
				}
			}
		}
		if !alive {
			return
		}
		time.Sleep(delay)
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}
