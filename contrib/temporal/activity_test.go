package temporal

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/retry"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
)

// activityEnv is the SDK's activity test environment with a's RunJob
// registered.
func activityEnv(t *testing.T, a *Activities) *testsuite.TestActivityEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(a.RunJob, activity.RegisterOptions{Name: ActivityName})
	return env
}

func runJob(t *testing.T, env *testsuite.TestActivityEnvironment, j Job) (Result, error) {
	t.Helper()
	val, err := env.ExecuteActivity(ActivityName, j)
	if err != nil {
		res, _ := ResultOf(err)
		return res, err
	}
	var res Result
	if err := val.Get(&res); err != nil {
		t.Fatalf("decoding RunJob's result: %v", err)
	}
	return res, nil
}

func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := git(context.Background(), dir, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// commitIn commits a file named for the task's label in its workdir, as a
// worker doing its job would.
func commitIn(t pilot.Task) error {
	if err := os.WriteFile(filepath.Join(t.Workdir, t.Label+".txt"), []byte(t.Prompt+"\n"), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"add", "-A"}, {"-c", "user.name=agent", "-c", "user.email=agent@example.invalid", "commit", "-q", "-m", "work of " + t.Label}} {
		if _, err := git(context.Background(), t.Workdir, nil, args...); err != nil {
			return err
		}
	}
	return nil
}

// committing is a worker that commits its work and completes, counted
// in calls.
func committing(calls *atomic.Int32) pilot.TaskDispatcher {
	return pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		calls.Add(1)
		return verdict(task, pilot.Completed, ""), commitIn(task)
	})
}

func verdict(t pilot.Task, o pilot.Outcome, class pilot.FailureClass) pilot.Verdict {
	return pilot.Verdict{Type: "worker_runner.verdict", Provider: t.Provider, Mode: t.Mode, Label: t.Label, Verdict: o, Failure: pilot.Failure{FailureClass: class}}
}

func testJob(repo, name string) Job {
	return Job{Name: name, Repo: repo, Provider: "fake", Mode: pilot.ModeCode, Prompt: "do " + name}
}

func TestRunJobPublishesOnceAndReportsAgain(t *testing.T) {
	repo := pilottest.GitRepo(t)
	var calls atomic.Int32
	a := &Activities{Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		calls.Add(1)
		if err := commitIn(task); err != nil {
			return pilot.Verdict{}, err
		}
		return verdict(task, pilot.Completed, ""), nil
	})}
	env := activityEnv(t, a)
	j := testJob(repo, "job-1")
	res, err := runJob(t, env, j)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Verdict.Verdict != pilot.Completed || res.Generation != 1 || res.Commit == "" {
		t.Fatalf("RunJob = %+v; want a completed verdict of generation 1 with its commit", res)
	}
	if got := mustGit(t, repo, "rev-parse", "refs/heads/"+BranchPrefix+j.Name); got != res.Commit {
		t.Errorf("the job's branch is at %s; want the published commit %s", got, res.Commit)
	}
	if got := mustGit(t, repo, "log", "--format=%s", "-1", BranchPrefix+j.Name); got != "work of job-1" {
		t.Errorf("the job's branch's last commit is %q; want the worker's", got)
	}

	// Delivered again (the first completion lost, say): the verdict, and
	// nothing launched.
	res2, err := runJob(t, activityEnv(t, a), j)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(res, res2); diff != "" {
		t.Errorf("the second delivery's result differs (-first +second):\n%s", diff)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the worker ran %d times; want once", n)
	}
}

