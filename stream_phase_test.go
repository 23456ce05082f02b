package pilot_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
)

// lineRunner runs the provider's Binary with its Args, and its watcher
// follows "phase:NAME" and "quiet:DURATION" lines on stdout: a stand-in
// for an agent CLI adapter's stream phases, to test what the Dispatcher
// does with them. It keeps no session file: the stream is the only source
// of phases.
type lineRunner struct{}

func (lineRunner) Name() string { return "linephase" }

func (lineRunner) Command(_ context.Context, a pilot.Attempt) (*pilot.Command, error) {
	return &pilot.Command{Argv: append([]string{a.Provider.Binary}, a.Provider.Args...), Watcher: &lineWatcher{}}, nil
}

type lineWatcher struct {
	pilot.ExitCodeWatcher
	st    pilot.SessionState
	seen  bool
	quiet time.Time
}

func (w *lineWatcher) Line(l pilot.Line) {
	s := string(l.Data)
	if p, ok := strings.CutPrefix(s, "phase:"); ok {
		w.st, w.seen = pilot.SessionState{Phase: pilot.SessionPhase(p), Reason: "stream:test", PendingToolCallIDs: []string{"t1"}}, true
	}
	if q, ok := strings.CutPrefix(s, "quiet:"); ok {
		d, _ := time.ParseDuration(q)
		w.quiet = time.Now().Add(d)
	}
}

// Finish is an adapter's: a stream that showed the task finished is
// completed, unless the exit alone decides.
func (w *lineWatcher) Finish(e pilot.Exit) pilot.Result {
	if !e.Terminated && e.Signal == 0 && w.st.Phase == pilot.PhaseFinished {
		return pilot.Result{Outcome: pilot.Completed}
	}
	return pilot.JudgeExit(e)
}

func (w *lineWatcher) StreamState() (pilot.SessionState, time.Time, bool) {
	return w.st, w.quiet, w.seen
}

func lineDispatcher(t *testing.T, script ...string) *pilot.Dispatcher {
	p := fakeProvider(t, "linephase", script...)
	p.Runner, p.Binary, p.Args, p.Argv = "linephase", p.Argv[0], p.Argv[1:], nil
	d := testDispatcher(t, p)
	d.Runners = []pilot.Runner{lineRunner{}}
	d.Heartbeat = 10 * time.Millisecond
	return d
}

// A phase read from the stream, with no session file, drives the stall
// policy: a silent tool run past the tool threshold is a session-stall.
func TestStreamPhaseDrivesTheStallPolicy(t *testing.T) {
	d := lineDispatcher(t, "out=phase:tool-running", "block")
	d.Stall = pilot.StallPolicy{Tool: 100 * time.Millisecond}
	var phases []pilot.SessionPhase
	d.Observer = func(e pilot.Event) {
		if e.Type == event.Phase {
			phases = append(phases, e.Session.Phase)
		}
	}
	v := dispatch(t, d, task("linephase"))
	if v.FailureClass != pilot.FailSessionStall || v.SessionPhase != pilot.PhaseToolRunning {
		t.Fatalf("verdict %s/%s in phase %q; want session-stall in tool-running", v.Verdict, v.FailureClass, v.SessionPhase)
	}
	if len(phases) != 1 || phases[0] != pilot.PhaseToolRunning {
		t.Errorf("phase events = %v, want one: tool-running", phases)
	}
	rec := readRecord(t, v)
	if insp := rec.SilenceInspection; insp == nil || len(insp.PendingToolCallIDs) != 1 || insp.PendingToolCallIDs[0] != "t1" {
		t.Errorf("silence_inspection = %+v, want the stream's pending call", rec.SilenceInspection)
	}
}

// A retry the worker announced makes its silence expected until the retry
// is due: the tool threshold does not end it; the task's timeout does.
func TestAnnouncedRetryIsNotAStall(t *testing.T) {
	d := lineDispatcher(t, "out=quiet:1h", "out=phase:tool-running", "block") // the retry is announced before the phase that could stall
	d.Stall = pilot.StallPolicy{Tool: 100 * time.Millisecond}
	tk := task("linephase")
	tk.Timeout = 800 * time.Millisecond
	v := dispatch(t, d, tk)
	if v.FailureClass != pilot.FailTimeout {
		t.Fatalf("failure class %q, want timeout: a worker waiting out its announced retry is not stalled", v.FailureClass)
	}
}

