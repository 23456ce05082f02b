package schedule_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/procfs"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/schedule"
)

func TestRerunWhenTheDefinitionChanged(t *testing.T) {
	dir := t.TempDir()
	task := filepath.Join(dir, "b.md")
	os.WriteFile(task, []byte("do b\n"), 0o644)
	path := filepath.Join(dir, schedule.StoreFileName)
	var mu sync.Mutex
	var ran []string
	var reasons []string
	pass := func(g schedule.Graph) []string {
		t.Helper()
		st, err := schedule.OpenStore(path, false)
		if err != nil {
			t.Fatal(err)
		}
		ran, reasons = nil, nil
		s := &schedule.Scheduler{Store: st, Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
			mu.Lock()
			ran = append(ran, tk.Label)
			mu.Unlock()
			return ok(ctx, tk)
		}), MaxParallel: 1, OnEvent: func(e schedule.Event) {
			if e.Type == schedule.EventSelected && e.Reason != "" {
				reasons = append(reasons, e.Job+": "+e.Reason)
			}
		}}
		run(t, s, g)
		return ran
	}
	b := job("b", "a")
	b.Task.Prompt, b.Task.TaskFile = "", task
	g := schedule.Graph{Jobs: []schedule.Job{job("a"), b}}
	if diff := cmp.Diff([]string{"a", "b"}, pass(g)); diff != "" {
		t.Fatalf("first run (-want +got):\n%s", diff)
	}
	if got := pass(g); got != nil {
		t.Fatalf("a second run of the same graph ran %v, want nothing", got)
	}
	os.WriteFile(task, []byte("do b, differently\n"), 0o644)
	if diff := cmp.Diff([]string{"b"}, pass(g)); diff != "" {
		t.Errorf("after b's task file changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b: its definition changed since it completed"}, reasons); diff != "" {
		t.Errorf("selected reasons (-want +got):\n%s", diff)
	}
	g.Jobs[0].Task.Provider = "q"
	if diff := cmp.Diff([]string{"a"}, pass(g)); diff != "" {
		t.Errorf("after a's provider changed (-want +got):\n%s", diff)
	}
	g.Jobs[1].Rerun = true
	if diff := cmp.Diff([]string{"b"}, pass(g)); diff != "" {
		t.Errorf("with b's Rerun (-want +got):\n%s", diff)
	}
}

func TestStoreReset(t *testing.T) {
	path := filepath.Join(t.TempDir(), schedule.StoreFileName)
	st, err := schedule.OpenStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	s := &schedule.Scheduler{Store: st, Dispatcher: pilottest.DispatchFunc(ok)}
	run(t, s, schedule.Graph{Jobs: []schedule.Job{job("a"), job("b"), job("c")}})

	dry, err := schedule.OpenStore(path, true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dry.Reset(nil)
	if err != nil || strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("dry-run Reset = %v, %v; want a, b, c", got, err)
	}
	got, err = st.Reset([]string{"b", "zz"})
	if err != nil || strings.Join(got, ",") != "b" {
		t.Fatalf("Reset(b, zz) = %v, %v; want b", got, err)
	}
	var ran []string
	s.Dispatcher = pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		ran = append(ran, tk.Label)
		return ok(ctx, tk)
	})
	run(t, s, schedule.Graph{Jobs: []schedule.Job{job("a"), job("b"), job("c")}})
	if diff := cmp.Diff([]string{"b"}, ran); diff != "" {
		t.Errorf("after resetting b (-want +got):\n%s", diff)
	}
}

func TestStoreResetSparesALiveOwner(t *testing.T) {
	// A real process of another owner, alive until the test ends.
	owner := exec.Command("cat")
	stdin, err := owner.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Start(); err != nil {
		t.Skip("cannot start cat:", err)
	}
	t.Cleanup(func() { stdin.Close(); owner.Wait() })
	path := filepath.Join(t.TempDir(), schedule.StoreFileName)
	start, _ := procfs.StartTime(owner.Process.Pid)
	doc := fmt.Sprintf(`{"version": 1, "jobs": {"x": {"status": "running", "pid": %d, "start": %d, "updated_at": "2026-01-01T00:00:00Z"},
		"y": {"status": "complete", "pid": 1, "updated_at": "2026-01-01T00:00:00Z"}}}`, owner.Process.Pid, start)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := schedule.OpenStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Reset(nil)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("a live pilot owns x (pilot pid %d", owner.Process.Pid)) {
		t.Fatalf("Reset = %v, want a refusal naming x and its owner", err)
	}
	if data, _ := os.ReadFile(path); string(data) != doc {
		t.Errorf("a refused Reset changed the file:\n%s", data)
	}
}