// Job names are unique per repository only: two repositories' jobs of
// one name, run by one worker with one WorktreeDir, each work in a
// worktree of their own repository and publish there.
func TestRunJobKeepsRepositoriesApartInOneWorktreeDir(t *testing.T) {
	repo1, repo2 := pilottest.GitRepo(t), pilottest.GitRepo(t)
	var mu sync.Mutex
	workdirs := map[string]string{} // prompt: the git dir the worker's workdir belongs to
	a := &Activities{WorktreeDir: t.TempDir(), Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		common, err := git(ctx, task.Workdir, nil, "rev-parse", "--path-format=absolute", "--git-common-dir")
		if err != nil {
			return pilot.Verdict{}, err
		}
		mu.Lock()
		workdirs[task.Prompt] = common
		mu.Unlock()
		return verdict(task, pilot.Completed, ""), commitIn(task)
	})}
	for _, repo := range []string{repo1, repo2} {
		j := testJob(repo, "fix")
		j.Prompt = repo
		if _, err := runJob(t, activityEnv(t, a), j); err != nil {
			t.Fatalf("the job of %s: %v", repo, err)
		}
	}
	for _, repo := range []string{repo1, repo2} {
		want := mustGit(t, repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
		if workdirs[repo] != want {
			t.Errorf("the job of %s ran in a worktree of %s", repo, workdirs[repo])
		}
		if got := mustGit(t, repo, "show", BranchPrefix+"fix:fix.txt"); got != repo {
			t.Errorf("%s's published fix.txt says %q; want its own job's work", repo, got)
		}
	}
}

