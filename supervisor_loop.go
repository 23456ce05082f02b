package pilot

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/internal/supervise"
	"github.com/pilotworkers/pilot/size"
)

// This file is the supervision loop: a state machine (supervisor) that
// decides what pilot does about a running worker, and the driver
// ((*run).drive) that feeds it real time, timers and channels and performs
// what it decides. The machine reads no clock: every input carries the
// time, and every input returns the actions to take (events to emit,
// signals to send, timers to arm or stop). What it needs of the worker
// beyond the time (the stall clock, the session, the retry loop) it asks a
// workerView.

// A loopTimer is one of the loop's timers.
type loopTimer int

const (
	timerTimeout  loopTimer = iota // the Task's Timeout, from the start
	timerIdle                      // the IdleTimeout, from the last output
	timerGrace                     // from SIGTERM to SIGKILL
	timerFinished                  // from the worker's final result to ending it
	numTimers
)

func (k loopTimer) String() string {
	switch k {
	case timerTimeout:
		return "timeout"
	case timerIdle:
		return "idle"
	case timerGrace:
		return "grace"
	case timerFinished:
		return "finished"
	}
	return "loopTimer(?)"
}

type actionKind int

const (
	actEmit   actionKind = iota // emit event
	actSignal                   // send sig to the worker's process tree
	actArm                      // (re)start timer to fire after the duration
	actStop                     // stop timer: it no longer applies
	actSample                   // measure the tree's memory
)

// An action is one thing the machine asks its driver to do.
type action struct {
	kind  actionKind
	event Event
	sig   syscall.Signal
	timer loopTimer
	after time.Duration
}

func emitAction(e Event) action                     { return action{kind: actEmit, event: e} }
func signalAction(s syscall.Signal) action          { return action{kind: actSignal, sig: s} }
func armAction(k loopTimer, d time.Duration) action { return action{kind: actArm, timer: k, after: d} }
func stopAction(k loopTimer) action                 { return action{kind: actStop, timer: k} }

// A sight is one look at the worker: what the stall policy says about its
// silence, and the phase and silence it judged.
type sight struct {
	stall      stallAction
	inspection *StallInspection // the check that acted; nil for stallNone
	phase      SessionPhase
	silence    time.Duration
}

// A workerView is what the machine asks of the worker besides the time.
// sessionWatch is the real one.
type workerView interface {
	// look takes one look at the worker at now: its output, its session
	// file, its phase, and what the stall policy says of its silence.
	look(now time.Time) sight
	// retryLoop returns the worker's own retry loop, if it is in one.
	retryLoop() (RetryLoop, bool)
	// finished reports whether its session or stream shows it finished.
	// (Not an errored turn: pi, for one, retries after those.)
	finished() bool
}

// supervisor is the state machine of one worker's supervision. Set its
// configuration and view, then call started once; it is for one goroutine.
//
// It ends the worker (SIGTERM, then SIGKILL after the grace period) at
// most once: when ctx is done, the timeout runs out, the idle timeout runs
// out (unless a tool runs inside the tool threshold), the stall policy
// says so, the worker has retried a failing model call for longer than
// the retry-loop limit, or a sample of its tree's memory is over the
// memory limit. Once the worker has exited, none of these apply;
// a grace period already running still ends its leftovers.
type supervisor struct {
	timeout   time.Duration // zero or negative: none
	idle      time.Duration // zero or negative: none
	grace     time.Duration
	heartbeat time.Duration
	// finishGrace is how long a finished worker may take to exit; zero
	// or negative: as long as it likes.
	finishGrace time.Duration
	finishSeen  bool // the worker's final result was seen
	stall       StallPolicy
	view        workerView
	// budget says whether the worker spent past its caps, and what it
	// spent; nil without caps.
	budget func() (string, bool)
	spent  string
	// sample asks for samples of the tree's memory while the worker
	// runs: at every heartbeat when it has a memory limit or everyBeat is
	// set (a Fanout's memory budget follows the samples); else at each of
	// the first sampleSteady heartbeats, and of the sampleSteady after a
	// sample that moved (memoryMoved), and at every sampleSteady-th in
	// between. memLimit is the most the tree may hold (zero or negative:
	// no limit), and memOver the sample that was over it.
	sample    bool
	everyBeat bool
	beats     int   // heartbeats so far
	hot       int   // heartbeats left that sample, whatever the count
	lastRSS   int64 // the last sample's resident memory; -1 before any
	memLimit  size.Bytes
	memOver   *size.Tree

	lastOutput  time.Time
	deferredFor time.Time // lastOutput of the silence last deferred; zero for none
	armed       [numTimers]bool
	out         []action

	// terminated is set once pilot begins to end the worker, for reason;
	// finishedFirst when the worker had finished by then.
	terminated    bool
	reason        FailureClass
	finishedFirst bool
	workerExited  bool // the worker has exited
	over          bool // its whole tree is gone: the loop is over
}

