package schedule_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/schedule"
)

// ok is a fake dispatch that completes at once.
func ok(_ context.Context, t pilot.Task) (pilot.Verdict, error) {
	return pilot.Verdict{Provider: t.Provider, Mode: t.Mode, Verdict: pilot.Completed}, nil
}

func job(id string, deps ...string) schedule.Job {
	return schedule.Job{ID: id, Deps: deps, Task: pilot.Task{Provider: "p", Mode: pilot.ModeCode, Label: id, Prompt: id}}
}

func statuses(rs []schedule.Result) map[string]string {
	out := map[string]string{}
	for _, r := range rs {
		out[r.ID] = r.String()
	}
	return out
}

func run(t *testing.T, s *schedule.Scheduler, g schedule.Graph) []schedule.Result {
	t.Helper()
	rs, err := s.Run(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestGraphCheck(t *testing.T) {
	for _, tt := range []struct {
		name string
		jobs []schedule.Job
		want []string
	}{
		{"fine", []schedule.Job{job("a"), job("b", "a")}, nil},
		{"no id", []schedule.Job{job("")}, []string{`job 1 has no id`}},
		{"duplicate", []schedule.Job{job("a"), job("a")}, []string{`job id "a" is used twice`}},
		{"unknown dep", []schedule.Job{job("a", "zz")}, []string{`job "a" depends on "zz", which is not a job of the graph`}},
		{"self", []schedule.Job{job("a", "a")}, []string{`job "a" depends on itself`}},
		{"cycle", []schedule.Job{job("a", "c"), job("b", "a"), job("c", "b"), job("d")}, []string{`a cycle: a -> c -> b -> a`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := schedule.Graph{Jobs: tt.jobs}.Check()
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ge *schedule.GraphError
			if !errors.As(err, &ge) {
				t.Fatalf("Check() = %v, want a *GraphError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			// Nothing runs for a bad graph.
			ran := false
			s := &schedule.Scheduler{Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
				ran = true
				return ok(ctx, t)
			})}
			if _, err := s.Run(context.Background(), schedule.Graph{Jobs: tt.jobs}); err == nil || ran {
				t.Errorf("Run of a bad graph: err %v, ran %v", err, ran)
			}
		})
	}
}

// The seed's WriteSetTest.test_normalizes_relative_and_absolute_aliases:
// "./src/shared.go", "src/x/../shared.go" and the absolute path are one
// file; so is a path through a symbolic link to it.
func TestWriteSetNormalizesAliases(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "src"), 0o700); err != nil {
		t.Fatal(err)
	}
	source := filepath.Join(ws, "src", "shared.go")
	if err := os.WriteFile(source, []byte("package src\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(ws, "src"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(source)
	for _, p := range []string{"./src/shared.go", "src/x/../shared.go", source, "link/shared.go", "src/new/../shared.go"} {
		set, known, why := schedule.WriteSet(ws, []string{p})
		if !known || !slices.Equal(set, []string{real}) {
			t.Errorf("WriteSet(%q) = %q, %v (%s); want [%s]", p, set, known, why, real)
		}
	}
	// A file that does not exist yet is still one file.
	if set, known, _ := schedule.WriteSet(ws, []string{"src/new.go", "./src/new.go"}); !known || len(set) != 1 {
		t.Errorf("a new file: %q, %v", set, known)
	}
}

// The seed's test_rejects_broad_or_outside_workspace_write_sets: a
// directory, a glob, the workspace root and a path outside it make a write
// set unknown, and the reason names the path.
func TestWriteSetRejectsBroadOrOutsidePaths(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "src"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"src/", "src", "../outside.go", "src/*.go", ".", ws, "/etc/passwd", ""} {
		set, known, why := schedule.WriteSet(ws, []string{"ok.go", p})
		if known || set != nil || !strings.Contains(why, p) {
			t.Errorf("WriteSet(%q) = %q, %v, %q; want unknown, naming the path", p, set, known, why)
		}
	}
}

// The seed's ReviewSchedulingTest: every ready job is selected, with no
// numeric cap beside the configured parallelism (none here), and jobs that
// become ready join the ones already running.
func TestAllReadyJobsStartWithoutANumericCap(t *testing.T) {
	var mu sync.Mutex
	started := 0
	all := make(chan struct{})
	guard := 30 * time.Second
	if dl, ok := t.Deadline(); ok {
		guard = time.Until(dl) / 4
	}
	var events []string
	s := &schedule.Scheduler{
		Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
			mu.Lock()
			if started++; started == 4 {
				close(all)
			}
			mu.Unlock()
			if tk.Label == "a" || tk.Label == "b" {
				// a and b run until all four jobs have started: late must
				// join them, or nothing ends.
				select {
				case <-all:
				case <-time.After(guard):
					t.Error("late never joined the running jobs")
				}
			}
			return ok(ctx, tk)
		}),
		OnEvent: func(e schedule.Event) {
			if e.Type == schedule.EventSelected || e.Type == schedule.EventDone {
				events = append(events, e.Type+" "+e.Job)
			}
		},
	}
	// late depends on quick, which ends at once.
	rs := run(t, s, schedule.Graph{Jobs: []schedule.Job{job("a"), job("b"), job("quick"), job("late", "quick")}})
	if schedule.GroupStatus(rs) != "complete" {
		t.Fatalf("results %v", rs)
	}
	// No deferral either: every ready job was selected when it was ready.
	lateAt, aDone := slices.Index(events, "schedule.selected late"), slices.Index(events, "schedule.done a")
	if lateAt < 0 || aDone < lateAt {
		t.Errorf("events %q: want late selected while a runs", events)
	}
}

