package retry_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/worktrees"
)

// results keeps the Result of each task rd dispatches, by Task.Key (see
// UniqueKeys): a Fanout returns the verdicts alone.
func results(rd *retry.Dispatcher) map[string]retry.Result {
	var mu sync.Mutex
	m := map[string]retry.Result{}
	rd.OnResult = func(t pilot.Task, r retry.Result) {
		mu.Lock()
		m[t.Key] = r
		mu.Unlock()
	}
	return m
}

func reviewJob(provider, workdir string) pilot.Job {
	return pilot.Job{Task: pilot.Task{Provider: provider, Mode: pilot.ModeReview, Prompt: "review it", Workdir: workdir}}
}

// A job waiting to retry does not hold its slot: with one slot, the other
// job runs during the wait. Real workers (the fake agent) and real records.
func TestFanoutRetryWaitFreesTheSlot(t *testing.T) {
	d := testDispatcher(t,
		fakeProvider(t, "flaky", "err=upstream trouble", "exit=1"),
		fakeProvider(t, "steady", "out=done"))
	workdir := t.TempDir()
	steadyDone := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var retries, blocks []pilot.Event
	wait := 30 * time.Second
	if dl, ok := t.Deadline(); ok {
		wait = time.Until(dl) / 4
	}
	sleeps := 0
	rd := &retry.Dispatcher{Dispatcher: d, Policy: retry.Policy{MaxFailures: 3, Sleep: func(ctx context.Context, d time.Duration) error {
		sleeps++
		if sleeps == 1 {
			// The steady job can only finish if this wait left the
			// one slot free.
			select {
			case <-steadyDone:
			case <-time.After(wait):
				t.Error("the steady job did not run while the flaky one waited: the wait held the slot")
			}
		}
		return nil
	}}}
	rs := results(rd)
	f := &pilot.Fanout{
		MaxParallel: 1,
		OnEvent: func(job int, e pilot.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case job == 1 && e.Verdict != nil:
				once.Do(func() { close(steadyDone) })
			case job == 0 && e.Type == retry.EventRetry:
				retries = append(retries, e)
			case job == 0 && e.Type == retry.EventBlocked:
				blocks = append(blocks, e)
			}
		},
		Dispatcher: rd,
	}
	jobs := []pilot.Job{reviewJob("flaky", workdir), reviewJob("steady", workdir)}
	retry.UniqueKeys(jobs)
	vs, err := f.Run(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	flaky, steady := rs[jobs[0].Task.Key], rs[jobs[1].Task.Key]
	flaky.Job = vs[0].Job
	if steady.Verdict.Verdict != pilot.Completed || steady.Attempts != 1 || vs[1].RunID != steady.RunID {
		t.Errorf("steady: %s after %d attempts", steady.Verdict.Verdict, steady.Attempts)
	}
	if !flaky.Blocked || flaky.BlockedReason != "recovery failure limit exhausted: 3/3" || flaky.Attempts != 3 || flaky.Job != "flaky:review" {
		t.Errorf("flaky: blocked %v %q after %d attempts (job %q)", flaky.Blocked, flaky.BlockedReason, flaky.Attempts, flaky.Job)
	}
	if sleeps != 2 || len(retries) != 2 || len(blocks) != 1 {
		t.Errorf("%d waits, %d retry events, %d block events; want 2, 2, 1", sleeps, len(retries), len(blocks))
	}
	// Each attempt is its own run, linked to the one before.
	rec := flaky.Record
	for n := 3; n >= 1; n-- {
		r, err := pilot.ReadRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		if r.Attempt != n || r.RetryKey != retry.TaskKey(reviewJob("flaky", workdir).Task) || r.Status != "error" {
			t.Errorf("attempt %d's record: attempt %d key %q status %s", n, r.Attempt, r.RetryKey, r.Status)
		}
		if n == 1 {
			if r.PreviousRecord != "" {
				t.Errorf("the first attempt links %s", r.PreviousRecord)
			}
			break
		}
		if r.PreviousRecord == "" || r.PreviousRecord == rec || filepath.Dir(r.PreviousRecord) == filepath.Dir(rec) {
			t.Fatalf("attempt %d's previous record %q", n, r.PreviousRecord)
		}
		rec = r.PreviousRecord
	}
	// The retry events are in the failed attempts' events.log too.
	for _, e := range retries {
		data, err := os.ReadFile(filepath.Join(filepath.Dir(e.Retry.(*retry.Info).Record), "events.log"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), `"type":"worker_runner.retry"`) {
			t.Errorf("events.log of %s has no retry event:\n%s", e.Retry.(*retry.Info).Record, data)
		}
	}
}