// A worker that hangs after its stream said it finished (Claude Code's -p
// mode is known to) keeps its completed verdict when pilot ends it; the
// termination fields still say pilot did. One that had not finished is
// judged by pilot's policy.
func TestFinishedWorkerEndedByPilotKeepsItsVerdict(t *testing.T) {
	for _, tc := range []struct {
		phase   string
		verdict pilot.Outcome
		class   pilot.FailureClass
	}{
		{"finished", pilot.Completed, ""},
		{"awaiting-model", pilot.Failed, pilot.FailIdleTimeout},
	} {
		t.Run(tc.phase, func(t *testing.T) {
			// The worker prints one more line only once the phase line
			// has reached the watcher, so the idle timeout, which
			// counts from that line, ends a worker whose phase pilot
			// knows, however loaded the machine.
			seen := filepath.Join(t.TempDir(), "seen")
			d := lineDispatcher(t, "out=the answer", "out=phase:"+tc.phase, "await="+seen, "out=waiting", "block")
			d.OnLine = onLine("phase:", func(string) { os.WriteFile(seen, nil, 0o600) })
			tk := task("linephase")
			// Long enough for the worker to start and print its phase
			// on a loaded machine (the timeout counts from the start
			// until the first line).
			tk.IdleTimeout = 2 * time.Second
			v := dispatch(t, d, tk)
			if v.Verdict != tc.verdict || v.FailureClass != tc.class {
				t.Errorf("verdict %s/%q, want %s/%q", v.Verdict, v.FailureClass, tc.verdict, tc.class)
			}
			if v.TerminationInitiator != "pilot" || v.TerminationReason != pilot.FailIdleTimeout {
				t.Errorf("termination %q/%q, want pilot/idle-timeout", v.TerminationInitiator, v.TerminationReason)
			}
		})
	}
}

// A caller that sets ModelStall ends a worker silent while awaiting the
// model as a session-stall; by default awaiting the model is only
// inspected (TestPiSilentAwaitingModelIsInspectedWithoutTermination).
func TestModelStallEndsASilentModelWait(t *testing.T) {
	d := lineDispatcher(t, "out=phase:awaiting-model", "block")
	d.Stall = pilot.StallPolicy{ModelResponse: 20 * time.Millisecond, ModelStall: 100 * time.Millisecond}
	var inspected bool
	d.Observer = func(e pilot.Event) {
		if e.Type == event.StallInspection && e.Inspection.Phase == pilot.PhaseAwaitingModel {
			inspected = true // the terminating check is an inspection too
		}
	}
	v := dispatch(t, d, task("linephase"))
	if v.FailureClass != pilot.FailSessionStall || v.SessionPhase != pilot.PhaseAwaitingModel {
		t.Fatalf("verdict %s/%q in phase %q; want session-stall in awaiting-model", v.Verdict, v.FailureClass, v.SessionPhase)
	}
	if !inspected {
		t.Errorf("no stall inspection in awaiting-model")
	}
}

// A worker that printed its final result and does not exit is ended a
// FinishGrace later, not by the idle timeout, and keeps the verdict its
// stream gave; an event says so. An errored turn is not a final result
// (pi retries after one): the idle timeout still judges a worker silent
// after it.
func TestFinishedWorkerThatHangsIsEndedAfterTheFinishGrace(t *testing.T) {
	t.Run("errored", func(t *testing.T) {
		d := lineDispatcher(t, "out=phase:errored", "block")
		d.FinishGrace = 50 * time.Millisecond
		tk := task("linephase")
		tk.IdleTimeout = 500 * time.Millisecond
		v := dispatch(t, d, tk)
		if v.TerminationReason != pilot.FailIdleTimeout {
			t.Errorf("ended for %q, want the idle timeout: an errored turn is not the end", v.TerminationReason)
		}
	})
	for _, tc := range []struct {
		phase   string
		verdict pilot.Outcome
		class   pilot.FailureClass
	}{
		{"finished", pilot.Completed, ""},
	} {
		t.Run(tc.phase, func(t *testing.T) {
			d := lineDispatcher(t, "out=phase:"+tc.phase, "block")
			d.FinishGrace = 100 * time.Millisecond
			var msgs []string
			d.Observer = func(e pilot.Event) {
				if e.Type == event.Terminate {
					msgs = append(msgs, e.Message)
				}
			}
			tk := task("linephase")
			tk.IdleTimeout, tk.Timeout = time.Hour, time.Hour // only the finish grace can end it
			v := dispatch(t, d, tk)
			if v.Verdict != tc.verdict || v.FailureClass != tc.class {
				t.Errorf("verdict %s/%q, want %s/%q (the stream's)", v.Verdict, v.FailureClass, tc.verdict, tc.class)
			}
			if v.TerminationInitiator != "pilot" || v.TerminationReason != "finished-not-exited" {
				t.Errorf("termination %q/%q, want pilot/finished-not-exited", v.TerminationInitiator, v.TerminationReason)
			}
			if len(msgs) == 0 || !strings.Contains(msgs[0], "printed its final result and has not exited for 100ms") {
				t.Errorf("terminate events %q", msgs)
			}
		})
	}
}