// started starts the clocks of a worker started at now.
func (m *supervisor) started(now time.Time) []action {
	m.lastOutput = now
	if m.timeout > 0 {
		m.arm(timerTimeout, m.timeout)
	}
	if m.idle > 0 {
		m.arm(timerIdle, m.idle)
	}
	return m.take()
}

// output records the time of the worker's last output.
func (m *supervisor) output(at time.Time) { m.lastOutput = at }

// tick is the heartbeat: a look at the worker, as long as it runs. The
// looks go on while pilot ends it, and stop once it has exited.
func (m *supervisor) tick(now time.Time) []action {
	if !m.workerExited {
		m.look(now)
		if m.budget != nil && !m.terminated {
			if why, over := m.budget(); over {
				m.spent = why
				m.terminate(FailBudget, why)
			}
		}
		if m.sample && m.sampleDue() {
			m.out = append(m.out, action{kind: actSample})
		}
		if m.finishGrace > 0 && !m.terminated {
			switch done := m.view.finished(); {
			case done && !m.finishSeen:
				m.finishSeen = true
				m.arm(timerFinished, m.finishGrace)
			case !done && m.finishSeen:
				// It went on after its final result (a new turn): the
				// grace starts again at its next one.
				m.finishSeen = false
				m.stop(timerFinished)
			}
		}
	}
	return m.take()
}

// timer handles timer k firing at now.
func (m *supervisor) timer(k loopTimer, now time.Time) []action {
	if !m.armed[k] {
		return nil // stopped: it no longer applies
	}
	m.armed[k] = false
	switch k {
	case timerTimeout:
		m.terminate(FailTimeout, "timeout of "+m.timeout.String()+" reached")
	case timerIdle:
		m.idleOver(now)
	case timerGrace:
		m.emit(Event{Type: event.Terminate, Message: "grace period of " + m.grace.String() + " over: sending SIGKILL to the worker's process tree"})
		m.out = append(m.out, signalAction(syscall.SIGKILL))
	case timerFinished:
		if !m.workerExited && m.view.finished() {
			m.terminate(reasonFinished, "the worker printed its final result and has not exited for "+m.finishGrace.String()+"; its verdict stands")
		}
	}
	return m.take()
}

// cancel handles the caller's context being done, for cause.
func (m *supervisor) cancel(cause error) []action {
	if !m.workerExited {
		m.terminate(FailCancelled, "context done ("+cause.Error()+")")
	}
	return m.take()
}

// sampleSteady is how many heartbeats a tree whose memory holds steady
// goes between samples: a sample walks the tree in /proc (the children of
// each thread of each process, and each one's stat), most of what the
// process supervisor spends on a running worker.
const sampleSteady = 5

// sampleDue counts a heartbeat and says whether it samples the tree.
func (m *supervisor) sampleDue() bool {
	m.beats++
	if m.hot > 0 {
		m.hot--
		return true
	}
	return m.everyBeat || m.memLimit > 0 || m.beats <= sampleSteady || m.beats%sampleSteady == 0
}

// memoryMoved reports whether a tree's resident memory moved from from to
// to far enough to be worth telling (a memory event) and following
// closely: by an eighth, or 16 MiB, whichever is more.
func memoryMoved(from, to int64) bool {
	step, d := max(int64(16*size.MiB), from/8), to-from
	return d >= step || -d >= step
}

// memory handles a sample of the tree's memory: past the limit, the
// worker is ended. Once it has exited, its leftovers are the process
// supervisor's to end. A sample that moved by a step since the last has
// the next sampleSteady heartbeats sample.
func (m *supervisor) memory(tm size.Tree) []action {
	if m.lastRSS >= 0 && memoryMoved(m.lastRSS, tm.RSSBytes) {
		m.hot = sampleSteady
	}
	m.lastRSS = tm.RSSBytes
	if m.memLimit > 0 && tm.RSSBytes > int64(m.memLimit) && !m.workerExited && !m.terminated {
		m.memOver = &tm
		m.terminate(FailMemoryLimit, memoryOver(tm, m.memLimit))
	}
	return m.take()
}

// exited handles the worker's exit. Its leftovers are the process
// supervisor's to clean up; the timeouts no longer apply.
func (m *supervisor) exited() []action {
	m.workerExited = true
	m.stop(timerTimeout)
	m.stop(timerIdle)
	m.stop(timerFinished)
	return m.take()
}

// done handles the end of the worker's whole tree: the loop is over.
func (m *supervisor) done() []action {
	m.over = true
	return m.take()
}

