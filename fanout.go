package pilot

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/semaphore"
)

// A Job is one task of a Fanout.
type Job struct {
	Task Task
	// Worktree runs the task in a fresh git worktree of Task.Workdir, on
	// a branch of its own; see Fanout.
	Worktree bool
	// Key is the job's name in the retry state when Fanout.Retry is set;
	// zero fields take RetryKey's defaults, and a job whose key another
	// job already has gets "#2", "#3"... added to its Task.
	Key RetryKey
}

// Label is the job's name in verdicts and events: "provider:mode".
func (j Job) Label() string { return j.Task.Provider + ":" + string(j.Task.Mode) }

// A Fanout runs many jobs with bounded parallelism and returns one verdict
// per job, in job order. Its fields are configuration; Dispatcher is
// required. A Fanout is safe for concurrent use and never changed by Run.
type Fanout struct {
	// Dispatcher runs each job. Its Observer, if any, still sees every
	// event; OnEvent adds the job's index.
	Dispatcher *Dispatcher
	// MaxParallel bounds how many jobs run at once; zero means all of
	// them.
	MaxParallel int
	// FailFast cancels the jobs still running or waiting as soon as one
	// job's verdict is not a success. By default siblings are
	// independent: one failure cancels nothing.
	FailFast bool
	// OnEvent, when set, receives every event of every job with the job's
	// index, and fanout-level events (EventWarning) with index -1. It may
	// be called from several goroutines at once.
	OnEvent func(job int, e Event)
	// Worktrees creates and records the worktrees of jobs with Worktree
	// set; nil means worktrees under the Dispatcher's run directory (see
	// DefaultWorktrees).
	Worktrees Worktrees
	// Retry, when set, runs each job with DispatchWithRetry under this
	// policy. A job holds its slot of MaxParallel only while an attempt
	// runs, never while it waits to retry. Jobs share Retry.State.
	Retry *RetryPolicy
}

// EventWarning is a fanout-level warning (Message says what), such as test
// jobs sharing a workdir.
const EventWarning = "fanout.warning"

// Worktrees makes per-job git worktrees. The default implementation
// (DefaultWorktrees) uses the git CLI and keeps an inventory file.
type Worktrees interface {
	// CheckRepo reports an error when dir is not in a git repository
	// with at least one commit.
	CheckRepo(ctx context.Context, dir string) error
	// Create makes a worktree of the repository holding dir, named name,
	// and returns its directory and branch.
	Create(ctx context.Context, dir, name string) (WorktreeInfo, error)
	// Finish ends the run's use of the worktree: an unchanged one is
	// removed, a changed one is kept. The returned info says which.
	Finish(ctx context.Context, wt WorktreeInfo, runID string) (WorktreeInfo, error)
}

// WorktreeInfo describes a job's worktree in its verdict.
type WorktreeInfo struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Branch string `json:"branch"`
	// Kept is set when the job left changes, so the worktree and its
	// branch were kept for the caller; otherwise both were removed.
	Kept bool `json:"kept"`
}

