package pilot

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/size"
)

// t0 is the fake clock's start: the worker starts then.
var t0 = time.Date(2026, 7, 25, 12, 0, 0, 0, time.UTC)

// fakeWorker is a workerView on the fake clock: a real stall clock, fed
// by the test's output steps, judged by the test's policy in the phase the
// test sets.
type fakeWorker struct {
	policy   StallPolicy
	clock    *stallClock
	phase    SessionPhase
	loop     RetryLoop
	retrying bool
	done     bool
}

func (w *fakeWorker) look(now time.Time) sight {
	s := sight{stall: w.clock.Check(w.policy, w.phase, now), phase: w.phase, silence: w.clock.Silence(now)}
	if s.stall != stallNone {
		s.inspection = inspection(s.stall, w.phase, s.silence)
	}
	return s
}

func (w *fakeWorker) retryLoop() (RetryLoop, bool) { return w.loop, w.retrying }
func (w *fakeWorker) finished() bool               { return w.done }

func inspection(a stallAction, phase SessionPhase, silence time.Duration) *StallInspection {
	insp := newStallInspection(a, SessionState{Phase: phase}, silence, nil)
	return &insp
}

// A loopInput is one input to the machine (or to the fake worker) at a
// time on the fake clock.
type loopInput struct {
	name string
	do   func(m *supervisor, w *fakeWorker, now time.Time) []action
}

var (
	start = loopInput{"started", func(m *supervisor, _ *fakeWorker, now time.Time) []action { return m.started(now) }}
	// output is output at now: the machine and the stall clock see it,
	// as the driver and the session watch do.
	output = loopInput{"output", func(m *supervisor, w *fakeWorker, now time.Time) []action {
		m.output(now)
		w.clock.Output(now)
		return nil
	}}
	tick   = loopInput{"tick", func(m *supervisor, _ *fakeWorker, now time.Time) []action { return m.tick(now) }}
	exited = loopInput{"exited", func(m *supervisor, _ *fakeWorker, _ time.Time) []action { return m.exited() }}
	done   = loopInput{"done", func(m *supervisor, _ *fakeWorker, _ time.Time) []action { return m.done() }}
)

func fire(k loopTimer) loopInput {
	return loopInput{"fire " + k.String(), func(m *supervisor, _ *fakeWorker, now time.Time) []action { return m.timer(k, now) }}
}

func cancel(cause string) loopInput {
	return loopInput{"cancel", func(m *supervisor, _ *fakeWorker, _ time.Time) []action { return m.cancel(errors.New(cause)) }}
}

// sampled is a sample of the tree's memory: rss in all, top in pid 42.
func sampled(rss, top size.Bytes) loopInput {
	return loopInput{"memory " + rss.String(), func(m *supervisor, _ *fakeWorker, _ time.Time) []action {
		return m.memory(size.Tree{RSSBytes: int64(rss), Processes: 2, Top: size.Process{Pid: 42, Command: "node", RSSBytes: int64(top)}})
	}}
}

var sample = []action{{kind: actSample}}

func phase(p SessionPhase) loopInput {
	return loopInput{"phase " + string(p), func(_ *supervisor, w *fakeWorker, _ time.Time) []action {
		w.phase = p
		return nil
	}}
}

func retrying(loop RetryLoop) loopInput {
	return loopInput{"retrying", func(_ *supervisor, w *fakeWorker, _ time.Time) []action {
		w.loop, w.retrying = loop, true
		return nil
	}}
}

var finishes = loopInput{"finished", func(_ *supervisor, w *fakeWorker, _ time.Time) []action {
	w.done = true
	return nil
}}

// goesOn is a worker that starts another turn after its final result.
var goesOn = loopInput{"goes on", func(_ *supervisor, w *fakeWorker, _ time.Time) []action {
	w.done = false
	return nil
}}

// The actions the tests expect.
func sigterm(why string) []action {
	return []action{
		emitAction(Event{Type: event.Terminate, Message: why + ": sending SIGTERM to the worker's process tree"}),
		signalAction(syscall.SIGTERM),
		armAction(timerGrace, 5*time.Second),
	}
}

var sigkill = []action{
	emitAction(Event{Type: event.Terminate, Message: "grace period of 5s over: sending SIGKILL to the worker's process tree"}),
	signalAction(syscall.SIGKILL),
}

