package pilot_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/internal/procfs"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/worktrees"
)

func fanoutJobs(mode pilot.Mode, providers ...string) []pilot.Job {
	var jobs []pilot.Job
	for _, p := range providers {
		jobs = append(jobs, pilot.Job{Task: pilot.Task{Provider: p, Mode: mode, Prompt: "x"}})
	}
	return jobs
}

func TestFanoutVerdictsInJobOrder(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t,
		fakeProvider(t, "slow", "sleep=200ms", "out=slow done"),
		fakeProvider(t, "fast", "out=fast done"),
		fakeProvider(t, "bad", "err=boom", "exit=2"),
	)
	var mu sync.Mutex
	started := map[int]string{}
	f := &pilot.Fanout{Dispatcher: d, OnEvent: func(i int, e pilot.Event) {
		if e.Started != nil {
			mu.Lock()
			started[i] = e.Started.Job
			mu.Unlock()
		}
	}}
	vs, err := f.Run(context.Background(), fanoutJobs(pilot.ModeReview, "slow", "fast", "bad"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, v.Job+" "+string(v.Verdict.Verdict))
	}
	want := []string{"slow:review completed", "fast:review completed", "bad:review error"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[int]string{0: "slow:review", 1: "fast:review", 2: "bad:review"}, started); diff != "" {
		t.Errorf("started events by job (-want +got):\n%s", diff)
	}
	if vs[2].ExitCode == nil || *vs[2].ExitCode != 2 || !strings.Contains(vs[2].StderrTail, "boom") || vs[2].Synthesized {
		t.Errorf("failing job's verdict = %+v", vs[2])
	}
}

func TestFanoutGuardsSpawnNothing(t *testing.T) {
	checkGoroutines(t)
	marker := filepath.Join(t.TempDir(), "spawned")
	touch := pilot.Provider{Name: "touch", Runner: "command", Argv: []string{"/bin/sh", "-c", "touch " + marker + "; echo ok"}}
	keyed := touch
	keyed.Name, keyed.CredentialEnv = "glm", "GLM_API_KEY"
	d := testDispatcher(t, touch, keyed)
	wd := t.TempDir()
	code := func(p string) pilot.Job {
		return pilot.Job{Task: pilot.Task{Provider: p, Mode: pilot.ModeCode, Prompt: "x", Workdir: wd}}
	}
	tests := []struct {
		name string
		jobs []pilot.Job
		is   error
		text string
	}{
		{"resume", []pilot.Job{{Task: pilot.Task{Provider: "touch", Mode: pilot.ModeResume, Prompt: "x"}}}, nil, "resume is not supported in fanout"},
		{"two code jobs, one workdir", []pilot.Job{code("touch"), {Task: pilot.Task{Provider: "touch", Mode: pilot.ModeReview, Prompt: "x", Workdir: wd}}, code("touch")},
			pilot.ErrSharedWorkdir, "jobs 1 (touch:code) and 3 (touch:code) both write in " + wd + ": multiple code jobs share one workdir"},
		{"missing credential", []pilot.Job{code("touch"), {Task: pilot.Task{Provider: "glm", Mode: pilot.ModeReview, Prompt: "x"}}}, nil, "credential missing for glm"},
		{"unknown provider", fanoutJobs(pilot.ModeReview, "touch", "bogus"), nil, "unknown provider: bogus"},
		// pilot-workers' order: every job's provider, mode and files
		// before any credential, so a later job's unknown provider is
		// the error, not an earlier job's missing credential.
		{"a bad job after a missing credential", []pilot.Job{{Task: pilot.Task{Provider: "glm", Mode: pilot.ModeReview, Prompt: "x"}},
			{Task: pilot.Task{Provider: "bogus", Mode: pilot.ModeReview, Prompt: "x"}}}, nil, "job 2 (bogus:review): pilot: unknown provider: bogus"},
		{"no jobs", nil, nil, "at least one job"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &pilot.Fanout{Dispatcher: d}
			vs, err := f.Run(context.Background(), tt.jobs)
			if err == nil || vs != nil {
				t.Fatalf("Run = %v, %v; want an error and no verdicts", vs, err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %q does not say %q", err, tt.text)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("a worker ran despite the guard")
			}
			assertEmptyDir(t, d.RunDir)
		})
	}
}