// idleOver handles the idle timer: it re-arms from the last output while
// there was output since, defers to the tool threshold while a tool runs
// inside it, and ends the worker otherwise.
func (m *supervisor) idleOver(now time.Time) {
	since := now.Sub(m.lastOutput)
	if since < m.idle {
		m.arm(timerIdle, m.idle-since)
		return
	}
	// Judge by the session as it is now, not as of the last heartbeat,
	// which a busy machine may have delayed.
	s := m.look(now)
	switch {
	case m.terminated:
	case m.stall.suppressIdleTimeout(s.phase, s.silence):
		// A tool is running inside the tool threshold: that threshold
		// judges it, not the idle timeout. One event per silence.
		if !m.lastOutput.Equal(m.deferredFor) {
			m.deferredFor = m.lastOutput
			m.emit(Event{Type: event.IdleDeferred, Message: fmt.Sprintf("no output for %s while a tool runs: the tool threshold judges it, not the idle timeout", since.Round(time.Millisecond))})
		}
		m.arm(timerIdle, m.heartbeat)
	default:
		m.terminate(FailIdleTimeout, "no output for "+m.idle.String())
	}
}

// look takes one look at the worker and acts on what the stall policy and
// the retry-loop limit say.
func (m *supervisor) look(now time.Time) sight {
	s := m.view.look(now)
	switch s.stall {
	case stallInspect:
		m.emit(Event{Type: event.StallInspection, Inspection: s.inspection})
	case stallTerminate:
		m.emit(Event{Type: event.StallInspection, Inspection: s.inspection})
		m.terminate(FailSessionStall, fmt.Sprintf("no activity for %s while %s", s.silence.Round(time.Millisecond), s.phase))
		return s
	}
	if limit, on := m.stall.retryLoopLimit(); on {
		if loop, ok := m.view.retryLoop(); ok && now.Sub(loop.Since) >= limit {
			m.terminate(loop.Diagnostic.Class, fmt.Sprintf("the worker has retried a failing model call for %s (%d retries, the last for %s)",
				now.Sub(loop.Since).Round(time.Millisecond), loop.Retries, loop.Diagnostic.Class))
		}
	}
	return s
}

// terminate begins to end the worker, once: SIGTERM now, SIGKILL after the
// grace period.
func (m *supervisor) terminate(reason FailureClass, why string) {
	if m.terminated {
		return
	}
	m.terminated, m.reason = true, reason
	m.finishedFirst = m.view.finished()
	m.emit(Event{Type: event.Terminate, Message: why + ": sending SIGTERM to the worker's process tree"})
	m.out = append(m.out, signalAction(syscall.SIGTERM))
	m.arm(timerGrace, m.grace)
	m.stop(timerTimeout)
	m.stop(timerIdle)
	m.stop(timerFinished)
}

func (m *supervisor) emit(e Event) { m.out = append(m.out, emitAction(e)) }

func (m *supervisor) arm(k loopTimer, d time.Duration) {
	m.armed[k] = true
	m.out = append(m.out, armAction(k, d))
}

func (m *supervisor) stop(k loopTimer) {
	if m.armed[k] {
		m.armed[k] = false
		m.out = append(m.out, stopAction(k))
	}
}

// take returns the actions of the input being handled.
func (m *supervisor) take() []action {
	a := m.out
	m.out = nil
	return a
}

// drive runs m for job until the job's whole tree is gone: real timers, the
// heartbeat, ctx and the job's channels feed the machine, and drive
// performs its actions.
func (r *run) drive(ctx context.Context, job *supervise.Job, m *supervisor, startedAt time.Time) {
	var timers [numTimers]*time.Timer
	defer func() {
		for _, t := range timers {
			if t != nil {
				t.Stop()
			}
		}
	}()
	timerC := func(k loopTimer) <-chan time.Time {
		if timers[k] == nil {
			return nil
		}
		return timers[k].C
	}
	do := func(acts []action) {
		for _, a := range acts {
			switch a.kind {
			case actEmit:
				r.emit(a.event)
			case actSignal:
				_ = job.Signal(a.sig)
			case actArm:
				if timers[a.timer] == nil {
					timers[a.timer] = time.NewTimer(a.after)
				} else {
					timers[a.timer].Reset(a.after)
				}
			case actStop:
				timers[a.timer].Stop()
			case actSample:
				_ = job.Sample() // a lost supervisor ends the job anyway
			}
		}
	}
	heartbeat := time.NewTicker(r.d.Heartbeat)
	defer heartbeat.Stop()
	ctxDone, exited, done := ctx.Done(), job.Exited(), job.Done()
	do(m.started(startedAt))
	for !m.over {
		// A closed channel is read once; the machine knows what still
		// applies.
		select {
		case <-ctxDone:
			ctxDone = nil
			do(m.cancel(context.Cause(ctx)))
		case <-timerC(timerTimeout):
			do(m.timer(timerTimeout, time.Now()))
		case <-timerC(timerIdle):
			m.output(time.Unix(0, r.lastOutput.Load()))
			do(m.timer(timerIdle, time.Now()))
		case <-timerC(timerGrace):
			do(m.timer(timerGrace, time.Now()))
		case <-timerC(timerFinished):
			do(m.timer(timerFinished, time.Now()))
		case now := <-heartbeat.C:
			do(m.tick(now))
		case s := <-job.Memory():
			do(m.memory(r.mem.sampled(s)))
		case <-exited:
			exited = nil
			do(m.exited())
		case <-done:
			done = nil
			do(m.done())
		}
	}
}