func inspected(a stallAction, p SessionPhase, silence time.Duration) action {
	return emitAction(Event{Type: event.StallInspection, Inspection: inspection(a, p, silence)})
}

func idleDeferred(silence string) action {
	return emitAction(Event{Type: event.IdleDeferred, Message: "no output for " + silence + " while a tool runs: the tool threshold judges it, not the idle timeout"})
}

func join(parts ...any) []action {
	var out []action
	for _, p := range parts {
		switch p := p.(type) {
		case action:
			out = append(out, p)
		case []action:
			out = append(out, p...)
		}
	}
	return out
}

// stallOff is a policy that never inspects, never ends a worker for a
// silence outside a tool run, and never for retrying.
var stallOff = StallPolicy{Start: -1, ModelResponse: -1, RetryLoop: -1}

func TestSupervisorLoop(t *testing.T) {
	type step struct {
		at   time.Duration // on the fake clock, from t0
		in   loopInput
		want []action
	}
	type end struct {
		terminated    bool
		reason        FailureClass
		finishedFirst bool
	}
	tests := []struct {
		name    string
		timeout time.Duration
		idle    time.Duration
		finish  time.Duration
		stall   StallPolicy
		memory  size.Bytes // the memory limit; a test that sets one samples
		steps   []step
		want    end
	}{
		{
			name:    "the timeout ends the worker: SIGTERM, then SIGKILL after the grace period",
			timeout: time.Hour,
			stall:   stallOff,
			steps: []step{
				{0, start, []action{armAction(timerTimeout, time.Hour)}},
				{time.Minute, tick, nil},
				{time.Hour, fire(timerTimeout), sigterm("timeout of 1h0m0s reached")},
				{time.Hour + time.Second, tick, nil},
				{time.Hour + 5*time.Second, fire(timerGrace), sigkill},
				{time.Hour + 5*time.Second, exited, nil},
				{time.Hour + 5*time.Second, done, nil},
			},
			want: end{terminated: true, reason: FailTimeout},
		},
		{
			name:    "cancel ends the worker once; the grace period still ends its leftovers after it exits",
			timeout: time.Hour,
			idle:    15 * time.Minute,
			stall:   stallOff,
			steps: []step{
				{0, start, []action{armAction(timerTimeout, time.Hour), armAction(timerIdle, 15*time.Minute)}},
				{time.Minute, cancel("shutting down"), join(sigterm("context done (shutting down)"), stopAction(timerTimeout), stopAction(timerIdle))},
				{time.Minute, cancel("again"), nil},
				{time.Minute + time.Second, exited, nil},
				{time.Minute + 5*time.Second, fire(timerGrace), sigkill},
				{time.Minute + 6*time.Second, done, nil},
			},
			want: end{terminated: true, reason: FailCancelled},
		},
		{
			name:  "the idle timer re-arms from the last output, then ends a silent worker",
			idle:  15 * time.Minute,
			stall: stallOff,
			steps: []step{
				{0, start, []action{armAction(timerIdle, 15*time.Minute)}},
				{10 * time.Minute, output, nil},
				{15 * time.Minute, fire(timerIdle), []action{armAction(timerIdle, 10*time.Minute)}},
				{25 * time.Minute, fire(timerIdle), sigterm("no output for 15m0s")},
				{25*time.Minute + time.Second, exited, nil},
				{25*time.Minute + time.Second, done, nil},
			},
			want: end{terminated: true, reason: FailIdleTimeout},
		},
		{
			name:  "idle deferred while a tool runs inside the tool threshold, once per silence, then ended by the stall",
			idle:  15 * time.Minute,
			stall: StallPolicy{Start: -1, ModelResponse: -1, RetryLoop: -1, Tool: 30 * time.Minute},
			steps: []step{
				{0, start, []action{armAction(timerIdle, 15*time.Minute)}},
				{time.Minute, output, nil},
				{time.Minute, phase(PhaseToolRunning), nil},
				{15 * time.Minute, fire(timerIdle), []action{armAction(timerIdle, time.Minute)}},
				{16 * time.Minute, fire(timerIdle), []action{idleDeferred("15m0s"), armAction(timerIdle, time.Second)}},
				{16*time.Minute + time.Second, fire(timerIdle), []action{armAction(timerIdle, time.Second)}},
				{16*time.Minute + time.Second, tick, nil},
				// New output: a new silence, deferred again.
				{20 * time.Minute, output, nil},
				{20*time.Minute + 2*time.Second, fire(timerIdle), []action{armAction(timerIdle, 15*time.Minute-2*time.Second)}},
				{35 * time.Minute, fire(timerIdle), []action{idleDeferred("15m0s"), armAction(timerIdle, time.Second)}},
				{50 * time.Minute, tick, join(
					inspected(stallTerminate, PhaseToolRunning, 30*time.Minute),
					sigterm("no activity for 30m0s while tool-running"),
					stopAction(timerIdle))},
				{50*time.Minute + time.Second, fire(timerIdle), nil},
			},
			want: end{terminated: true, reason: FailSessionStall},
		},
		{
			name:  "the idle timer's look finds a stall: the stall ends the worker, not the idle timeout",
			idle:  15 * time.Minute,
			stall: StallPolicy{Start: -1, ModelResponse: -1, RetryLoop: -1, Tool: 15 * time.Minute},
			steps: []step{
				{0, start, []action{armAction(timerIdle, 15*time.Minute)}},
				{0, phase(PhaseToolRunning), nil},
				{15 * time.Minute, fire(timerIdle), join(
					inspected(stallTerminate, PhaseToolRunning, 15*time.Minute),
					sigterm("no activity for 15m0s while tool-running"))},
			},
			want: end{terminated: true, reason: FailSessionStall},
		},
		{
			name:  "a stall is inspected once per silence, then ends the worker; looks go on until it exits",
			stall: StallPolicy{Start: -1, ModelResponse: 3 * time.Minute, ModelStall: 10 * time.Minute, RetryLoop: -1},
			steps: []step{
				{0, start, nil},
				{0, phase(PhaseAwaitingModel), nil},
				{time.Minute, tick, nil},
				{3 * time.Minute, tick, []action{inspected(stallInspect, PhaseAwaitingModel, 3*time.Minute)}},
				{4 * time.Minute, tick, nil},
				{5 * time.Minute, output, nil},
				{7 * time.Minute, tick, nil},
				{8 * time.Minute, tick, []action{inspected(stallInspect, PhaseAwaitingModel, 3*time.Minute)}},
				{15 * time.Minute, tick, join(
					inspected(stallTerminate, PhaseAwaitingModel, 10*time.Minute),
					sigterm("no activity for 10m0s while awaiting-model"))},
				// While pilot ends the worker, the heartbeat still looks
				// (and the policy still says terminate); terminate is
				// not repeated.
				{15*time.Minute + time.Second, tick, []action{inspected(stallTerminate, PhaseAwaitingModel, 10*time.Minute+time.Second)}},
				{15*time.Minute + 2*time.Second, exited, nil},
				{15*time.Minute + 3*time.Second, tick, nil},
				{15*time.Minute + 3*time.Second, done, nil},
			},
			want: end{terminated: true, reason: FailSessionStall},
		},
		{
			name:    "a retry loop over the limit ends the worker with the retried class",
			timeout: time.Hour,
			stall:   StallPolicy{Start: -1, ModelResponse: -1, RetryLoop: 10 * time.Minute},
			steps: []step{
				{0, start, []action{armAction(timerTimeout, time.Hour)}},
				{time.Minute, retrying(RetryLoop{
					Diagnostic: Classification{Class: FailProviderConnection, Evidence: "Reconnecting... waiting for network", Source: "codex:stdout"},
					Since:      t0.Add(time.Minute),
					Retries:    3,
				}), nil},
				{10 * time.Minute, tick, nil},
				{11 * time.Minute, tick, join(
					sigterm("the worker has retried a failing model call for 10m0s (3 retries, the last for provider-connection)"),
					stopAction(timerTimeout))},
				{12 * time.Minute, tick, nil},
			},
			want: end{terminated: true, reason: FailProviderConnection},
		},
		{
			name:    "the retry-loop limit off: retrying is left to the timeouts",
			timeout: time.Hour,
			stall:   stallOff,
			steps: []step{
				{0, start, []action{armAction(timerTimeout, time.Hour)}},
				{0, retrying(RetryLoop{Diagnostic: Classification{Class: FailProviderConnection}, Since: t0, Retries: 1}), nil},
				{59 * time.Minute, tick, nil},
			},
		},
		{
			name:    "an exit before any timer fires: no signal, and the timeouts no longer apply",
			timeout: time.Hour,
			idle:    15 * time.Minute,
			stall:   StallPolicy{Start: time.Second, RetryLoop: -1},
			steps: []step{
				{0, start, []action{armAction(timerTimeout, time.Hour), armAction(timerIdle, 15*time.Minute)}},
				{500 * time.Millisecond, tick, nil},
				{time.Second, exited, []action{stopAction(timerTimeout), stopAction(timerIdle)}},
				{2 * time.Second, tick, nil},
				{time.Hour, fire(timerTimeout), nil},
				{time.Hour, fire(timerIdle), nil},
				{time.Hour, cancel("late"), nil},
				{time.Hour, done, nil},
			},
		},
		{
			name:    "terminate happens once, and notes that the worker had finished first",
			timeout: time.Hour,
			idle:    15 * time.Minute,
			stall:   stallOff,
			steps: []step{
				{0, start, []action{armAction(timerTimeout, time.Hour), armAction(timerIdle, 15*time.Minute)}},
				{time.Minute, output, nil},
				{time.Minute, finishes, nil},
				{16 * time.Minute, fire(timerIdle), join(sigterm("no output for 15m0s"), stopAction(timerTimeout))},
				{16 * time.Minute, cancel("caller gave up"), nil},
				{time.Hour, fire(timerTimeout), nil},
				{16*time.Minute + time.Second, tick, nil},
				{16*time.Minute + 5*time.Second, fire(timerGrace), sigkill},
				{16*time.Minute + 5*time.Second, fire(timerGrace), nil},
			},
			want: end{terminated: true, reason: FailIdleTimeout, finishedFirst: true},
		},
		{
			name:    "a worker that printed its final result and does not exit is ended after the finish grace; its verdict stands",
			timeout: time.Hour,
			idle:    15 * time.Minute,
			finish:  10 * time.Second,
			stall:   stallOff,
			steps: []step{
				{0, start, []action{armAction(timerTimeout, time.Hour), armAction(timerIdle, 15*time.Minute)}},
				{time.Minute, tick, nil},
				{time.Minute, finishes, nil},
				{time.Minute + time.Second, tick, []action{armAction(timerFinished, 10*time.Second)}},
				{time.Minute + 2*time.Second, tick, nil},
				{time.Minute + 11*time.Second, fire(timerFinished),
					join(sigterm("the worker printed its final result and has not exited for 10s; its verdict stands"), stopAction(timerTimeout), stopAction(timerIdle))},
				{time.Minute + 12*time.Second, exited, nil},
				{time.Minute + 12*time.Second, done, nil},
			},
			want: end{terminated: true, reason: reasonFinished, finishedFirst: true},
		},
		{
			name:    "a worker that exits within the finish grace is not ended",
			timeout: time.Hour,
			finish:  10 * time.Second,
			stall:   stallOff,
			steps: []step{
				{0, start, []action{armAction(timerTimeout, time.Hour)}},
				{time.Minute, finishes, nil},
				{time.Minute + time.Second, tick, []action{armAction(timerFinished, 10*time.Second)}},
				{time.Minute + 3*time.Second, exited, []action{stopAction(timerTimeout), stopAction(timerFinished)}},
				{time.Minute + 11*time.Second, fire(timerFinished), nil},
				{time.Minute + 11*time.Second, done, nil},
			},
			want: end{},
		},
		{
			name:    "a worker that goes on after its final result is not ended; its next final result starts the grace again",
			timeout: time.Hour,
			finish:  10 * time.Second,
			stall:   stallOff,
			steps: []step{
				{0, start, []action{armAction(timerTimeout, time.Hour)}},
				{time.Minute, finishes, nil},
				{time.Minute + time.Second, tick, []action{armAction(timerFinished, 10*time.Second)}},
				{time.Minute + 2*time.Second, goesOn, nil},
				{time.Minute + 3*time.Second, tick, []action{stopAction(timerFinished)}},
				{time.Minute + 11*time.Second, fire(timerFinished), nil},
				{time.Minute + 20*time.Second, finishes, nil},
				{time.Minute + 21*time.Second, tick, []action{armAction(timerFinished, 10*time.Second)}},
				{time.Minute + 22*time.Second, exited, []action{stopAction(timerTimeout), stopAction(timerFinished)}},
				{time.Minute + 22*time.Second, done, nil},
			},
			want: end{},
		},
		{
			name:    "a finish timer that fires after the worker went on, before a heartbeat saw it, ends nothing",
			timeout: time.Hour,
			finish:  10 * time.Second,
			stall:   stallOff,
			steps: []step{
				{0, start, []action{armAction(timerTimeout, time.Hour)}},
				{time.Minute, finishes, nil},
				{time.Minute + time.Second, tick, []action{armAction(timerFinished, 10*time.Second)}},
				{time.Minute + 10*time.Second, goesOn, nil},
				{time.Minute + 11*time.Second, fire(timerFinished), nil},
				{time.Minute + 12*time.Second, tick, nil},
				{time.Minute + 13*time.Second, exited, []action{stopAction(timerTimeout)}},
				{time.Minute + 13*time.Second, done, nil},
			},
			want: end{},
		},
		{
			name:    "an errored turn does not start the finish grace: pi retries after one",
			timeout: time.Hour,
			finish:  10 * time.Second,
			stall:   stallOff,
			steps: []step{
				{0, start, []action{armAction(timerTimeout, time.Hour)}},
				{time.Minute, phase(PhaseErrored), nil},
				{time.Minute + time.Second, tick, nil},
				{time.Minute + 20*time.Second, tick, nil},
			},
			want: end{},
		},
		{
			name:    "a sample over the memory limit ends the worker, once; samples stop when it exits",
			timeout: time.Hour,
			stall:   stallOff,
			memory:  256 * size.MiB,
			steps: []step{
				{0, start, []action{armAction(timerTimeout, time.Hour)}},
				{time.Second, tick, sample},
				{time.Second, sampled(100*size.MiB, 90*size.MiB), nil},
				{2 * time.Second, tick, sample},
				{2 * time.Second, sampled(256*size.MiB, 250*size.MiB), nil}, // at the limit is not past it
				{3 * time.Second, tick, sample},
				{3 * time.Second, sampled(300*size.MiB, 290*size.MiB), join(
					sigterm("the process tree holds 300.0MiB, over its memory limit of 256MiB; pid 42 (node) holds the most, 290.0MiB"),
					stopAction(timerTimeout))},
				{3 * time.Second, sampled(400*size.MiB, 390*size.MiB), nil},
				{4 * time.Second, tick, sample}, // the looks go on while it is ended
				{5 * time.Second, exited, nil},
				{6 * time.Second, tick, nil},
				{6 * time.Second, sampled(400*size.MiB, 390*size.MiB), nil},
				{8 * time.Second, fire(timerGrace), sigkill},
				{8 * time.Second, done, nil},
			},
			want: end{terminated: true, reason: FailMemoryLimit},
		},
		{
			name:    "without a finish grace a finished worker is left to the other limits",
			timeout: time.Hour,
			stall:   stallOff,
			steps: []step{
				{0, start, []action{armAction(timerTimeout, time.Hour)}},
				{time.Minute, finishes, nil},
				{time.Minute + time.Second, tick, nil},
				{time.Hour, fire(timerTimeout), sigterm("timeout of 1h0m0s reached")},
			},
			want: end{terminated: true, reason: FailTimeout, finishedFirst: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &fakeWorker{policy: tt.stall, clock: newStallClock(t0), phase: PhaseStarting}
			m := &supervisor{timeout: tt.timeout, idle: tt.idle, finishGrace: tt.finish, grace: 5 * time.Second, heartbeat: time.Second, stall: tt.stall, view: w,
				memLimit: tt.memory, sample: tt.memory > 0, lastRSS: -1}
			for i, s := range tt.steps {
				got := s.in.do(m, w, t0.Add(s.at))
				if diff := cmp.Diff(s.want, got, cmp.AllowUnexported(action{})); diff != "" {
					t.Fatalf("step %d (%s at %v): actions (-want +got):\n%s", i, s.in.name, s.at, diff)
				}
			}
			got := end{terminated: m.terminated, reason: m.reason, finishedFirst: m.finishedFirst}
			if got != tt.want {
				t.Errorf("end = %+v, want %+v", got, tt.want)
			}
			if last := tt.steps[len(tt.steps)-1].in.name; m.over != (last == "done") {
				t.Errorf("over = %v after %s", m.over, last)
			}
		})
	}
}

