package loop_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/taskloop/loop"
	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
	"github.com/pilotworkers/pilot/examples/taskloop/worklog"
)

// The seed's DispatcherConvergenceSimulationTest and BlockerDrainTest, over
// a fake stage dispatcher (the seed mocks its stage runners).

// barrier lets n stage attempts in once all n have arrived, so that the
// test sees them run at once without sleeping.
type barrier struct {
	mu      sync.Mutex
	n       int
	arrived int
	open    chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, open: make(chan struct{})} }

func (b *barrier) wait(ctx context.Context, t *testing.T) {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.open)
	}
	b.mu.Unlock()
	select {
	case <-b.open:
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Error("stage attempts that can run at once did not")
	}
}

func TestParallelMultiTaskFollowupDependencyAndTerminalCompletion(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, "sim/01_alpha", "src/alpha.go")
	addTask(t, ws, "sim/02_beta", "src/beta.go")
	addTask(t, ws, "sim/03+01,02_join", "src/join.go")
	addTask(t, ws, "sim/04_conflict", "./src/alpha.go")

	var mu sync.Mutex
	active := map[string]map[string]bool{}
	maximum := map[string]int{}
	var overlaps []string
	barriers := map[string]*barrier{
		taskfile.StageWorker: newBarrier(2), taskfile.StageSelfcheck: newBarrier(2), taskfile.StageReview: newBarrier(2),
	}
	f := newFake(t, nil)
	f.act = func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		mu.Lock()
		if active[c.Stage] == nil {
			active[c.Stage] = map[string]bool{}
		}
		active[c.Stage][c.Task] = true
		maximum[c.Stage] = max(maximum[c.Stage], len(active[c.Stage]))
		for _, s := range []string{taskfile.StageWorker, taskfile.StageSelfcheck, taskfile.StageReview} {
			if active[s]["sim/01_alpha"] && c.Task == "sim/04_conflict" || active[s]["sim/04_conflict"] && c.Task == "sim/01_alpha" {
				overlaps = append(overlaps, c.Stage)
			}
		}
		mu.Unlock()
		defer func() {
			mu.Lock()
			delete(active[c.Stage], c.Task)
			mu.Unlock()
		}()
		// alpha and beta's first attempt of each stage meet.
		if (c.Task == "sim/01_alpha" || c.Task == "sim/02_beta") && n == 0 {
			barriers[c.Stage].wait(ctx, t)
		}
		if c.Task == "sim/01_alpha" && c.Stage == taskfile.StageReview && n == 0 {
			// A follow-up plan: plan=0 becomes plan=1, with a new review
			// stub for it.
			dir := taskDir(t, c)
			write(t, planOf(dir), strings.Replace(read(t, planOf(dir)), "plan=0", "plan=1", 1))
			write(t, reviewOf(dir), taskfile.ReviewStub(taskfile.Header{Task: "01_alpha", Plan: 1, Tag: "SIM"}))
			return ok(pt)
		}
		return pilot.Verdict{}
	}
	l := newLoop(t, ws, f, nil)
	scans := 0
	l.OnEvent = func(e loop.Event) {
		if e.Type == loop.EventScan {
			scans++
		}
	}
	rep := run(t, l, "sim")
	if rep.Status != "complete" || rep.ExitCode() != 0 {
		t.Fatalf("report %+v; want complete, exit 0", rep)
	}
	for _, s := range []string{taskfile.StageWorker, taskfile.StageSelfcheck, taskfile.StageReview} {
		if maximum[s] < 2 {
			t.Errorf("at most %d %s attempts at once, want 2 or more", maximum[s], s)
		}
	}
	// The seed's dispatcher lets alpha and conflict, which write the same
	// file, run at once; pilot's write sets keep them apart.
	if len(overlaps) != 0 {
		t.Errorf("alpha and conflict, which write src/alpha.go, ran at once in %q", overlaps)
	}
	if scans < 2 || scans > 5 {
		t.Errorf("%d scans, want 2 to 5", scans)
	}
	for task, want := range map[string]int{"sim/01_alpha": 2, "sim/02_beta": 1, "sim/03+01,02_join": 1, "sim/04_conflict": 1} {
		if got := f.count(task, taskfile.StageReview); got != want {
			t.Errorf("%s: %d reviews, want %d", task, got, want)
		}
	}
	if got := f.count("sim/01_alpha", taskfile.StageWorker); got != 2 {
		t.Errorf("alpha's worker ran %d times, want 2 (its follow-up plan starts over)", got)
	}
	now := time.Now()
	root := filepath.Join(ws, "agent-task", "archive", now.Format("2006"), now.Format("01"), "sim")
	for _, sub := range []string{"01_alpha", "02_beta", "03+01,02_join", "04_conflict"} {
		if _, err := os.Stat(filepath.Join(root, sub, loop.CompleteLog)); err != nil {
			t.Errorf("archive of %s: %v", sub, err)
		}
		if tr := taskReport(t, rep, "sim/"+sub); tr.Status != "complete" || tr.Archive != filepath.Join(root, sub) {
			t.Errorf("%s: %+v; want complete in %s", sub, tr, filepath.Join(root, sub))
		}
	}
	// The join ran only after both its dependencies completed.
	calls := f.all()
	joinAt, lastDep := -1, -1
	for i, c := range calls {
		if c.Task == "sim/03+01,02_join" && joinAt < 0 {
			joinAt = i
		}
		if c.Task == "sim/01_alpha" || c.Task == "sim/02_beta" {
			lastDep = i
		}
	}
	if joinAt < lastDep {
		t.Errorf("the join started (call %d) before its dependencies ended (call %d)", joinAt, lastDep)
	}
	// Alpha's work log tells its story: two workers, two reviews.
	log := read(t, filepath.Join(root, "01_alpha", worklog.FileName))
	for _, want := range []string{"| START | sim/01_alpha | worker | 0 |", "| FINISH | sim/01_alpha | worker | 1 | pi | succeeded:0 |", "| FINISH | sim/01_alpha | review | 1 | codex | succeeded:0 |", "`01_alpha__p1__review__a01`"} {
		if !strings.Contains(log, want) {
			t.Errorf("alpha's work log lacks %q:\n%s", want, log)
		}
	}
}