// Once a graph's finished jobs have spent its MaxCostUSD no further job
// starts: they end skipped, ready or not.
func TestScheduleStopsStartingJobsAtItsBudget(t *testing.T) {
	var mu sync.Mutex
	var started []string
	s := &schedule.Scheduler{MaxParallel: 1, MaxCostUSD: 1, Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		mu.Lock()
		started = append(started, tk.Label)
		mu.Unlock()
		c := 0.6
		return pilot.Verdict{Provider: tk.Provider, Mode: tk.Mode, Verdict: pilot.Completed, Usage: &pilot.Usage{CostUSD: &c}}, nil
	})}
	rs := run(t, s, schedule.Graph{Jobs: []schedule.Job{job("a"), job("b"), job("c"), job("d", "b")}})
	// b heads the longest path (b, d), so it starts first; then a.
	if got := strings.Join(started, ","); got != "b,a" {
		t.Errorf("started %s, want b,a", got)
	}
	const skipped = ": skipped (budget: the graph's finished jobs spent $1.2000 of its MaxCostUSD $1.0000; no further job starts)"
	want := map[string]string{"a": "a: complete", "b": "b: complete", "c": "c" + skipped, "d": "d" + skipped}
	if diff := cmp.Diff(want, statuses(rs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

// A job another pilot completed while this run went on is not run again:
// the claim yields to the store's complete record, the job counts as
// complete. (Before, a claim yielded only to a
// running record, and two pilots started 300 ms apart ran a job twice.)
func TestAJobAnotherPilotCompletedMeanwhileIsNotRunAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), schedule.StoreFileName)
	open := func() *schedule.Store {
		st, err := schedule.OpenStore(path, false)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	other := open() // the other pilot's handle on the same file
	var mu sync.Mutex
	var started []string
	s := &schedule.Scheduler{MaxParallel: 1, Store: open(), Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		mu.Lock()
		started = append(started, tk.Label)
		mu.Unlock()
		if tk.Label == "a" {
			// While a runs, the other pilot runs b to its end.
			if ok, holder, err := other.Claim("b", time.Now()); !ok || err != nil {
				t.Errorf("the other pilot's claim of b: %v %q %v", ok, holder, err)
			}
			if err := other.Release("b", true, time.Now()); err != nil {
				t.Error(err)
			}
		}
		return ok(ctx, tk)
	})}
	rs := run(t, s, schedule.Graph{Jobs: []schedule.Job{job("a"), job("b"), job("c", "a")}})
	if diff := cmp.Diff([]string{"a", "c"}, started); diff != "" {
		t.Errorf("dispatched (-want +got):\n%s", diff)
	}
	want := map[string]string{"a": "a: complete", "b": "b: complete", "c": "c: complete"}
	if diff := cmp.Diff(want, statuses(rs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}

	// With Rerun the job runs, whatever the store says.
	started = nil
	b := job("b")
	b.Rerun = true
	s.Dispatcher = pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		mu.Lock()
		started = append(started, tk.Label)
		mu.Unlock()
		return ok(ctx, tk)
	})
	run(t, s, schedule.Graph{Jobs: []schedule.Job{b}})
	if diff := cmp.Diff([]string{"b"}, started); diff != "" {
		t.Errorf("rerun dispatched (-want +got):\n%s", diff)
	}
}