// staleLock writes the lock file git leaves for ref when it dies
// mid-transaction, aged by age.
func staleLock(t *testing.T, repo, ref string, age time.Duration) string {
	t.Helper()
	common := mustGit(t, repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
	lock := filepath.Join(common, filepath.FromSlash(ref)+".lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-age)
	if err := os.Chtimes(lock, at, at); err != nil {
		t.Fatal(err)
	}
	return lock
}

// A crashed git's lock on the fence wedges nothing once it is older than
// StaleLockAge; a fresh one (a live git's, for all pilot knows) is left
// alone, and the attempt fails, to be retried.
func TestRunJobRecoversAStaleFenceLock(t *testing.T) {
	repo := pilottest.GitRepo(t)
	calls := new(atomic.Int32)
	a := &Activities{Dispatcher: committing(calls)}
	fresh := staleLock(t, repo, FenceRefPrefix+"job-1", 0)
	if _, err := runJob(t, activityEnv(t, a), testJob(repo, "job-1")); err == nil {
		t.Fatal("RunJob succeeded past a fresh lock of its fence")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("the fresh lock was removed: %v", err)
	}
	stale := staleLock(t, repo, FenceRefPrefix+"job-1", 2*StaleLockAge)
	res, err := runJob(t, activityEnv(t, a), testJob(repo, "job-1"))
	if err != nil || res.Verdict.Verdict.Verdict != pilot.Completed {
		t.Fatalf("RunJob past a stale lock: %+v, %v; want completed", res, err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stale lock is still there: %v", err)
	}
	if got := mustGit(t, repo, "rev-parse", "refs/heads/"+BranchPrefix+"job-1"); got != res.Commit {
		t.Errorf("the job's branch is at %s; want %s", got, res.Commit)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the worker ran %d times; want once", n)
	}
}

// A crash between the renames of the publishing transaction can leave
// the fence done and the job's branch absent, its lock behind: the next
// delivery repairs the branch at the published commit, and runs nothing.
func TestRunJobRepairsADoneFenceWithoutItsBranch(t *testing.T) {
	repo := pilottest.GitRepo(t)
	calls := new(atomic.Int32)
	a := &Activities{Dispatcher: committing(calls)}
	j := testJob(repo, "job-1")
	res, err := runJob(t, activityEnv(t, a), j)
	if err != nil {
		t.Fatal(err)
	}
	branch := "refs/heads/" + BranchPrefix + j.Name
	mustGit(t, repo, "update-ref", "-d", branch)
	staleLock(t, repo, branch, 2*StaleLockAge)
	res2, err := runJob(t, activityEnv(t, a), j)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(res, res2); diff != "" {
		t.Errorf("the second delivery's result differs (-first +second):\n%s", diff)
	}
	if got := mustGit(t, repo, "rev-parse", branch); got != res.Commit {
		t.Errorf("the job's branch is at %s after the repair; want the published %s", got, res.Commit)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the worker ran %d times; want once", n)
	}

	// A branch some other hand moved is reported, not taken as the work.
	mustGit(t, repo, "update-ref", branch, mustGit(t, repo, "rev-parse", "HEAD"))
	if _, err := runJob(t, activityEnv(t, a), j); err == nil || !strings.Contains(err.Error(), "something other than the fence moved it") {
		t.Errorf("RunJob with the branch moved: %v; want an error that says so", err)
	}
}

// A generation that cannot read its fence fails closed: within two
// heartbeat intervals it ends its worker (the fence may have moved on),
// and its result does not count.
func TestRunJobEndsItsWorkerWhenTheFenceCannotBeRead(t *testing.T) {
	repo := pilottest.GitRepo(t)
	away := filepath.Join(t.TempDir(), "git-away")
	ended := make(chan error, 1)
	a := &Activities{Heartbeat: 250 * time.Millisecond, Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		// The repository's git dir goes away while the worker runs.
		if err := os.Rename(filepath.Join(repo, ".git"), away); err != nil {
			return pilot.Verdict{}, err
		}
		select {
		case <-ctx.Done():
			ended <- context.Cause(ctx)
		case <-time.After(20 * time.Second):
			// A guard, not a wait for a child: fail here, not by hanging.
			ended <- errors.New("the worker ran 20 s with its fence unreadable")
		}
		if err := os.Rename(away, filepath.Join(repo, ".git")); err != nil {
			t.Error(err)
		}
		return verdict(task, pilot.Failed, pilot.FailCancelled), nil
	})}
	_, err := runJob(t, activityEnv(t, a), testJob(repo, "unreadable"))
	if cause := <-ended; !errors.Is(cause, errFenceLost) {
		t.Errorf("the worker's context ended with %v; want errFenceLost", cause)
	}
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeFenced || app.NonRetryable() || !strings.Contains(err.Error(), "could not be renewed") {
		t.Errorf("RunJob: %v; want a retryable %s error that says the fence could not be renewed", err, ErrTypeFenced)
	}
	f := fence{repo: repo, job: "unreadable"}
	if _, o, err := f.read(context.Background()); err != nil || o.State != stateDone || !strings.Contains(o.Error, "could not be renewed") {
		t.Errorf("the fence after: %+v, %v; want closed, with the reason", o, err)
	}
}

func TestRunJobFailureClassesMapToErrors(t *testing.T) {
	tests := []struct {
		class     pilot.FailureClass
		retryable bool
	}{
		{pilot.FailProviderAuth, false},
		{pilot.FailProviderQuota, false},
		{pilot.FailSpawn, false},
		{pilot.FailCancelled, false},
		{pilot.FailProviderConnection, true},
		{pilot.FailGeneric, true},
		{pilot.FailSessionStall, true},
		{"", false}, // an empty verdict
	}
	repo := pilottest.GitRepo(t)
	for i, tt := range tests {
		t.Run(string(tt.class), func(t *testing.T) {
			a := &Activities{Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
				if tt.class == "" {
					return verdict(task, pilot.Empty, ""), nil
				}
				return verdict(task, pilot.Failed, tt.class), nil
			})}
			j := testJob(repo, "class-"+string(rune('a'+i)))
			res, err := runJob(t, activityEnv(t, a), j)
			var app *temporal.ApplicationError
			if !errors.As(err, &app) {
				t.Fatalf("RunJob error = %v; want an application error", err)
			}
			want := string(tt.class)
			if want == "" {
				want = string(pilot.Empty)
			}
			if app.Type() != want || app.NonRetryable() == tt.retryable {
				t.Errorf("error type %q, non-retryable %v; want %q, %v", app.Type(), app.NonRetryable(), want, !tt.retryable)
			}
			if res.Verdict.FailureClass != tt.class || res.Job != j.Name {
				t.Errorf("ResultOf(err) = %+v; want the verdict of class %q", res, tt.class)
			}
			if _, err := git(context.Background(), repo, nil, "rev-parse", "-q", "--verify", "refs/heads/"+BranchPrefix+j.Name); err == nil {
				t.Errorf("a failed job's branch was published")
			}
		})
	}
}