func TestFanoutRetryKeysAndCancelledWait(t *testing.T) {
	d := testDispatcher(t, fakeProvider(t, "flaky", "err=boom", "exit=1"))
	state := openState(t, filepath.Join(t.TempDir(), "state.json"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	workdir := t.TempDir()
	var mu sync.Mutex
	waiting := 0
	rd := &retry.Dispatcher{Dispatcher: d, Policy: retry.Policy{State: state, Sleep: func(ctx context.Context, _ time.Duration) error {
		// Both jobs have failed once when both wait: then cancel.
		mu.Lock()
		if waiting++; waiting == 2 {
			cancel()
		}
		mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	}}}
	rs := results(rd)
	f := &pilot.Fanout{Dispatcher: rd}
	job := reviewJob("flaky", workdir)
	jobs := []pilot.Job{job, job}
	retry.UniqueKeys(jobs) // the two identical jobs keep budgets of their own
	if _, err := f.Run(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		if v := rs[j.Task.Key]; !v.Interrupted || v.Attempts != 1 || v.Blocked {
			t.Errorf("job %d: interrupted %v, %d attempts, blocked %v; want interrupted after one attempt", i, v.Interrupted, v.Attempts, v.Blocked)
		}
	}
	key := retry.TaskKey(job.Task)
	if got := state.Tasks(); !slices.Equal(got, []string{key, key + "#2"}) {
		t.Errorf("state keys %q, want %q and its #2", got, key)
	}
	for _, k := range state.Tasks() {
		if n := state.Task(k).RecoveryFailures["review"]; n != 1 {
			t.Errorf("%s: %d failures, want 1", k, n)
		}
	}
}

// A retried worktree job keeps its worktree across attempts (a resume needs
// the same files); a blocked one gets none.
func TestFanoutRetryWorktree(t *testing.T) {
	repo := gitRepo(t)
	flaky := pilot.Provider{Name: "flaky", Runner: "command",
		Argv: []string{"/bin/sh", "-c", "if [ -e made ]; then pwd; else touch made; exit 1; fi"}}
	d := testDispatcher(t, flaky)
	state := openState(t, filepath.Join(t.TempDir(), "state.json"))
	job := pilot.Job{Task: pilot.Task{Provider: "flaky", Mode: pilot.ModeCode, Prompt: "x", Workdir: repo, Label: "wt/1"}, Worktree: true}
	rd := &retry.Dispatcher{Dispatcher: d, Policy: retry.Policy{State: state, Sleep: func(context.Context, time.Duration) error { return nil }}}
	rs := results(rd)
	jobs := []pilot.Job{job}
	retry.UniqueKeys(jobs)
	vs, err := (&pilot.Fanout{Dispatcher: rd, Worktrees: worktrees.New(d.RunDir, "")}).Run(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	v, r := vs[0], rs["wt/1"]
	if v.Verdict.Verdict != pilot.Completed || r.Attempts != 2 || v.Worktree == nil || !v.Worktree.Kept {
		t.Fatalf("verdict %s after %d attempts, worktree %+v", v.Verdict.Verdict, r.Attempts, v.Worktree)
	}
	last, _ := pilot.ReadRecord(v.Record)
	first, _ := pilot.ReadRecord(last.PreviousRecord)
	if first.Workdir != v.Worktree.Path || last.Workdir != v.Worktree.Path {
		t.Errorf("attempts ran in %s and %s, want both in the worktree %s", first.Workdir, last.Workdir, v.Worktree.Path)
	}

	if err := state.UpdateTask("wt/1", func(s *retry.TaskState) { s.Blocked = "held for review" }); err != nil {
		t.Fatal(err)
	}
	vs, err = (&pilot.Fanout{Dispatcher: rd, Worktrees: worktrees.New(d.RunDir, "")}).Run(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	if v, r := vs[0], rs["wt/1"]; !r.Blocked || r.BlockedReason != "held for review" || v.Worktree != nil || r.Attempts != 0 || !r.Synthesized {
		t.Errorf("blocked job: %+v, %+v", v, r)
	}
}