func TestUserReviewOnlyHoldsItsDependencyClosure(t *testing.T) {
	ws := workspace(t)
	write(t, filepath.Join(ws, "agent-task", "m-test", "01_gate", "USER_REVIEW.md"), blockingUserReview)
	addTask(t, ws, "m-test/02+01_dependent", "src/dependent.go")
	addTask(t, ws, "m-test/03_independent", "src/independent.go")
	f := newFake(t, nil)
	l := newLoop(t, ws, f, nil)
	rep := run(t, l, "m-test")
	if rep.Status != "blocked" || rep.ExitCode() != 2 {
		t.Fatalf("report %+v; want blocked, exit 2", rep)
	}
	for _, c := range f.all() {
		if c.Task != "m-test/03_independent" {
			t.Errorf("%s's %s ran; only the independent task may", c.Task, c.Stage)
		}
	}
	if f.count("m-test/03_independent", taskfile.StageWorker) != 1 {
		t.Errorf("the independent task's worker ran %d times, want 1", f.count("m-test/03_independent", taskfile.StageWorker))
	}
	gate := taskReport(t, rep, "m-test/01_gate")
	if gate.Status != "blocked" || !strings.Contains(gate.Reason, "user review") || !strings.Contains(gate.Reason, "milestone-lock") {
		t.Errorf("gate: %+v; want blocked by its user review", gate)
	}
	if dep := taskReport(t, rep, "m-test/02+01_dependent"); dep.Status != "waiting" || len(dep.WaitingOn) != 1 || dep.WaitingOn[0] != "m-test/01_gate" {
		t.Errorf("dependent: %+v; want waiting on the gate", dep)
	}
	ind := taskReport(t, rep, "m-test/03_independent")
	if ind.Status != "complete" || !strings.HasSuffix(ind.Archive, filepath.Join("m-test", "03_independent")) {
		t.Errorf("independent: %+v; want complete and archived", ind)
	}
	o := l.State.Orchestration()
	if o == nil || o.Status != "blocked" || o.Tasks["m-test/01_gate"].Status != "blocked" || o.Tasks["m-test/02+01_dependent"].Status != "waiting" {
		t.Errorf("recorded orchestration %+v", o)
	}
	if g := l.State.Retry.Group("m-test"); g.Status != "blocked" {
		t.Errorf("group status %q, want blocked", g.Status)
	}
	// The stop is the file, not the state: nothing is blocked there.
	if b := l.State.Retry.Task("m-test/01_gate").Blocked; b != "" {
		t.Errorf("the user review left a block in the state: %q", b)
	}
}