func TestRunJobResumesTheFailedSession(t *testing.T) {
	repo := pilottest.GitRepo(t)
	var mu sync.Mutex
	var tasks []pilot.Task
	a := &Activities{Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		mu.Lock()
		tasks = append(tasks, task)
		n := len(tasks)
		mu.Unlock()
		if n == 1 {
			v := verdict(task, pilot.Failed, pilot.FailSessionStall)
			v.Resume, v.Record = "session-1", "/runs/1/record.json"
			return v, nil
		}
		return verdict(task, pilot.Completed, ""), nil
	})}
	j := testJob(repo, "stall")
	if _, err := runJob(t, activityEnv(t, a), j); err == nil {
		t.Fatal("the session-stall attempt gave no error")
	}
	res, err := runJob(t, activityEnv(t, a), j) // Temporal's retry
	if err != nil {
		t.Fatal(err)
	}
	if res.Generation != 2 {
		t.Errorf("the retry is generation %d; want 2", res.Generation)
	}
	got := tasks[1]
	if got.Resume != "session-1" || got.Prompt != retry.DefaultResumePrompt || got.Lineage.ResumedFrom != "/runs/1/record.json" || got.Lineage.Attempt != 2 {
		t.Errorf("the retry's task = %+v; want it to resume session-1 with the resume prompt", got)
	}
	if got.Workdir != tasks[0].Workdir {
		t.Errorf("the retry runs in %s; want the same worktree %s", got.Workdir, tasks[0].Workdir)
	}
}

// helperProcess starts the test binary as a process that lives until its
// stdin closes, and returns it (waited for at cleanup).
func helperProcess(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envBlockOnStdin+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	return cmd
}

// A pid and start time recorded under another boot of the host name no
// live process, whatever runs under them now: the job is taken over, not
// attached to.
func TestRunJobTakesOverAnOwnerOfAnotherBoot(t *testing.T) {
	if bootID() == "" {
		t.Skip("no boot id here")
	}
	repo := pilottest.GitRepo(t)
	owner := helperProcess(t) // alive, with the recorded pid and start time
	start, ok := pidStart(owner.Process.Pid)
	if !ok {
		t.Skip("no process start times here")
	}
	host, _ := os.Hostname()
	f := fence{repo: repo, job: "rebooted"}
	own := Owner{Job: "rebooted", Generation: 2, State: stateRunning, Host: host, Pid: owner.Process.Pid, PidStart: start, Boot: "an-earlier-boot"}
	if _, err := f.swap(context.Background(), "", own); err != nil {
		t.Fatal(err)
	}
	calls := new(atomic.Int32)
	a := &Activities{Heartbeat: 250 * time.Millisecond, Dispatcher: committing(calls)}
	type out struct {
		res Result
		err error
	}
	ch := make(chan out, 1)
	go func() {
		res, err := runJob(t, activityEnv(t, a), testJob(repo, "rebooted"))
		ch <- out{res, err}
	}()
	var res Result
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatal(o.err)
		}
		res = o.res
	case <-time.After(15 * time.Second):
		// A guard, not a wait for a child: attaching to the live helper
		// would wait for as long as it lives.
		t.Fatal("RunJob still waits after 15 s: it attached to the owner of another boot")
	}
	if res.Attached || res.Generation != 3 || calls.Load() != 1 {
		t.Errorf("RunJob = %+v after %d launches; want generation 3 launched once, not attached", res, calls.Load())
	}
	if _, o, _ := f.read(context.Background()); o.Boot != bootID() {
		t.Errorf("the new generation's fence records boot %q; want this one's, %q", o.Boot, bootID())
	}
}

func TestRunJobAttachesToALiveRun(t *testing.T) {
	repo := pilottest.GitRepo(t)
	owner := helperProcess(t)
	start, ok := pidStart(owner.Process.Pid)
	if !ok {
		t.Skip("no process start times here")
	}
	host, _ := os.Hostname()
	f := fence{repo: repo, job: "live"}
	// A lease of an hour: the owner renews nothing here, and the attempt
	// must attach, not wait it out.
	own := Owner{Job: "live", Generation: 3, State: stateRunning, Host: host, Pid: owner.Process.Pid, PidStart: start, LeaseMS: time.Hour.Milliseconds()}
	oid, err := f.swap(context.Background(), "", own)
	if err != nil {
		t.Fatal(err)
	}
	a := &Activities{Heartbeat: 250 * time.Millisecond, Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		t.Error("RunJob launched a worker while the job's run is alive")
		return pilot.Verdict{}, errors.New("launched")
	})}
	env := activityEnv(t, a)
	attached := make(chan struct{})
	var once sync.Once
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var p Progress
		if d.Get(&p) == nil && p.Phase == "attached" {
			once.Do(func() { close(attached) })
		}
	})
	type out struct {
		res Result
		err error
	}
	ch := make(chan out, 1)
	go func() {
		res, err := runJob(t, env, testJob(repo, "live"))
		ch <- out{res, err}
	}()
	<-attached
	// The owner finishes and publishes: its verdict is the job's.
	v := pilot.Verdict{Type: "worker_runner.verdict", Provider: "fake", Verdict: pilot.Completed, RunID: "run-of-gen-3"}
	head := mustGit(t, repo, "rev-parse", "HEAD")
	own.State, own.Verdict, own.Commit = stateDone, &v, head
	if _, err := f.publish(context.Background(), oid, own, head); err != nil {
		t.Fatal(err)
	}
	o := <-ch
	if o.err != nil {
		t.Fatal(o.err)
	}
	want := Result{Job: "live", Verdict: JobVerdict{Verdict: v}, Generation: 3, Commit: head, Attached: true}
	if diff := cmp.Diff(want, o.res); diff != "" {
		t.Errorf("RunJob (-want +got):\n%s", diff)
	}
}