func TestFanoutWarnsAboutTestJobsSharingAWorkdir(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t, fakeProvider(t, "a", "out=ok"), fakeProvider(t, "b", "out=ok"))
	var warnings []string
	f := &pilot.Fanout{Dispatcher: d, OnEvent: func(i int, e pilot.Event) {
		if i == -1 && e.Type == event.FanoutWarning {
			warnings = append(warnings, e.Message)
		}
	}}
	vs, err := f.Run(context.Background(), fanoutJobs(pilot.ModeTest, "a", "b"))
	if err != nil || len(vs) != 2 || vs[0].Verdict.Verdict != pilot.Completed || vs[1].Verdict.Verdict != pilot.Completed {
		t.Fatalf("Run = %+v, %v", vs, err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "concurrent test jobs share a workdir") {
		t.Errorf("warnings = %q", warnings)
	}
}

func TestFanoutMaxParallel(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t, fakeProvider(t, "w", "out=ok"))
	var running, peak atomic.Int32
	f := &pilot.Fanout{Dispatcher: d, MaxParallel: 3, OnEvent: func(_ int, e pilot.Event) {
		switch {
		case e.Started != nil:
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
		case e.Verdict != nil:
			running.Add(-1)
		}
	}}
	vs, err := f.Run(context.Background(), fanoutJobs(pilot.ModeReview, strings.Split(strings.Repeat("w,", 12), ",")[:12]...))
	if err != nil || len(vs) != 12 {
		t.Fatalf("Run = %d verdicts, %v", len(vs), err)
	}
	if p := peak.Load(); p > 3 || p < 1 {
		t.Errorf("%d workers ran at once, want at most 3", p)
	}
}

// Cancelling the context ends running workers and starts no more; every
// job still has a verdict and nothing is left running.
func TestFanoutCancelGivesEveryJobAVerdict(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t, fakeProvider(t, "w", "out=ready", "block"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var readyOnce sync.Once
	d.OnLine = onLine("ready", func(string) { readyOnce.Do(cancel) })
	f := &pilot.Fanout{Dispatcher: d, MaxParallel: 2}
	vs, err := f.Run(ctx, fanoutJobs(pilot.ModeReview, "w", "w", "w", "w", "w"))
	if err != nil || len(vs) != 5 {
		t.Fatalf("Run = %d verdicts, %v", len(vs), err)
	}
	for i, v := range vs {
		if !v.Interrupted || v.FailureClass != pilot.FailCancelled || v.Job != "w:review" {
			t.Errorf("job %d: %+v, want an interrupted, cancelled verdict", i, v)
		}
		if v.RunID != "" {
			if left := procfs.WithEnv(pilot.EnvRunID + "=" + v.RunID); len(left) > 0 {
				t.Errorf("job %d: processes %v still alive", i, left)
			}
		}
	}
	if !vs[4].Synthesized {
		t.Errorf("the last job cannot have started, yet its verdict is not synthesized: %+v", vs[4])
	}
}

func TestFanoutFailFast(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t, fakeProvider(t, "bad", "exit=1"), fakeProvider(t, "slow", "out=x", "block"))
	f := &pilot.Fanout{Dispatcher: d, FailFast: true}
	vs, err := f.Run(context.Background(), fanoutJobs(pilot.ModeReview, "bad", "slow"))
	if err != nil {
		t.Fatal(err)
	}
	if vs[0].Verdict.Verdict != pilot.Failed || vs[1].FailureClass != pilot.FailCancelled {
		t.Errorf("verdicts = %+v / %+v, want the failure and then the sibling cancelled", vs[0].Failure, vs[1].Failure)
	}
}

// gitRepo is pilottest.GitRepo.
func gitRepo(t *testing.T) string { return pilottest.GitRepo(t) }