// What the watcher said about the session (its id, the session gone)
// holds whatever the verdict: a fallback on the exit and pilot's own
// termination keep it.
func TestVerdictOfKeepsTheSession(t *testing.T) {
	said := Result{SessionID: "s1", Resume: "r1", SessionGone: "No conversation found"}
	for _, tc := range []struct {
		name string
		e    Exit
	}{
		{"fallback on the exit", Exit{Started: true, Code: 1}},
		{"ended by pilot", Exit{Started: true, Terminated: true, Reason: FailTimeout, Code: -1, Signal: 15}},
	} {
		res, _ := verdictOf(tc.e, said, RetryLoop{}, false, false)
		if res.SessionID != "s1" || res.Resume != "r1" || res.SessionGone != "No conversation found" {
			t.Errorf("%s: %+v lost the session", tc.name, res)
		}
	}
}

// A worker ended for its memory while it retried a failing model call is
// judged by its memory, as one ended for a cancel is by the cancel: pilot
// ended it for that, not for the retries.
func TestVerdictOfMemoryLimitWhileRetrying(t *testing.T) {
	loop := RetryLoop{Diagnostic: Classification{Class: FailProviderConnection, Evidence: "Reconnecting..."}, Since: t0, Retries: 2}
	for _, reason := range []FailureClass{FailMemoryLimit, FailCancelled} {
		e := Exit{Started: true, Terminated: true, Reason: reason, Code: -1, Signal: 15}
		res, f := verdictOf(e, Result{}, loop, true, false)
		if res.Class != reason || f.FailureClass != reason || f.FailureSource != sourcePilotPolicy || f.TerminationReason != reason {
			t.Errorf("ended for %s while retrying: %+v, %+v; want class %s decided by pilot policy", reason, res, f, reason)
		}
	}
}