// A dead owner's job is taken over at once, on this host, by a new
// generation in a worktree of its own that starts from the dead one's
// commits; the dead one's worktree (its index locked by a worker killed
// inside git commit) is left as it was.
func TestRunJobTakesOverADeadOwnersJob(t *testing.T) {
	repo := pilottest.GitRepo(t)
	f := fence{repo: repo, job: "orphan"}
	base := mustGit(t, repo, "rev-parse", "HEAD")
	deadOwner(t, f, 4, base)
	wtDir := filepath.Join(mustGit(t, repo, "rev-parse", "--path-format=absolute", "--git-common-dir"), "pilot-worktrees")
	old, err := f.worktree(context.Background(), wtDir, 4, base)
	if err != nil {
		t.Fatal(err)
	}
	if err := commitIn(pilot.Task{Workdir: old, Label: "gen4", Prompt: "the dead one's work"}); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(mustGit(t, old, "rev-parse", "--path-format=absolute", "--git-dir"), "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	a := &Activities{Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		calls.Add(1)
		_, o, err := f.read(ctx)
		if err != nil || o.Generation != 5 || o.Pid != os.Getpid() || o.Base != base {
			t.Errorf("while the worker runs the fence says %+v (%v); want generation 5, this process, base %s", o, err, base)
		}
		if want := filepath.Join(wtDir, "orphan", "g5"); task.Workdir != want {
			t.Errorf("the worker runs in %s; want generation 5's worktree %s", task.Workdir, want)
		}
		if _, err := os.Stat(filepath.Join(task.Workdir, "gen4.txt")); err != nil {
			t.Errorf("generation 5 does not start from generation 4's commits: %v", err)
		}
		return verdict(task, pilot.Completed, ""), commitIn(task)
	})}
	res, err := runJob(t, activityEnv(t, a), testJob(repo, "orphan"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Generation != 5 || calls.Load() != 1 {
		t.Errorf("RunJob = %+v after %d launches; want generation 5, one launch", res, calls.Load())
	}
	if _, err := os.Stat(lock); err != nil {
		t.Errorf("generation 4's worktree was touched: %v", err)
	}
	if got := mustGit(t, repo, "rev-parse", "refs/heads/"+f.workBranch(5)); got != res.Commit {
		t.Errorf("generation 5's work branch is at %s; want the published %s", got, res.Commit)
	}
}

func TestRunJobSupersededGenerationStopsAndPublishesNothing(t *testing.T) {
	repo := pilottest.GitRepo(t)
	f := fence{repo: repo, job: "raced"}
	a := &Activities{Heartbeat: 250 * time.Millisecond, Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		if err := commitIn(task); err != nil {
			return pilot.Verdict{}, err
		}
		// A replacement elsewhere commits the next generation. This
		// generation's renewal may move the fence between its read and
		// its swap (a busy machine): it reads again, as a real taker
		// would.
		for {
			oid, o, err := f.read(context.Background())
			if err != nil {
				return pilot.Verdict{}, err
			}
			o.Generation++
			o.Host = "elsewhere"
			_, err = f.swap(context.Background(), oid, o)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrFenced) {
				return pilot.Verdict{}, err
			}
		}
		<-ctx.Done() // the fence check ends this generation's worker
		if !errors.Is(context.Cause(ctx), ErrFenced) {
			t.Errorf("the dispatch ended for %v; want ErrFenced", context.Cause(ctx))
		}
		return verdict(task, pilot.Failed, pilot.FailCancelled), nil
	})}
	_, err := runJob(t, activityEnv(t, a), testJob(repo, "raced"))
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeFenced || app.NonRetryable() {
		t.Fatalf("RunJob error = %v; want a retryable %s error", err, ErrTypeFenced)
	}
	if _, err := git(context.Background(), repo, nil, "rev-parse", "-q", "--verify", "refs/heads/"+BranchPrefix+"raced"); err == nil {
		t.Error("the superseded generation published the job's branch")
	}
	if _, o, _ := f.read(context.Background()); o.Generation != 2 || o.Host != "elsewhere" || o.State != stateRunning {
		t.Errorf("the fence is %+v; want the replacement's generation 2, untouched", o)
	}
}