func TestRuntimeBlockerStillDrainsIndependentTask(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, "m-test/01_gate", "src/gate.go")
	addTask(t, ws, "m-test/02_independent", "src/independent.go")
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		if c.Task == "m-test/01_gate" {
			return failed(pt, pilot.FailProviderStreamDisconnect)
		}
		return pilot.Verdict{}
	})
	c := &clock{}
	l := newLoop(t, ws, f, c)
	rep := run(t, l, "m-test")
	if rep.Status != "blocked" || rep.ExitCode() != 2 {
		t.Fatalf("report %+v; want blocked, exit 2", rep)
	}
	gate := taskReport(t, rep, "m-test/01_gate")
	if gate.Status != "blocked" || !strings.Contains(gate.Reason, "recovery failure limit exhausted: 10/10") {
		t.Errorf("gate: %+v; want blocked by its worker's budget", gate)
	}
	if ind := taskReport(t, rep, "m-test/02_independent"); ind.Status != "complete" {
		t.Errorf("independent: %+v; want complete", ind)
	}
	if n := f.count("m-test/01_gate", taskfile.StageWorker); n != 10 {
		t.Errorf("the gate's worker ran %d times, want 10", n)
	}
	// A new orchestration of the group makes the gate active again, with
	// no reason; the state still blocks it until --retry-blocked.
	tasks, err := loop.Scan(testSeed(), ws, "m-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.State.Prepare("m-test", ws, tasks, time.Now()); err != nil {
		t.Fatal(err)
	}
	o := l.State.Orchestration()
	if o.Status != "running" || o.Tasks["m-test/01_gate"].Status != "active" || o.Tasks["m-test/01_gate"].Reason != "" {
		t.Errorf("after Prepare: status %q, gate %+v; want running, active with no reason", o.Status, o.Tasks["m-test/01_gate"])
	}
}

func TestFailedStageAttemptsLeaveTheirRowsAndTheVerdict(t *testing.T) {
	ws := workspace(t)
	dir := addTask(t, ws, "g/01_task", "src/a.go")
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		if n == 0 {
			return failed(pt, pilot.FailGeneric)
		}
		return pilot.Verdict{}
	})
	l := newLoop(t, ws, f, nil)
	rep := run(t, l, "g")
	if rep.Status != "complete" {
		t.Fatalf("report %+v", rep)
	}
	tr := taskReport(t, rep, "g/01_task")
	log := read(t, filepath.Join(tr.Archive, worklog.FileName))
	for _, want := range []string{"| FINISH | g/01_task | worker | 0 | pi | failed:1 |", "| FINISH | g/01_task | worker | 1 | pi | succeeded:0 |"} {
		if !strings.Contains(log, want) {
			t.Errorf("work log lacks %q:\n%s", want, log)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the task directory is still there: %v", err)
	}
}