// Write sets hold across pilots: a job whose write set overlaps a running
// job of another live pilot sharing the store waits (deferred, naming it)
// and starts once that pilot's job is over. (Before, the store recorded
// owners but not write sets, and two pilots on one graph ran two jobs
// that both write shared.txt at once.)
func TestWriteSetsHoldAcrossPilots(t *testing.T) {
	// The other pilot: a real process, alive until the test ends it.
	other := exec.Command("cat")
	stdin, err := other.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Skip("cannot start cat:", err)
	}
	ended := false
	end := func() {
		if !ended {
			ended = true
			stdin.Close()
			other.Wait()
		}
	}
	t.Cleanup(end)
	workdir := t.TempDir()
	path := filepath.Join(t.TempDir(), schedule.StoreFileName)
	start, _ := procfs.StartTime(other.Process.Pid)
	doc := fmt.Sprintf(`{"version": 1, "jobs": {"theirs": {"status": "running", "pid": %d, "start": %d, "updated_at": "2026-01-01T00:00:00Z",
		"writes": [%q]}}}`, other.Process.Pid, start, filepath.Join(workdir, "shared.txt"))
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := schedule.OpenStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var started, deferred []string
	s := &schedule.Scheduler{Store: st, Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		mu.Lock()
		started = append(started, tk.Label)
		mu.Unlock()
		return ok(ctx, tk)
	}), OnEvent: func(e schedule.Event) {
		if e.Type == schedule.EventDeferred {
			mu.Lock()
			deferred = append(deferred, e.Job+": "+e.Reason)
			mu.Unlock()
		}
	}, After: func(time.Duration) <-chan time.Time {
		// The scheduler will ask the store again: the other pilot's
		// job ends first, then the poll fires.
		end()
		c := make(chan time.Time, 1)
		c <- time.Now()
		return c
	}}
	mine := job("mine")
	mine.WriteSet = []string{"shared.txt"}
	free := job("free")
	free.WriteSet = []string{"other.txt"}
	rs := run(t, s, schedule.Graph{Workdir: workdir, Jobs: []schedule.Job{mine, free}})
	if diff := cmp.Diff(map[string]string{"mine": "mine: complete", "free": "free: complete"}, statuses(rs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if len(deferred) == 0 || !strings.Contains(deferred[0], "mine: its write set overlaps running job theirs (pilot pid") ||
		!strings.Contains(deferred[0], "another pilot's") {
		t.Errorf("deferred %q; want mine deferred for theirs", deferred)
	}
	if diff := cmp.Diff([]string{"free", "mine"}, started); diff != "" {
		t.Errorf("started (-want +got):\n%s", diff)
	}
}

// Two Runs in one process on one store never both start a job: each
// claims under a token of its own, and a record of this process's pid
// with another token is the other Run's, alive. (Before, any record with
// the process's own pid counted as the claimer's own.)
func TestTwoRunsInOneProcessStartAJobOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), schedule.StoreFileName)
	st, err := schedule.OpenStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	dispatched := 0
	release := make(chan struct{})
	first := pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		mu.Lock()
		dispatched++
		mu.Unlock()
		<-release // holds x while the second Run goes
		return ok(ctx, tk)
	})
	second := pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		mu.Lock()
		dispatched++
		mu.Unlock()
		return ok(ctx, tk)
	})
	started := make(chan struct{})
	a := &schedule.Scheduler{Store: st, Dispatcher: first, OnEvent: func(e schedule.Event) {
		if e.Type == schedule.EventSelected {
			close(started)
		}
	}}
	done := make(chan []schedule.Result)
	go func() {
		rs, err := a.Run(context.Background(), schedule.Graph{Jobs: []schedule.Job{job("x")}})
		if err != nil {
			t.Error(err)
		}
		done <- rs
	}()
	<-started
	b := &schedule.Scheduler{Store: st, Dispatcher: second}
	rs := run(t, b, schedule.Graph{Jobs: []schedule.Job{job("x")}})
	close(release)
	ra := <-done
	if rs[0].Status != schedule.StatusExternalActive || !strings.Contains(rs[0].BlockedReason, "another run of this pilot") {
		t.Errorf("the second Run's x: %s (%q); want external-active, owned by the other run", rs[0].Status, rs[0].BlockedReason)
	}
	if ra[0].Status != schedule.StatusComplete || dispatched != 1 {
		t.Errorf("the first Run's x: %s; dispatched %d times, want once", ra[0].Status, dispatched)
	}
}

