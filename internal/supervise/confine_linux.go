package supervise

import (
	"runtime"

	"github.com/pilotworkers/pilot/internal/landlock"
)

// runConfined forks the worker from a thread of its own that it first
// confines with the request's Landlock ruleset: the worker inherits the
// thread's domain, the supervisor's other threads keep none. Landlock cannot
// be lifted from a thread, so this one is never used again: its goroutine
// stays locked to it until the worker is reaped (job.release), then returns,
// and the thread ends with it. It lives that long because a worker's
// parent-death signal fires when the thread that forked it exits
// (golang/go#27505). The runtime never starts a thread from a locked one
// (it asks its template thread), so the domain spreads to no other thread.
// A thread is not kept to fork the next worker with an equal ruleset:
// workers forked from one thread share its domain, and Landlock lets a
// process read the /proc files (the environment, a provider's key in it)
// of another in its own domain (TestSandboxWorkerCannotReadAnother-
// ProcessEnvironment fails so).
func (f *fork) runConfined() {
	started := make(chan struct{})
	release := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := landlock.Restrict(f.req.m.Sandbox); err != nil {
			f.err = err
			close(started)
			return
		}
		// The domain keeps the worker from other processes' /proc files,
		// but a root worker's CAP_SYS_ADMIN or CAP_PERFMON would still
		// read their environments (a sibling's credential): gone too.
		if _, err := landlock.DropEnvironCaps(); err != nil {
			f.err = err
			close(started)
			return
		}
		f.exec()
		ok := f.err == nil
		close(started)
		if ok {
			<-release
		}
	}()
	<-started
	if f.err == nil {
		f.release = release
	}
}
