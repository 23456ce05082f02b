package pilot_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/pilottest"
)

// spendRunner's watcher reads "spent:USD" and "tokens:N" lines on stdout,
// each the run's total so far: a stand-in for an agent CLI whose stream
// reports usage as it goes.
type spendRunner struct{ tokens, cost bool }

func (spendRunner) Name() string { return "spend" }

func (s spendRunner) Command(_ context.Context, a pilot.Attempt) (*pilot.Command, error) {
	return &pilot.Command{Argv: append([]string{a.Provider.Binary}, a.Provider.Args...), Watcher: &spendWatcher{r: s}}, nil
}

type spendWatcher struct {
	pilot.ExitCodeWatcher
	r spendRunner
	u pilot.Usage
}

func (w *spendWatcher) Line(l pilot.Line) {
	s := string(l.Data)
	if v, ok := strings.CutPrefix(s, "spent:"); ok {
		c, _ := strconv.ParseFloat(v, 64)
		w.u.CostUSD = &c
	}
	if v, ok := strings.CutPrefix(s, "tokens:"); ok {
		w.u.OutputTokens, _ = strconv.ParseInt(v, 10, 64)
	}
}

func (w *spendWatcher) Reports() (bool, bool) { return w.r.tokens, w.r.cost }
func (w *spendWatcher) Usage() pilot.Usage    { return w.u }

func spendDispatcher(t *testing.T, r spendRunner, script ...string) *pilot.Dispatcher {
	p := fakeProvider(t, "spend", script...)
	p.Runner, p.Binary, p.Args, p.Argv = "spend", p.Argv[0], p.Argv[1:], nil
	d := testDispatcher(t, p)
	d.Runners = []pilot.Runner{r}
	d.Heartbeat = 10 * time.Millisecond
	return d
}

// A worker whose stream reports a growing cost is ended once it is past
// the task's cap, as budget-exceeded with the spend as evidence; its tree
// is gone.
func TestBudgetEndsAWorkerPastItsCap(t *testing.T) {
	for _, tt := range []struct {
		name     string
		script   []string
		task     func(*pilot.Task)
		evidence string
	}{
		{"cost", []string{"out=spent:0.10", "out=spent:0.20", "out=spent:0.30", "block"},
			func(tk *pilot.Task) { tk.MaxCostUSD = 0.25 }, "$0.3000 spent, past the task's MaxCostUSD $0.2500"},
		{"tokens", []string{"out=tokens:400", "out=tokens:1200", "block"},
			func(tk *pilot.Task) { tk.MaxTokens = 1000 }, "1200 tokens used (0 input, 1200 output, 0 cache read, 0 cache write), past the task's MaxTokens 1000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := spendDispatcher(t, spendRunner{tokens: true, cost: true}, tt.script...)
			var terminate string
			d.Observer = func(e pilot.Event) {
				if e.Type == event.Terminate && terminate == "" {
					terminate = e.Message
				}
			}
			tk := task("spend")
			tt.task(&tk)
			v := dispatch(t, d, tk)
			if v.FailureClass != pilot.FailBudget || v.FailureSource != "pilot-policy" || v.EvidenceSource != "pilot" ||
				v.EvidenceExcerpt != tt.evidence || v.TerminationInitiator != "pilot" || v.TerminationReason != pilot.FailBudget {
				t.Errorf("verdict %+v; want budget-exceeded by pilot, evidence %q", v, tt.evidence)
			}
			if !strings.HasPrefix(terminate, tt.evidence+": sending SIGTERM") {
				t.Errorf("terminate event %q", terminate)
			}
			if alive := pilottest.Alive(v.RunID); len(alive) > 0 {
				t.Errorf("processes of the run still alive: %v", alive)
			}
		})
	}
}

// Under its cap a worker runs to its end.
func TestBudgetUnderTheCap(t *testing.T) {
	d := spendDispatcher(t, spendRunner{tokens: true, cost: true}, "out=spent:0.10", "out=tokens:10")
	tk := task("spend")
	tk.MaxCostUSD, tk.MaxTokens = 1, 100
	if v := dispatch(t, d, tk); v.Verdict != pilot.Completed {
		t.Errorf("verdict %s (%s), want completed", v.Verdict, v.FailureClass)
	}
}

// A cap the runner cannot follow while the worker runs is refused, and
// nothing starts.
func TestBudgetTheRunnerCannotFollowIsRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		d    *pilot.Dispatcher
		task func(*pilot.Task)
		want string
	}{
		{"the command runner reports no usage", testDispatcher(t, fakeProvider(t, "plain", "out=x")),
			func(tk *pilot.Task) { tk.Provider, tk.MaxTokens = "plain", 10 }, "runner command reports no token usage while its worker runs"},
		{"tokens only", spendDispatcher(t, spendRunner{tokens: true}, "out=x"),
			func(tk *pilot.Task) { tk.Provider, tk.MaxCostUSD = "spend", 1 }, "runner spend reports no cost while its worker runs"},
		{"negative", spendDispatcher(t, spendRunner{tokens: true}, "out=x"),
			func(tk *pilot.Task) { tk.Provider, tk.MaxTokens = "spend", -1 }, "a negative budget"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var started bool
			tt.d.Observer = func(e pilot.Event) { started = started || e.Started != nil }
			tk := task("")
			tt.task(&tk)
			_, err := tt.d.Dispatch(context.Background(), tk)
			if err == nil || !strings.Contains(err.Error(), tt.want) || started {
				t.Errorf("Dispatch: err %v, started %v; want %q and nothing started", err, started, tt.want)
			}
		})
	}
}

// Once a fanout's finished jobs have spent its MaxCostUSD, no further job
// starts: they end skipped for the budget, the total as evidence.
func TestFanoutStopsStartingJobsAtItsBudget(t *testing.T) {
	var started []string
	f := &pilot.Fanout{MaxParallel: 1, MaxCostUSD: 1, Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		started = append(started, tk.Label)
		c := 0.4
		return pilot.Verdict{Provider: tk.Provider, Mode: tk.Mode, RunID: "r-" + tk.Label, Verdict: pilot.Completed, Usage: &pilot.Usage{CostUSD: &c}}, nil
	})}
	var jobs []pilot.Job
	for _, l := range []string{"a", "b", "c", "d", "e"} {
		tk := task("p")
		tk.Label, tk.Workdir = l, t.TempDir()
		jobs = append(jobs, pilot.Job{Name: l, Task: tk})
	}
	rs, err := f.Run(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(started, ","); got != "a,b,c" {
		t.Errorf("started %s, want a,b,c (the third passes $1)", got)
	}
	for _, r := range rs[3:] {
		if r.Skipped != "budget" || r.FailureClass != pilot.FailBudget || !r.Synthesized ||
			r.EvidenceExcerpt != "budget: the fanout's finished jobs spent $1.2000 of its MaxCostUSD $1.0000; no further job starts" {
			t.Errorf("%s: %+v; want skipped for the budget", r.Job, r)
		}
	}
}