// Worktrees start from HEAD: a fanout from a repository with uncommitted
// changes warns, once, how many files its jobs will not see; a clean one
// says nothing.
func TestFanoutWarnsOfUncommittedChanges(t *testing.T) {
	repo := gitRepo(t)
	d := testDispatcher(t, pilot.Provider{Name: "r", Runner: "command", Argv: []string{"/bin/sh", "-c", "echo read"}})
	job := pilot.Job{Task: pilot.Task{Provider: "r", Mode: pilot.ModeReview, Prompt: "x", Workdir: repo}, Worktree: true}
	warnings := func() []string {
		var mu sync.Mutex
		var got []string
		f := &pilot.Fanout{Dispatcher: d, Worktrees: worktrees.New(d.RunDir, ""), OnEvent: func(_ int, e pilot.Event) {
			if e.Type == event.FanoutWarning {
				mu.Lock()
				got = append(got, e.Message)
				mu.Unlock()
			}
		}}
		if _, err := f.Run(context.Background(), []pilot.Job{job, job}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := warnings(); len(got) != 0 {
		t.Errorf("a clean repository: warnings %q", got)
	}
	os.WriteFile(filepath.Join(repo, "new.txt"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(repo, "README.md"), []byte("changed"), 0o644)
	want := []string{"note: worktrees start from HEAD: 2 file(s) with uncommitted changes in " + repo + " are not in them (commit them first for the jobs to see them)"}
	if diff := cmp.Diff(want, warnings()); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// A code job in a repository and one in a worktree of it write in
// different places: the guard lets them run.
func TestFanoutOneCodeJobBesideAWorktreeJob(t *testing.T) {
	repo := gitRepo(t)
	p := pilot.Provider{Name: "writer", Runner: "command", Argv: []string{"/bin/sh", "-c", "echo change > made.txt && echo done"}}
	d := testDispatcher(t, p)
	job := pilot.Job{Task: pilot.Task{Provider: "writer", Mode: pilot.ModeCode, Prompt: "x", Workdir: repo}}
	inTree := job
	inTree.Worktree = true
	vs, err := (&pilot.Fanout{Dispatcher: d, Worktrees: worktrees.New(d.RunDir, "")}).Run(context.Background(), []pilot.Job{job, inTree})
	if err != nil {
		t.Fatal(err)
	}
	if vs[0].Verdict.Verdict != pilot.Completed || vs[1].Verdict.Verdict != pilot.Completed || vs[1].Worktree == nil || !vs[1].Worktree.Kept {
		t.Fatalf("verdicts %+v; want both completed, the second's work kept in its worktree", vs)
	}
	if _, err := os.Stat(filepath.Join(repo, "made.txt")); err != nil {
		t.Errorf("the job in the repository wrote nothing there: %v", err)
	}
}

// Two code jobs in worktrees of one repository: the one that changes a file
// keeps its worktree, with the change committed on its branch, the other's
// is removed, and the inventory says so.
func TestFanoutWorktrees(t *testing.T) {
	checkGoroutines(t)
	repo := gitRepo(t)
	writer := pilot.Provider{Name: "writer", Runner: "command",
		Argv: []string{"/bin/sh", "-c", "echo change > made-by-pilot.txt && pwd"}}
	reader := pilot.Provider{Name: "reader", Runner: "command", Argv: []string{"/bin/sh", "-c", "pwd"}}
	d := testDispatcher(t, writer, reader)
	code := func(p, name string) pilot.Job {
		return pilot.Job{Task: pilot.Task{Provider: p, Mode: pilot.ModeCode, Prompt: "x", Workdir: repo}, Worktree: true, Name: name}
	}
	vs, err := (&pilot.Fanout{Dispatcher: d, Worktrees: worktrees.New(d.RunDir, "")}).Run(context.Background(), []pilot.Job{code("writer", "the writer"), code("reader", "")})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		if v.Verdict.Verdict != pilot.Completed || v.Worktree == nil {
			t.Fatalf("job %d: %+v", i, v)
		}
	}
	w, r := vs[0].Worktree, vs[1].Worktree
	if !w.Kept || r.Kept || w.Path == r.Path || !strings.HasPrefix(w.Branch, "pilot/the-writer-") || !strings.HasPrefix(r.Branch, "pilot/reader-") {
		t.Errorf("worktrees: writer %+v, reader %+v; want the writer's kept and the reader's removed", w, r)
	}
	top := gitOutput(t, repo, "rev-parse", "--show-toplevel")
	if filepath.Dir(w.Path) != top+".pilot-worktrees" || w.Repo != top || w.Base != gitOutput(t, repo, "rev-parse", "HEAD") {
		t.Errorf("the writer's worktree %+v; want it beside %s, from its HEAD", w, top)
	}
	if data, err := os.ReadFile(filepath.Join(w.Path, "made-by-pilot.txt")); err != nil || string(data) != "change\n" {
		t.Errorf("the kept worktree lacks the change: %q, %v", data, err)
	}
	if got := gitOutput(t, repo, "diff", "--name-only", w.Base, w.Branch); w.Commit == "" || got != "made-by-pilot.txt" {
		t.Errorf("the branch %s holds %q (commit %q), want the change committed", w.Branch, got, w.Commit)
	}
	if got := gitOutput(t, repo, "log", "-1", "--format=%an|%s", w.Branch); got != "pilot|pilot: job the writer (writer:code), run "+vs[0].RunID {
		t.Errorf("the commit: %q", got)
	}
	if _, err := os.Stat(r.Path); err == nil {
		t.Errorf("the clean worktree %s still exists", r.Path)
	}
	if _, err := os.Stat(filepath.Join(repo, "made-by-pilot.txt")); err == nil {
		t.Errorf("the job wrote into the repository's own work tree")
	}
	inv, err := worktrees.List(d.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, e := range inv {
		states[e.Branch] = e.State + " " + e.RunID + " " + e.Job + " " + e.Commit
	}
	want := map[string]string{w.Branch: "kept " + vs[0].RunID + " the writer (writer:code) " + w.Commit, r.Branch: "removed " + vs[1].RunID + " reader:code "}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("inventory (-want +got):\n%s", diff)
	}
}

// gitOutput runs git in dir and returns its output, trimmed.
func gitOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// A job's Name names it in its verdict, its started event and the errors
// about it; without one it is "provider:mode". Every verdict names its task
// file, a synthesized one too.
func TestFanoutJobNames(t *testing.T) {
	checkGoroutines(t)
	task := filepath.Join(t.TempDir(), "fix.md")
	os.WriteFile(task, []byte("fix it\n"), 0o644)
	d := testDispatcher(t, fakeProvider(t, "w", "out=ok"))
	var mu sync.Mutex
	started := map[int]string{}
	f := &pilot.Fanout{Dispatcher: d, OnEvent: func(i int, e pilot.Event) {
		if e.Started != nil {
			mu.Lock()
			started[i] = e.Started.Job
			mu.Unlock()
		}
	}}
	jobs := []pilot.Job{
		{Task: pilot.Task{Provider: "w", Mode: pilot.ModeReview, TaskFile: task}, Name: "first"},
		{Task: pilot.Task{Provider: "w", Mode: pilot.ModeReview, TaskFile: task}},
	}
	vs, err := f.Run(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, v.Job+" "+v.TaskFile)
	}
	if diff := cmp.Diff([]string{"first " + task, "w:review " + task}, got); diff != "" {
		t.Errorf("verdicts' job and task file (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[int]string{0: "first", 1: "w:review"}, started); diff != "" {
		t.Errorf("started events' job (-want +got):\n%s", diff)
	}
	// A job that never starts: its synthesized verdict names it too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	vs, err = f.Run(ctx, jobs)
	if err != nil || !vs[0].Synthesized || vs[0].Job != "first" || vs[0].TaskFile != task {
		t.Errorf("Run with a done context = %+v, %v", vs, err)
	}
	// The guards' errors name it.
	jobs[1].Task.TaskFile = "/nonexistent/task.md"
	jobs[1].Name = "second"
	if _, err := f.Run(context.Background(), jobs); err == nil || !strings.Contains(err.Error(), "job 2 (second)") {
		t.Errorf("Run = %v, want an error naming job 2 (second)", err)
	}
}

// A job says when it has its slot and is starting; until then it waits.
func TestFanoutJobStartingEvent(t *testing.T) {
	checkGoroutines(t)
	var mu sync.Mutex
	var order []string
	note := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	d := pilottest.DispatchFunc(func(_ context.Context, task pilot.Task) (pilot.Verdict, error) {
		note("dispatch " + task.Provider)
		return pilot.Verdict{Verdict: pilot.Completed}, nil
	})
	f := &pilot.Fanout{Dispatcher: d, MaxParallel: 1, OnEvent: func(i int, e pilot.Event) {
		if e.Type == event.FanoutJobStarting {
			note(fmt.Sprintf("starting %d", i))
		}
	}}
	if _, err := f.Run(context.Background(), fanoutJobs(pilot.ModeReview, "a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	want := []string{"starting 0", "dispatch a", "starting 1", "dispatch b", "starting 2", "dispatch c"}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestWorktreeNames(t *testing.T) {
	job := func(name, taskFile, provider string) pilot.Job {
		return pilot.Job{Task: pilot.Task{Provider: provider, TaskFile: taskFile}, Name: name, Worktree: true}
	}
	jobs := []pilot.Job{
		job("", "/tasks/fix-login.md", "glm"),
		job("", "/other/fix-login.md", "glm"),
		job("Fix the login, then ..test", "", "glm"),
		{Task: pilot.Task{Provider: "glm"}}, // no worktree: no name
		job("", "", "kimi-k3"),
		job("..", "", "glm"),
		job(strings.Repeat("x", 80), "", "glm"),
		job("", "/t/fix-login", "glm"),
	}
	want := []string{"fix-login-1a2b3c4d", "fix-login-2-1a2b3c4d", "Fix-the-login--then-.test-1a2b3c4d", "",
		"kimi-k3-1a2b3c4d", "job-1a2b3c4d", strings.Repeat("x", 48) + "-1a2b3c4d", "fix-login-8-1a2b3c4d"}
	if diff := cmp.Diff(want, pilot.WorktreeNames(jobs, "1a2b3c4d")); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}

func TestFanoutWorktreeNeedsARepository(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t, fakeProvider(t, "w", "out=x"))
	notRepo := t.TempDir()
	jobs := []pilot.Job{{Task: pilot.Task{Provider: "w", Mode: pilot.ModeCode, Prompt: "x", Workdir: notRepo}, Worktree: true}}
	_, err := (&pilot.Fanout{Dispatcher: d, Worktrees: worktrees.New(d.RunDir, "")}).Run(context.Background(), jobs)
	if err == nil || !strings.Contains(err.Error(), "not a git repository") || !strings.Contains(err.Error(), notRepo) {
		t.Errorf("Run error = %v, want one naming %s as not a git repository", err, notRepo)
	}
	// Without Worktrees, the root runs no git: the job is refused.
	if _, err := (&pilot.Fanout{Dispatcher: d}).Run(context.Background(), jobs); err == nil || !strings.Contains(err.Error(), "Fanout.Worktrees is nil") {
		t.Errorf("Run without Worktrees: error = %v, want the job refused", err)
	}
}

// gate is a fake dispatcher with Check and Runs; layer wraps one and
// unwraps to it.
type gate struct{ runs bool }

func (g *gate) Dispatch(_ context.Context, t pilot.Task) (pilot.Verdict, error) {
	return pilot.Verdict{Type: event.Verdict, Provider: t.Provider, Mode: t.Mode, Verdict: pilot.Completed}, nil
}

func (g *gate) Check(_ context.Context, t pilot.Task) error {
	if t.Provider == "bad" {
		return errors.New("no provider bad")
	}
	return nil
}

func (g *gate) Runs(pilot.Task) bool { return g.runs }

type layer struct{ next pilot.TaskDispatcher }

func (l layer) Dispatch(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
	return l.next.Dispatch(ctx, t)
}

func (l layer) Unwrap() pilot.TaskDispatcher { return l.next }

// countedWorktrees makes no worktree; it counts the ones asked for.
type countedWorktrees struct{ created atomic.Int32 }

func (w *countedWorktrees) CheckRepo(context.Context, string) error { return nil }

func (w *countedWorktrees) Create(_ context.Context, dir, name string) (pilot.WorktreeInfo, error) {
	w.created.Add(1)
	return pilot.WorktreeInfo{Name: name, Path: dir}, nil
}

func (w *countedWorktrees) Finish(_ context.Context, wt pilot.WorktreeInfo, _ string) (pilot.WorktreeInfo, error) {
	return wt, nil
}

func TestFanoutFindsCheckAndRunsBeneathLayers(t *testing.T) {
	g := &gate{}
	wts := &countedWorktrees{}
	f := &pilot.Fanout{Dispatcher: layer{layer{g}}, Worktrees: wts}
	job := func(p string) pilot.Job {
		return pilot.Job{Task: pilot.Task{Provider: p, Mode: pilot.ModeCode, Prompt: "x", Workdir: t.TempDir()}, Worktree: true}
	}
	if _, err := f.Run(context.Background(), []pilot.Job{job("bad")}); err == nil || !strings.Contains(err.Error(), "no provider bad") {
		t.Errorf("Run = %v, want the Check beneath two layers to refuse the job", err)
	}
	vs, err := f.Run(context.Background(), []pilot.Job{job("ok")})
	if err != nil || vs[0].Verdict.Verdict != pilot.Completed || vs[0].Worktree != nil || wts.created.Load() != 0 {
		t.Errorf("Run = %+v, %v, %d worktrees; want a job that runs nothing to get none", vs, err, wts.created.Load())
	}
}