// Run runs jobs and returns their verdicts in job order, one per job,
// always: a job that could not run gets a synthesized verdict ("synthesized":
// true, with "interrupted": true when ctx ended first).
//
// Before anything is spawned Run checks every job (provider, mode, task
// file, workdir), every distinct provider's credential, that no two code
// jobs share a workdir unless each has its own worktree, that worktree jobs'
// workdirs are git repositories, and that no job is in resume mode; any
// problem is an error and nothing runs. Two test jobs sharing a workdir only
// draw a warning.
//
// When ctx is done, running workers are ended (SIGTERM, grace, SIGKILL) and
// jobs not yet started are not started; every job still gets its verdict,
// and Run returns when nothing of any job is left running.
func (f *Fanout) Run(ctx context.Context, jobs []Job) ([]Verdict, error) {
	if f.Dispatcher == nil {
		return nil, errors.New("pilot: Fanout.Dispatcher is nil")
	}
	if len(jobs) == 0 {
		return nil, errors.New("pilot: at least one job is required")
	}
	wts := f.Worktrees
	if wts == nil {
		wts = DefaultWorktrees(f.Dispatcher.withDefaults().RunDir)
	}
	if err := f.guard(ctx, jobs, wts); err != nil {
		return nil, err
	}

	limit := f.MaxParallel
	if limit <= 0 || limit > len(jobs) {
		limit = len(jobs)
	}
	var keys []RetryKey
	if f.Retry != nil {
		keys = retryKeys(jobs)
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	verdicts := make([]Verdict, len(jobs))
	fanoutID := newRunID(time.Now(), "fanout")
	// Jobs take their first slot in job order (the semaphore serves
	// waiters first come, first served); a retry waits its turn behind
	// them.
	sem := semaphore.NewWeighted(int64(limit))
	var wg sync.WaitGroup
	for i := range jobs {
		if err := sem.Acquire(runCtx, 1); err != nil {
			verdicts[i] = synthesized(jobs[i], nil, "", true)
			continue
		}
		s := &fanoutSlot{sem: sem, held: true}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.release()
			var key RetryKey
			if keys != nil {
				key = keys[i]
			}
			v := f.runJob(runCtx, i, jobs[i], wts, fanoutID, s, key)
			if f.FailFast && !v.Verdict.Success() {
				cancel(fmt.Errorf("fail-fast: job %d (%s) ended %s", i, jobs[i].Label(), v.Verdict))
			}
			verdicts[i] = v
		}()
	}
	wg.Wait()
	return verdicts, nil
}

// fanoutSlot is one job's hold on the fanout's parallelism.
type fanoutSlot struct {
	sem  *semaphore.Weighted
	held bool
}

func (s *fanoutSlot) acquire(ctx context.Context) error {
	if s.held {
		return nil
	}
	if err := s.sem.Acquire(ctx, 1); err != nil {
		return err
	}
	s.held = true
	return nil
}

func (s *fanoutSlot) release() {
	if s.held {
		s.held = false
		s.sem.Release(1)
	}
}

// retryKeys is every job's retry key, with its defaults filled and
// duplicates told apart.
func retryKeys(jobs []Job) []RetryKey {
	keys := make([]RetryKey, len(jobs))
	seen := map[[2]string]int{}
	for i, j := range jobs {
		k := j.Key
		if k.Task == "" {
			k.Task = TaskKey(j.Task)
		}
		k = k.withDefaults(j.Task)
		id := [2]string{k.Task, k.Stage}
		seen[id]++
		if n := seen[id]; n > 1 {
			k.Task = fmt.Sprintf("%s#%d", k.Task, n)
		}
		keys[i] = k
	}
	return keys
}

// runJob dispatches one job and always returns its verdict.
func (f *Fanout) runJob(ctx context.Context, i int, job Job, wts Worktrees, fanoutID string, sl *fanoutSlot, key RetryKey) Verdict {
	if ctx.Err() != nil {
		return synthesized(job, nil, "", true)
	}
	label := job.Label()
	d := *f.Dispatcher
	var emitMu sync.Mutex
	if orig, on := f.Dispatcher.Observer, f.OnEvent; orig != nil || on != nil {
		d.Observer = func(e Event) {
			if e.Started != nil {
				s := *e.Started
				s.Job = label
				e.Started = &s
			}
			if e.Verdict != nil {
				v := *e.Verdict
				v.Job = label
				e.Verdict = &v
			}
			if orig != nil {
				orig(e)
			}
			if on != nil {
				emitMu.Lock()
				on(i, e)
				emitMu.Unlock()
			}
		}
	}
	task := job.Task
	var wt *WorktreeInfo
	if job.Worktree && !(f.Retry != nil && f.Retry.blocked(key)) {
		// (A blocked job runs nothing: it needs no worktree.)
		name := fmt.Sprintf("%s-%d-%s", fanoutID, i, task.Provider)
		info, err := wts.Create(ctx, task.Workdir, safeName(name, '-'))
		if err != nil {
			return synthesized(job, nil, "worktree: "+err.Error(), ctx.Err() != nil)
		}
		wt = &info
		task.Workdir = info.Path
	}
	var v Verdict
	var err error
	if f.Retry != nil {
		v, err = retryTask(ctx, d.dispatch, d.Observer, task, key, *f.Retry, sl)
		if err != nil && v.RunID != "" {
			// The attempt ran but its budget could not be kept.
			v.StderrTail = truncateTail(v.StderrTail + "\npilot: " + err.Error())
			err = nil
		}
	} else {
		v, err = d.Dispatch(ctx, task)
	}
	if err != nil {
		v = synthesized(job, nil, err.Error(), ctx.Err() != nil)
	}
	v.Job = label
	if ctx.Err() != nil && v.FailureClass == FailCancelled {
		v.Interrupted = true
	}
	if wt != nil {
		// The worktree's fate is decided even when ctx is done.
		info, err := wts.Finish(context.WithoutCancel(ctx), *wt, v.RunID)
		if err != nil {
			info = *wt
			info.Kept = true
			v.StderrTail = truncateTail(v.StderrTail + "\npilot: worktree: " + err.Error())
		}
		v.Worktree = &info
	}
	return v
}