// The seed's BlockerDrainTest.test_user_review_only_holds_its_dependency_closure:
// a job held by its caller blocks; its dependent waits on it; an
// independent job still runs and completes; the group ends blocked.
func TestAHeldJobHoldsOnlyItsDependencyClosure(t *testing.T) {
	var ran []string
	var mu sync.Mutex
	s := &schedule.Scheduler{Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
		mu.Lock()
		ran = append(ran, t.Label)
		mu.Unlock()
		return ok(ctx, t)
	})}
	gate := job("01_gate")
	gate.Hold = "USER_REVIEW.md asks for a review first"
	rs := run(t, s, schedule.Graph{Jobs: []schedule.Job{gate, job("02_dependent", "01_gate"), job("03_independent")}})
	want := map[string]string{
		"01_gate":        "01_gate: blocked (USER_REVIEW.md asks for a review first)",
		"02_dependent":   "02_dependent: waiting on 01_gate",
		"03_independent": "03_independent: complete",
	}
	if diff := cmp.Diff(want, statuses(rs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if !slices.Equal(ran, []string{"03_independent"}) || schedule.GroupStatus(rs) != "blocked" {
		t.Errorf("ran %q, group %s; want only the independent job, blocked", ran, schedule.GroupStatus(rs))
	}
}

// The seed's test_runtime_blocker_still_drains_independent_task: a job whose
// retry budget runs out while it runs blocks; the independent job
// completes.
func TestARuntimeBlockerStillDrainsIndependentJobs(t *testing.T) {
	s := &schedule.Scheduler{Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
		if t.Label == "01_gate" {
			// As the retry layer reports a block.
			why := "worker recovery failure limit exhausted: 10/10"
			t.Observer(pilot.Event{Type: retry.EventBlocked, Message: why, Retry: &retry.Info{Reason: why}})
			v := pilot.Verdict{Verdict: pilot.Failed}
			v.FailureClass = pilot.FailGeneric
			return v, nil
		}
		return ok(ctx, t)
	}), MaxParallel: 1}
	rs := run(t, s, schedule.Graph{Jobs: []schedule.Job{job("01_gate"), job("02_independent"), job("03_after_gate", "01_gate")}})
	want := map[string]string{
		"01_gate":        "01_gate: blocked (worker recovery failure limit exhausted: 10/10)",
		"02_independent": "02_independent: complete",
		"03_after_gate":  "03_after_gate: waiting on 01_gate",
	}
	if diff := cmp.Diff(want, statuses(rs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

// A failure is not a block, but it too holds back only its dependents.
func TestAFailureHoldsOnlyItsDependents(t *testing.T) {
	s := &schedule.Scheduler{Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
		if t.Label == "a" {
			return pilot.Verdict{Verdict: pilot.Failed}, nil
		}
		return ok(ctx, t)
	})}
	rs := run(t, s, schedule.Graph{Jobs: []schedule.Job{job("a"), job("b", "a"), job("c", "b"), job("d")}})
	want := map[string]string{"a": "a: failed", "b": "b: waiting on a", "c": "c: waiting on b", "d": "d: complete"}
	if diff := cmp.Diff(want, statuses(rs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

// A fake dispatcher whose goroutine exits without returning (t.FailNow
// in it calls runtime.Goexit) fails its job instead of hanging Run.
func TestAJobWhoseDispatchExitsDoesNotHangTheRun(t *testing.T) {
	s := &schedule.Scheduler{Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, pt pilot.Task) (pilot.Verdict, error) {
		if pt.Label == "a" {
			runtime.Goexit()
		}
		return ok(ctx, pt)
	})}
	got := statuses(run(t, s, schedule.Graph{Jobs: []schedule.Job{job("a"), job("b", "a"), job("c")}}))
	if !strings.HasPrefix(got["a"], "a: failed") || !strings.HasPrefix(got["b"], "b: waiting") || !strings.HasPrefix(got["c"], "c: complete") {
		t.Errorf("results %q; want a failed, b waiting on it, c complete", got)
	}
}
