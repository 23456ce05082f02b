package temporal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"go.temporal.io/sdk/temporal"
)

// outcome is one RunJob call's return.
type outcome struct {
	res Result
	err error
}

// A generation of another host that renews its lease holds the job: an
// attempt here waits, launching nothing, for as long as renewals come;
// once they stop it waits out the lease and a quarter more, on its own
// clock, then takes the job over in a worktree of its own, from the old
// generation's commits as they were. The old generation's agent, still
// committing in its own worktree after the takeover, reaches nothing the
// new one publishes.
func TestRunJobWaitsOutTheLeaseOfAnotherHost(t *testing.T) {
	repo := pilottest.GitRepo(t)
	ctx := context.Background()
	f := fence{repo: repo, job: "leased"}
	base := mustGit(t, repo, "rev-parse", "HEAD")
	const lease = time.Second
	own := Owner{Job: "leased", Generation: 1, State: stateRunning, Host: "elsewhere", Pid: 1, LeaseMS: lease.Milliseconds(), Base: base}
	oid, err := f.swap(ctx, "", own)
	if err != nil {
		t.Fatal(err)
	}
	wtDir := filepath.Join(mustGit(t, repo, "rev-parse", "--path-format=absolute", "--git-common-dir"), "pilot-worktrees")
	old, err := f.worktree(ctx, wtDir, 1, base)
	if err != nil {
		t.Fatal(err)
	}
	if err := commitIn(pilot.Task{Workdir: old, Label: "before", Prompt: "gen 1 before the takeover"}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	renewals := 0
	var lastRenewal time.Time
	var launchedWhileRenewing atomic.Bool
	a := &Activities{Heartbeat: 100 * time.Millisecond, Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		mu.Lock()
		n, since := renewals, time.Since(lastRenewal)
		mu.Unlock()
		if n < 10 {
			t.Logf("launched after %d renewals, %v after the last", n, since)
			launchedWhileRenewing.Store(true)
		}
		if since < lease {
			t.Errorf("launched %v after the old generation's last renewal; want the lease (%v) waited out", since, lease)
		}
		if _, err := os.Stat(filepath.Join(task.Workdir, "before.txt")); err != nil {
			t.Errorf("generation 2 does not start from generation 1's commits: %v", err)
		}
		if task.Workdir == old {
			t.Errorf("generation 2 runs in generation 1's worktree %s", old)
		}
		// The old agent goes on in its own worktree.
		if err := commitIn(pilot.Task{Workdir: old, Label: "late", Prompt: "gen 1 after the takeover"}); err != nil {
			t.Error(err)
		}
		return verdict(task, pilot.Completed, ""), commitIn(task)
	})}
	// The old owner renews every 100 ms, 10 times (a second: the lease
	// would have run out without them), then falls silent.
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for range 10 {
			<-tick.C
			mu.Lock()
			own.Lease++
			now, err := f.swap(ctx, oid, own)
			if err != nil {
				mu.Unlock()
				t.Errorf("renewal %d: %v", renewals+1, err)
				return
			}
			oid, renewals, lastRenewal = now, renewals+1, time.Now()
			mu.Unlock()
		}
	}()
	env := activityEnv(t, a)
	res, err := runJob(t, env, testJob(repo, "leased"))
	if err != nil {
		t.Fatal(err)
	}
	if launchedWhileRenewing.Load() {
		t.Error("RunJob launched while the other host's generation renewed its lease")
	}
	if res.Generation != 2 {
		t.Errorf("RunJob = %+v; want generation 2", res)
	}
	if _, err := git(ctx, repo, nil, "cat-file", "-e", res.Commit+":late.txt"); err == nil {
		t.Error("the published commit holds what the old generation committed after the takeover")
	}
	if _, err := git(ctx, repo, nil, "cat-file", "-e", res.Commit+":before.txt"); err != nil {
		t.Errorf("the published commit lacks the old generation's work from before the takeover: %v", err)
	}
}

// A job whose branch exists though its fence published nothing is
// refused without a launch, and not retried: its work could never be
// published, so every retry would run it again.
func TestRunJobRefusesAJobWhoseBranchExists(t *testing.T) {
	repo := pilottest.GitRepo(t)
	mustGit(t, repo, "branch", BranchPrefix+"taken")
	calls := new(atomic.Int32)
	a := &Activities{Dispatcher: committing(calls)}
	for range 3 {
		_, err := runJob(t, activityEnv(t, a), testJob(repo, "taken"))
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || !app.NonRetryable() || app.Type() != ErrTypeBadJob {
			t.Fatalf("RunJob: %v; want a non-retryable %s error", err, ErrTypeBadJob)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the worker ran %d times; want none", n)
	}
}

// A worker that succeeds but leaves its work uncommitted, or commits it
// on something other than the job's base, publishes nothing: the fence
// is closed with what is wrong.
func TestRunJobPublishesOnlyACleanTreeOnTheBase(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(task pilot.Task) error
		want string
	}{
		{"uncommitted", func(task pilot.Task) error {
			return os.WriteFile(filepath.Join(task.Workdir, "loose.txt"), []byte("x\n"), 0o644)
		}, "uncommitted changes"},
		{"off-base", func(task pilot.Task) error {
			_, err := git(context.Background(), task.Workdir, nil, "checkout", "-q", "--orphan", "elsewhere")
			if err == nil {
				_, err = git(context.Background(), task.Workdir, nil, "-c", "user.name=a", "-c", "user.email=a@example.invalid", "commit", "-q", "--allow-empty", "-m", "unrelated")
			}
			return err
		}, "does not descend from the job's base"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := pilottest.GitRepo(t)
			a := &Activities{Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
				return verdict(task, pilot.Completed, ""), tc.do(task)
			})}
			_, err := runJob(t, activityEnv(t, a), testJob(repo, "j"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RunJob: %v; want an error that says %q", err, tc.want)
			}
			if _, err := git(context.Background(), repo, nil, "rev-parse", "-q", "--verify", "refs/heads/"+BranchPrefix+"j"); err == nil {
				t.Error("the job's branch was published")
			}
			f := fence{repo: repo, job: "j"}
			if _, o, _ := f.read(context.Background()); o.State != stateDone || !strings.Contains(o.Error, tc.want) {
				t.Errorf("the fence: %+v; want closed with the reason", o)
			}
		})
	}
}

// A generation stopped in the middle of its publish (git moved the
// branch and not yet the fence) leaves the branch while its fence still
// says it runs: a taker refuses to launch but does not give the job up,
// as it does for a branch no fence published; a later attempt finds the
// fence closed and takes its verdict.
func TestRunJobRetriesAHalfAppliedPublish(t *testing.T) {
	repo := pilottest.GitRepo(t)
	f := fence{repo: repo, job: "halfway"}
	deadOwner(t, f, 1, mustGit(t, repo, "rev-parse", "HEAD"))
	mustGit(t, repo, "branch", BranchPrefix+"halfway")
	calls := new(atomic.Int32)
	a := &Activities{Dispatcher: committing(calls)}
	_, err := runJob(t, activityEnv(t, a), testJob(repo, "halfway"))
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.NonRetryable() || app.Type() != ErrTypeFenced || !strings.Contains(err.Error(), "half applied") {
		t.Errorf("RunJob: %v; want a retryable %s error saying the publish may be half applied", err, ErrTypeFenced)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the worker ran %d times; want none", n)
	}
}