// synthesized is the verdict of a job that produced none of its own.
func synthesized(job Job, exitCode *int, stderrTail string, interrupted bool) Verdict {
	v := Verdict{
		Type:        VerdictType,
		Job:         job.Label(),
		Provider:    job.Task.Provider,
		Mode:        job.Task.Mode,
		Label:       job.Task.Label,
		Verdict:     Failed,
		ExitCode:    exitCode,
		StderrTail:  truncateTail(stderrTail),
		Synthesized: true,
		Interrupted: interrupted,
	}
	v.FailureClass = FailGeneric
	v.FailureSource = "pilot"
	if interrupted {
		v.FailureClass = FailCancelled
	}
	return v
}

// truncateTail keeps the last stderrTailRunes characters of s.
func truncateTail(s string) string {
	if n := utf8.RuneCountInString(s); n > stderrTailRunes {
		for i := range s {
			if n <= stderrTailRunes {
				return s[i:]
			}
			n--
		}
	}
	return s
}

// Fanout guard errors, matched with errors.Is.
var (
	ErrResumeInFanout = errors.New("resume is not supported in fanout")
	ErrSharedWorkdir  = errors.New(`multiple code jobs share one workdir; use --jobs-file with per-job "worktree": true`)
)

// JobError reports a job the fanout refused before anything ran.
type JobError struct {
	Index int
	Label string
	Err   error
}

func (e *JobError) Error() string {
	return fmt.Sprintf("job %d (%s): %v", e.Index+1, e.Label, e.Err)
}

func (e *JobError) Unwrap() error { return e.Err }

// guard checks every job before anything is spawned.
func (f *Fanout) guard(ctx context.Context, jobs []Job, wts Worktrees) error {
	for i, j := range jobs {
		if j.Task.Mode == ModeResume {
			return &JobError{i, j.Label(), ErrResumeInFanout}
		}
	}
	for i, j := range jobs {
		if err := f.Dispatcher.Check(ctx, j.Task); err != nil {
			if errors.As(err, new(*CredentialError)) {
				return err // it names the provider and the fix
			}
			return &JobError{i, j.Label(), err}
		}
	}
	code := map[string][]int{}
	test := map[string]int{}
	checked := map[string]bool{}
	for i, j := range jobs {
		wd := workdirKey(j.Task.Workdir)
		if j.Worktree && !checked[wd] {
			if err := wts.CheckRepo(ctx, j.Task.Workdir); err != nil {
				return &JobError{i, j.Label(), err}
			}
			checked[wd] = true
		}
		switch j.Task.Mode {
		case ModeCode:
			code[wd] = append(code[wd], i)
		case ModeTest:
			test[wd]++
		}
	}
	for _, idx := range code {
		if len(idx) < 2 {
			continue
		}
		for _, i := range idx {
			if !jobs[i].Worktree {
				return ErrSharedWorkdir
			}
		}
	}
	for wd, n := range test {
		if n >= 2 && f.OnEvent != nil {
			f.OnEvent(-1, Event{Type: EventWarning, Time: time.Now().UTC(),
				Message: "note: concurrent test jobs share a workdir; caches may collide (" + wd + ")"})
		}
	}
	return nil
}

// workdirKey is the directory a task runs in, as compared by the guards.
func workdirKey(wd string) string {
	if wd == "" {
		wd = "."
	}
	if abs, err := filepath.Abs(wd); err == nil {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			return real
		}
		return abs
	}
	return wd
}