func TestPublishIsAtMostOnce(t *testing.T) {
	repo := pilottest.GitRepo(t)
	head := mustGit(t, repo, "rev-parse", "HEAD")
	f := fence{repo: repo, job: "once"}
	ctx := context.Background()
	oid, err := f.swap(ctx, "", Owner{Job: "once", Generation: 1, State: stateRunning})
	if err != nil {
		t.Fatal(err)
	}
	// The old generation's view of the fence is stale once generation 2
	// is committed: its publish fails and leaves no branch.
	oid2, err := f.swap(ctx, oid, Owner{Job: "once", Generation: 2, State: stateRunning})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.publish(ctx, oid, Owner{Job: "once", Generation: 1, State: stateDone}, head); !errors.Is(err, ErrFenced) {
		t.Fatalf("the stale generation's publish: %v; want ErrFenced", err)
	}
	if _, err := f.publish(ctx, oid2, Owner{Job: "once", Generation: 2, State: stateDone}, head); err != nil {
		t.Fatal(err)
	}
	if _, err := f.publish(ctx, oid2, Owner{Job: "once", Generation: 2, State: stateDone}, head); !errors.Is(err, ErrFenced) {
		t.Fatalf("a second publish: %v; want ErrFenced", err)
	}
	// Swapping from "absent" when a fence exists fails the same way.
	if _, err := f.swap(ctx, "", Owner{Job: "once", Generation: 1}); !errors.Is(err, ErrFenced) {
		t.Fatalf("creating a fence that exists: %v; want ErrFenced", err)
	}
}

func TestBadJobsAreRefused(t *testing.T) {
	a := &Activities{Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		t.Error("a bad job was dispatched")
		return pilot.Verdict{}, nil
	})}
	for _, j := range []Job{
		{Repo: "/r", Provider: "p"},
		{Name: "a/b", Repo: "/r", Provider: "p"},
		{Name: "x..y", Repo: "/r", Provider: "p"},
		{Name: "ok"},
		{Name: "ok", Repo: "relative", Provider: "p"},
		{Name: "ok", Repo: "/r"},
	} {
		_, err := runJob(t, activityEnv(t, a), j)
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || app.Type() != ErrTypeBadJob || !app.NonRetryable() {
			t.Errorf("RunJob(%+v) error = %v; want a non-retryable %s", j, err, ErrTypeBadJob)
		}
	}
	if _, err := runJob(t, activityEnv(t, &Activities{}), Job{Name: "ok", Repo: "/r", Provider: "p"}); err == nil {
		t.Error("Activities without a Dispatcher ran a job")
	}
}