// A pilot in another pid namespace (a container: both pilots may be pid
// 1) owns a running job: this pilot cannot see its pid, so the owner is
// not known dead, and the job waits (deferred) while the owner's lease is
// renewed; once this pilot has watched it go unrenewed for the lease's
// length, by its own clock, the job is taken over and runs once. (Before,
// a record with this process's own pid counted as its own, and both
// containerised pilots ran every job.)
func TestAJobOfAPilotInAnotherPidNamespaceWaitsForItsLease(t *testing.T) {
	path := filepath.Join(t.TempDir(), schedule.StoreFileName)
	// Its pid is this process's, its namespace another.
	doc := fmt.Sprintf(`{"version": 1, "jobs": {"x": {"status": "running", "pid": %d, "updated_at": "2026-01-01T00:00:00Z",
		"pid_namespace": "pid:[1]", "host": "container"}}}`, os.Getpid())
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := schedule.OpenStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	var judge time.Time // this pilot's clock for leases: a minute a look
	schedule.SetLease(st, 3*time.Minute, func() time.Time { judge = judge.Add(time.Minute); return judge })
	var mu sync.Mutex
	var dispatched []string
	var deferred []string
	s := &schedule.Scheduler{Store: st, Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		mu.Lock()
		dispatched = append(dispatched, tk.Label)
		mu.Unlock()
		return ok(ctx, tk)
	}), OnEvent: func(e schedule.Event) {
		if e.Type == schedule.EventDeferred {
			mu.Lock()
			deferred = append(deferred, e.Reason)
			mu.Unlock()
		}
	}, After: func(time.Duration) <-chan time.Time {
		c := make(chan time.Time, 1)
		c <- time.Now() // the poll fires at once; the lease's clock is the judge's
		return c
	}}
	rs := run(t, s, schedule.Graph{Jobs: []schedule.Job{job("x")}})
	if rs[0].Status != schedule.StatusComplete {
		t.Errorf("x: %s (%q); want complete, taken over after the lease", rs[0].Status, rs[0].BlockedReason)
	}
	if len(deferred) == 0 || !strings.Contains(deferred[0], "cannot see") || !strings.Contains(deferred[0], "not known dead") {
		t.Errorf("deferred %q; want x waiting for the other namespace's pilot", deferred)
	}
	if diff := cmp.Diff([]string{"x"}, dispatched); diff != "" {
		t.Errorf("dispatched (-want +got):\n%s", diff)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "took over from pilot pid") {
		t.Errorf("the store after: %s; want the takeover recorded", data)
	}
}

// Rerunning a completed job keeps its completion until the rerun
// completes: a rerun that fails leaves the job complete, as it was, with
// its branch. (Before, the claim overwrote the record and a failed rerun
// removed it: the job had never completed.)
func TestAFailedRerunKeepsTheEarlierCompletion(t *testing.T) {
	path := filepath.Join(t.TempDir(), schedule.StoreFileName)
	doc := `{"version": 1, "jobs": {"x": {"status": "complete", "pid": 1, "updated_at": "2026-01-01T00:00:00Z", "branch": "pilot/x-1"}}}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := schedule.OpenStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	s := &schedule.Scheduler{Store: st, Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		v := pilot.Verdict{Provider: tk.Provider, Mode: tk.Mode, Verdict: pilot.Failed}
		v.FailureClass = pilot.FailGeneric
		return v, nil
	})}
	x := job("x")
	x.Rerun = true
	rs := run(t, s, schedule.Graph{Jobs: []schedule.Job{x}})
	if rs[0].Status != schedule.StatusFailed {
		t.Fatalf("the rerun: %s, want failed", rs[0].Status)
	}
	// A later run without Rerun finds x complete, with its branch.
	var started []string
	s.Dispatcher = pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		started = append(started, tk.Label)
		return ok(ctx, tk)
	})
	rs = run(t, s, schedule.Graph{Jobs: []schedule.Job{job("x")}})
	if rs[0].Status != schedule.StatusComplete || len(started) != 0 || rs[0].Worktree == nil || rs[0].Worktree.Branch != "pilot/x-1" {
		t.Errorf("after the failed rerun: %s, dispatched %v, worktree %+v; want complete as before, not run, its branch kept", rs[0].Status, started, rs[0].Worktree)
	}
}