// A tree without a memory limit, whose memory holds steady, is sampled at
// each of its first heartbeats and then at every fifth, and closely again
// for a while after a sample that moved; one with a limit, or followed by
// a Fanout's memory budget, at every heartbeat.
func TestSupervisorSamplesASteadyTreeLessOften(t *testing.T) {
	const mib = int64(size.MiB)
	for _, tt := range []struct {
		name      string
		limit     size.Bytes
		everyBeat bool
		rss       func(beat int) int64 // the sample taken at beat
		want      []int                // the beats that sample
	}{
		{
			name: "steady, no limit",
			rss:  func(int) int64 { return 200 * mib },
			want: []int{1, 2, 3, 4, 5, 10, 15, 20, 25, 30},
		},
		{
			name: "a move at the 10th beat's sample",
			rss: func(beat int) int64 {
				if beat >= 10 {
					return 300 * mib
				}
				return 200 * mib
			},
			want: []int{1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15, 20, 25, 30},
		},
		{
			name: "less than a step (an eighth, or 16 MiB) is steady",
			rss: func(beat int) int64 {
				return 200*mib + int64(beat)*mib
			},
			want: []int{1, 2, 3, 4, 5, 10, 15, 20, 25, 30},
		},
		{
			name:  "a memory limit",
			limit: size.GiB,
			rss:   func(int) int64 { return 200 * mib },
			want:  []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30},
		},
		{
			name:      "followed by a Fanout's memory budget",
			everyBeat: true,
			rss:       func(int) int64 { return 200 * mib },
			want:      []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &fakeWorker{policy: stallOff, clock: newStallClock(t0), phase: PhaseStarting}
			m := &supervisor{grace: 5 * time.Second, heartbeat: time.Second, stall: stallOff, view: w,
				sample: true, everyBeat: tt.everyBeat, memLimit: tt.limit, lastRSS: -1}
			m.started(t0)
			var got []int
			for beat := 1; beat <= 30; beat++ {
				acts := m.tick(t0.Add(time.Duration(beat) * time.Second))
				if diff := cmp.Diff(sample, acts, cmp.AllowUnexported(action{})); diff == "" {
					got = append(got, beat)
					m.memory(size.Tree{RSSBytes: tt.rss(beat), Processes: 1})
				} else if len(acts) > 0 {
					t.Fatalf("beat %d: actions %+v, want a sample or nothing", beat, acts)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("the beats that sampled (-want +got):\n%s", diff)
			}
		})
	}
}