// A stall inspection stops no heartbeat: the ones after it carry what
// pilot saw (without the stream tail), and the phases go on.
func TestHeartbeatsGoOnThroughAStallInspection(t *testing.T) {
	h := newHeartbeater(Progress{Job: "j", Phase: "starting"})
	var mu sync.Mutex
	var sent []Progress
	h.record = func(ctx context.Context, p Progress) {
		mu.Lock()
		sent = append(sent, p)
		mu.Unlock()
	}
	ticks := make(chan *pilot.Started, 16)
	stop := h.start(context.Background(), time.Hour, func(_ context.Context, s *pilot.Started) { ticks <- s })
	<-ticks // the first heartbeat
	h.observe(pilot.Event{Type: "worker_runner.started", Time: time.Unix(10, 0), Started: &pilot.Started{RunID: "r1", Pid: 7}})
	if s := <-ticks; s == nil || s.RunID != "r1" {
		t.Fatalf("the tick after the started event got %+v; want it", s)
	}
	h.observe(pilot.Event{Type: "worker_runner.phase", Time: time.Unix(20, 0), Session: &pilot.SessionState{Phase: pilot.PhaseToolRunning}})
	<-ticks
	h.observe(pilot.Event{Type: event.StallInspection, Time: time.Unix(30, 0), Inspection: &pilot.StallInspection{
		Action: "inspect", SilenceSeconds: 180, Phase: pilot.PhaseAwaitingModel, Reason: "no output for 180s",
		StreamTail: "the worker's last words", PendingToolCallIDs: []string{"t1"}}})
	<-ticks
	h.observe(pilot.Event{Type: "worker_runner.phase", Time: time.Unix(40, 0), Session: &pilot.SessionState{Phase: pilot.PhaseAwaitingModel}})
	<-ticks
	stop()
	mu.Lock()
	defer mu.Unlock()
	var phases []string
	for _, p := range sent {
		phases = append(phases, p.Phase)
		if p.LastActivity.Before(time.Unix(30, 0)) && p.Inspection != nil {
			t.Errorf("a heartbeat before the inspection carries one: %+v", p)
		}
	}
	last := sent[len(sent)-1]
	if last.LastActivity != time.Unix(40, 0) {
		t.Errorf("the last heartbeat %+v; want the activity after the inspection", last)
	}
	want := &pilot.StallInspection{Action: "inspect", SilenceSeconds: 180, Phase: pilot.PhaseAwaitingModel, Reason: "no output for 180s"}
	if diff := cmp.Diff(want, last.Inspection); diff != "" {
		t.Errorf("the last heartbeat's inspection (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"starting", "running", string(pilot.PhaseToolRunning), string(pilot.PhaseAwaitingModel)}, dedupe(phases)); diff != "" {
		t.Errorf("heartbeat phases (-want +got):\n%s", diff)
	}
}

func dedupe(s []string) []string {
	var out []string
	for _, x := range s {
		if len(out) == 0 || out[len(out)-1] != x {
			out = append(out, x)
		}
	}
	return out
}

// TestRunJobCancelEndsTheProcessTree dispatches a real worker (the fake
// agent, in its own process group) and cancels the activity: RunJob
// returns a canceled error only once nothing of the worker's tree is left.
func TestRunJobCancelEndsTheProcessTree(t *testing.T) {
	repo := pilottest.GitRepo(t)
	p := pilottest.FakeProvider(t, "fake", "spawn:setsid", "ready", "block", "end", "block")
	d := pilottest.Dispatcher(t, []pilot.Provider{p})
	var runID atomic.Value
	started := make(chan struct{})
	d.Observer = func(e pilot.Event) {
		if e.Started != nil {
			runID.Store(e.Started.RunID)
			close(started)
		}
	}
	a := &Activities{Dispatcher: d, Heartbeat: 250 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	env.RegisterActivityWithOptions(a.RunJob, activity.RegisterOptions{Name: ActivityName})
	errc := make(chan error, 1)
	go func() {
		_, err := env.ExecuteActivity(ActivityName, Job{Name: "cancel-me", Repo: repo, Provider: "fake", Mode: pilot.ModeCode, Prompt: "x"})
		errc <- err
	}()
	<-started
	cancel()
	err := <-errc
	if !temporal.IsCanceledError(err) {
		t.Fatalf("RunJob error = %v; want canceled", err)
	}
	if left := pilottest.Alive(runID.Load().(string)); len(left) > 0 {
		t.Errorf("processes of the cancelled run outlived RunJob: %v", left)
	}
	f := fence{repo: repo, job: "cancel-me"}
	if _, o, _ := f.read(context.Background()); o.State != stateDone || o.Verdict == nil || o.Verdict.FailureClass != pilot.FailCancelled {
		t.Errorf("the fence after cancellation: %+v; want done with the cancelled verdict", o)
	}
}

// TestRunJobHeartbeatsThroughAStallInspection runs a real worker that
// says one line and falls silent: pilot's stall policy inspects it, and
// RunJob goes on heartbeating, the inspection in the details, until pilot
// ends the worker at its idle timeout.
func TestRunJobHeartbeatsThroughAStallInspection(t *testing.T) {
	repo := pilottest.GitRepo(t)
	p := pilottest.FakeProvider(t, "fake", "out=hello", "block")
	d := pilottest.Dispatcher(t, []pilot.Provider{p})
	d.Stall = pilot.StallPolicy{Start: 100 * time.Millisecond, ModelResponse: 100 * time.Millisecond, Tool: time.Hour}
	d.Heartbeat = 20 * time.Millisecond
	var mu sync.Mutex
	inspected := make(chan struct{})
	var once sync.Once
	var after []Progress // heartbeats sent after the first inspection
	seen := false
	d.Observer = func(e pilot.Event) {
		if e.Type == event.StallInspection {
			mu.Lock()
			seen = true
			mu.Unlock()
			once.Do(func() { close(inspected) })
		}
	}
	defer func(f func(context.Context, Progress)) { recordHeartbeat = f }(recordHeartbeat)
	recordHeartbeat = func(ctx context.Context, p Progress) {
		mu.Lock()
		if seen {
			after = append(after, p)
		}
		mu.Unlock()
	}
	a := &Activities{Dispatcher: d, Heartbeat: 250 * time.Millisecond}
	j := Job{Name: "stalls", Repo: repo, Provider: "fake", Mode: pilot.ModeCode, Prompt: "x", IdleTimeout: 1500 * time.Millisecond}
	res, err := runJob(t, activityEnv(t, a), j)
	if err == nil || res.Verdict.FailureClass != pilot.FailIdleTimeout {
		t.Fatalf("RunJob = %+v, %v; want the idle timeout's verdict", res.Verdict, err)
	}
	<-inspected
	mu.Lock()
	defer mu.Unlock()
	// Heartbeats every 250 ms, and the worker lives about 1.4 s past the
	// inspection: many; the one on its way when the event came may lack it.
	carried := 0
	for _, p := range after {
		if p.Inspection != nil && p.Inspection.Action == "inspect" && p.Inspection.StreamTail == "" {
			carried++
		}
	}
	if len(after) < 2 || carried < len(after)-1 {
		t.Errorf("%d heartbeats after pilot's stall inspection, %d carrying it; want them to go on, with it", len(after), carried)
	}
}

// A generation that made no worktree (superseded, or its host gone,
// before it did) leaves no work branch: the next starts from the latest
// generation's that has one, not from the base. Generation 1's agent
// committed its work after its pilot died; generation 2 never launched;
// generation 3 must find generation 1's commit, as the scenario's
// killed host showed (its work was done twice).
func TestStartOfSkipsAGenerationWithoutWork(t *testing.T) {
	ctx := context.Background()
	repo := pilottest.GitRepo(t)
	base := mustGit(t, repo, "rev-parse", "HEAD")
	f := fence{repo: repo, job: "skipped"}
	if got := f.startOf(ctx, 2, base); got != base {
		t.Fatalf("startOf with no generation's work: %s, want the base %s", got, base)
	}
	wt, err := f.worktree(ctx, t.TempDir(), 1, base)
	if err != nil {
		t.Fatal(err)
	}
	if err := commitIn(pilot.Task{Workdir: wt, Label: "skipped", Prompt: "generation 1"}); err != nil {
		t.Fatal(err)
	}
	gen1 := mustGit(t, wt, "rev-parse", "HEAD")
	if gen1 == base {
		t.Fatal("generation 1 committed nothing")
	}
	if got := f.startOf(ctx, 2, base); got != gen1 {
		t.Errorf("startOf after generation 2, which made no worktree: %s, want generation 1's commit %s (the base is %s)", got, gen1, base)
	}
	if got := f.startOf(ctx, 1, base); got != gen1 {
		t.Errorf("startOf after generation 1: %s, want its commit %s", got, gen1)
	}
}

// deadOwner moves f's fence to generation gen, running on base, held by
// a process of this host that has exited.
func deadOwner(t *testing.T, f fence, gen int, base string) {
	t.Helper()
	dead := exec.Command(os.Args[0], "-test.run=^$")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if _, err := f.swap(context.Background(), "", Owner{Job: f.job, Generation: gen, State: stateRunning, Host: host, Pid: dead.Process.Pid, PidStart: 1, Base: base}); err != nil {
		t.Fatal(err)
	}
}
