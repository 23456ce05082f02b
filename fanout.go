package pilot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/internal/gate"
	"github.com/pilotworkers/pilot/internal/membudget"
	"github.com/pilotworkers/pilot/internal/text"
	"github.com/pilotworkers/pilot/size"
	"golang.org/x/sync/semaphore"
)

// A Job is one task of a Fanout.
type Job struct {
	Task Task
	// Worktree runs the task in a fresh git worktree of Task.Workdir, on
	// a branch of its own; see Fanout.
	Worktree bool
	// Name names the job in its verdict and started event ("job"), in
	// errors about it, and in its worktree's branch and commit; empty
	// means "provider:mode" (and the task file's base name for the
	// branch and commit).
	Name string
}

// label is the job's name in verdicts, events and errors: its Name, else
// "provider:mode".
func (j Job) label() string {
	if j.Name != "" {
		return j.Name
	}
	return j.workerLabel()
}

// workerLabel is "provider:mode".
func (j Job) workerLabel() string { return j.Task.Provider + ":" + string(j.Task.Mode) }

// describe is the job as its worktree's commit and inventory entry name it:
// "fix-login.md (glm:code)", with its Name, else its task file's base name,
// else its provider; just "glm:code" without a name or task file.
func (j Job) describe() string {
	name := j.Name
	if name == "" && j.Task.TaskFile != "" {
		name = filepath.Base(j.Task.TaskFile)
	}
	if name == "" {
		return j.workerLabel()
	}
	return name + " (" + j.workerLabel() + ")"
}

// A Fanout runs many jobs with bounded parallelism and returns one result
// per job, in job order. Its fields are configuration; Dispatcher is
// required. A Fanout is safe for concurrent use and never changed by Run.
//
// Fanout uses what its Dispatcher offers beyond Dispatch, when it has it:
// a Check(ctx, Task) error method (as [*Dispatcher] has) checks every job
// before anything runs, and a Runs(Task) bool method (as the retry
// package's Dispatcher has) says a job would run nothing (a blocked task),
// so that it gets no worktree. It looks for them through the layers that
// have an Unwrap() TaskDispatcher method (see TaskDispatcher).
type Fanout struct {
	// Dispatcher runs each job: a *Dispatcher, a layer over one (the
	// retry package's Dispatcher), or a fake. A *Dispatcher's Observer
	// still sees every event; OnEvent adds the job's index.
	Dispatcher TaskDispatcher
	// MaxParallel bounds how many jobs run at once; zero means all of
	// them.
	//
	// Each provider has a gate too, the schedule package's: its own bound
	// (Limits' MaxParallel, a providers file's max_parallel), a rate
	// limit's known reset that holds its jobs until then, and a used-up
	// quota (a provider-quota verdict with no reset) that closes it for
	// the rest of the run: its queued jobs end Blocked, other providers'
	// jobs go on. A job its provider holds back waits holding no slot, and
	// says why (event.FanoutJobWaiting); the jobs behind it may start.
	MaxParallel int
	// MemoryBudget bounds the resident memory of the running jobs' trees:
	// a job starts only when what the running ones count (each the more
	// of what its tree holds now and its expected peak) plus its own
	// expected peak fits, or when no job runs (so one always does). The
	// expected peak is [LimitsOf]'s: the provider's peaks in the run
	// history, else its memory limit, else 512 MiB. Jobs wait
	// in job order, and say so (event.FanoutJobWaiting), holding no slot;
	// a job keeps its share until it ends, waits between its retries
	// included. Zero means no budget.
	MemoryBudget size.Bytes
	// FailFast cancels the jobs still running or waiting as soon as one
	// job's verdict is not a success. By default siblings are
	// independent: one failure cancels nothing.
	FailFast bool
	// OnEvent, when set, receives every event of every job with the job's
	// index, and fanout-level events ("fanout.warning") with index -1. It may
	// be called from several goroutines at once.
	OnEvent func(job int, e Event)
	// Worktrees creates and records the worktrees of jobs with Worktree
	// set, which it requires: the worktrees package's New makes git
	// worktrees. The root package runs no git itself.
	Worktrees Worktrees
	// MaxCostUSD, when set, bounds what the fanout spends: once its
	// finished jobs' cost (their verdicts' usage) reaches it, no further
	// job starts. Those end skipped for the budget (a synthesized
	// budget-exceeded verdict, the total as evidence); running jobs
	// finish. A job whose CLI reports no cost counts nothing.
	MaxCostUSD float64
}

// Worktrees makes per-job git worktrees for a Fanout. The worktrees
// package's New is one that uses the git CLI and keeps an inventory file.
type Worktrees interface {
	// CheckRepo reports an error when dir is not in a git repository
	// with at least one commit.
	CheckRepo(ctx context.Context, dir string) error
	// Create makes a worktree of the repository holding dir, named name,
	// and returns its directory and branch.
	Create(ctx context.Context, dir, name string) (WorktreeInfo, error)
	// Finish ends the run's use of the worktree: an unchanged one is
	// removed, a changed one is kept, its changes committed on its branch
	// (wt.Job and wt.TaskFile say whose they are). The returned info says
	// which, and names the commit.
	Finish(ctx context.Context, wt WorktreeInfo, runID string) (WorktreeInfo, error)
}

// uncommittedCounter is a Worktrees that can also count the files with
// uncommitted changes in the repository holding dir (worktrees.Git can):
// the jobs' worktrees start from HEAD and see none of them, and Fanout
// warns so.
type uncommittedCounter interface {
	Uncommitted(ctx context.Context, dir string) (int, error)
}

// WorktreeInfo describes a job's worktree in its verdict.
type WorktreeInfo struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Branch string `json:"branch"`
	// Kept is set when the job left changes, so the worktree and its
	// branch were kept for the caller; otherwise both were removed.
	Kept bool `json:"kept"`
	// Repo is the repository's top-level directory, and Base the commit
	// the branch started from: git diff Base Branch is the job's work.
	Repo string `json:"repo,omitempty"`
	Base string `json:"base,omitempty"`
	// Commit is the commit Finish made of the changes the job left
	// uncommitted, on Branch (with worktrees.New: all of them, untracked
	// files included, .gitignore respected); empty when it made none.
	Commit string `json:"commit,omitempty"`
	// Job and TaskFile say which job used the worktree ("fix-login.md
	// (glm:code)" and its task file); Fanout sets them before it calls
	// Finish, which names them in its commit and its records.
	Job      string `json:"-"`
	TaskFile string `json:"-"`
}

// A JobResult is what a Fanout job came to: its verdict, and what the
// fanout adds to it. Its JSON form is the verdict's, with these fields
// after it.
type JobResult struct {
	Verdict
	// Worktree is the job's git worktree, when it had one.
	Worktree *WorktreeInfo `json:"worktree,omitempty"`
	// Synthesized marks a verdict the fanout made up for a job that
	// produced none of its own; Interrupted one cut short by ctx.
	Synthesized bool `json:"synthesized,omitempty"`
	Interrupted bool `json:"interrupted,omitempty"`
	// Skipped says why a job never started though it could have:
	// "budget" (Fanout.MaxCostUSD was spent).
	Skipped string `json:"skipped,omitempty"`
	// Blocked says why a job never started: its provider's quota was
	// used up by an earlier job, whose evidence it names ("provider glm
	// quota used up (job fix-login): ..."). Its verdict is synthesized,
	// class provider-quota.
	Blocked string `json:"blocked,omitempty"`
}

// Run runs jobs and returns their results in job order, one per job,
// always: a job that could not run gets a synthesized verdict (Synthesized,
// and Interrupted when ctx ended first).
//
// Before anything is spawned Run checks every job (provider, mode, task
// file, workdir), every distinct provider's credential, that no two code
// jobs share a workdir unless each has its own worktree, that worktree jobs'
// workdirs are git repositories, and that no job is in resume mode; any
// problem is an error and nothing runs. Two test jobs sharing a workdir only
// draw a warning. With a *Dispatcher (or a layer over one) it also checks
// that the jobs that may run at once fit in the process's open-file
// limit (RLIMIT_NOFILE, about 8 descriptors each): when they do not, the
// error names the limit and the fix, errors.Is finds syscall.EMFILE in
// it, and nothing runs.
//
// When ctx is done, running workers are ended (SIGTERM, grace, SIGKILL) and
// jobs not yet started are not started; every job still gets its verdict,
// and Run returns when nothing of any job is left running.
func (f *Fanout) Run(ctx context.Context, jobs []Job) ([]JobResult, error) {
	if f.Dispatcher == nil {
		return nil, errors.New("pilot: Fanout.Dispatcher is nil")
	}
	if len(jobs) == 0 {
		return nil, errors.New("pilot: at least one job is required")
	}
	if err := f.guard(ctx, jobs, f.Worktrees); err != nil {
		return nil, err
	}
	if _, spawns := capability[*Dispatcher](f.Dispatcher); spawns {
		if err := checkFileLimit(f.parallel(jobs)); err != nil {
			return nil, err
		}
	}
	fr := f.newFanoutRun(ctx, jobs)
	defer fr.cancel(nil)
	queue := make([]int, len(jobs))
	for i := range queue {
		queue[i] = i
	}
	for len(queue) > 0 {
		if fr.ctx.Err() != nil {
			for _, i := range queue {
				fr.results[i] = synthesized(jobs[i], nil, "", true)
			}
			break
		}
		room := fr.mem.changed() // before the pass: no change is missed
		var next time.Time
		if queue, next = fr.pass(queue); len(queue) > 0 {
			fr.wait(room, next)
		}
	}
	fr.wg.Wait()
	return fr.results, nil
}

// parallel is the most jobs of jobs that can run at once: the fanout's
// MaxParallel, and each provider's own bound.
func (f *Fanout) parallel(jobs []Job) int {
	per := map[string]int{}
	for _, j := range jobs {
		per[j.Task.Provider]++
	}
	n := 0
	for p, c := range per {
		if limit := LimitsOf(f.Dispatcher, Task{Provider: p}).MaxParallel; limit > 0 {
			c = min(c, limit)
		}
		n += c
	}
	if f.MaxParallel > 0 {
		n = min(n, f.MaxParallel)
	}
	return n
}

// fanoutRun is the state of one Fanout.Run: the jobs, their results, and
// what decides when each starts (its slots, the providers' gates, the
// cost spent and the memory budget).
type fanoutRun struct {
	f       *Fanout
	jobs    []Job
	results []JobResult
	names   []string // the jobs' worktree names
	ctx     context.Context
	cancel  context.CancelCauseFunc
	// sem is the fanout's parallelism: a job takes its first slot in
	// job order; a retry taking its slot back (WithoutSlot) goes first.
	sem      *semaphore.Weighted
	slotWait string        // what a job without a slot is told
	poke     chan struct{} // a slot, a provider's slot or a gate changed
	gates    *gate.Set
	spent    *spending
	mem      *fanoutMemory // nil without a MemoryBudget
	told     []string      // the last wait each job was told of
	wg       sync.WaitGroup
}

func (f *Fanout) newFanoutRun(ctx context.Context, jobs []Job) *fanoutRun {
	limit := f.MaxParallel
	if limit <= 0 || limit > len(jobs) {
		limit = len(jobs)
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	fr := &fanoutRun{f: f, jobs: jobs, results: make([]JobResult, len(jobs)),
		names: worktreeNames(jobs, hex.EncodeToString(id[:])),
		sem:   semaphore.NewWeighted(int64(limit)), poke: make(chan struct{}, 1),
		slotWait: fmt.Sprintf("waiting for a slot: all %d of the fanout's slots are running", limit),
		spent:    &spending{max: f.MaxCostUSD}, mem: f.memory(), told: make([]string, len(jobs))}
	fr.ctx, fr.cancel = context.WithCancelCause(ctx)
	fr.gates = gate.New(func(provider string) int {
		return LimitsOf(f.Dispatcher, Task{Provider: provider}).MaxParallel
	}, fr.wake)
	return fr
}

func (fr *fanoutRun) wake() {
	select {
	case fr.poke <- struct{}{}:
	default:
	}
}

// say tells, once per wait (key), why job i waits.
func (fr *fanoutRun) say(i int, key, why string) {
	if fr.told[i] != key && fr.f.OnEvent != nil {
		fr.f.OnEvent(i, Event{Type: event.FanoutJobWaiting, Time: time.Now().UTC(), Message: why})
	}
	fr.told[i] = key
}

// pass starts every job of queue that may start now, in job order, and
// ends those that never will; it returns the jobs that wait, and the
// earliest provider reset one of them waits for (zero for none).
func (fr *fanoutRun) pass(queue []int) (keep []int, next time.Time) {
	now := time.Now()
	keep = queue[:0]
	// behind is why the jobs after one that waits for a slot or for
	// memory wait: behind it, in job order.
	var behind, behindKey string
	for _, i := range queue {
		p := fr.jobs[i].Task.Provider
		st := fr.gates.Check(p, now)
		switch {
		case st.Closed != "":
			fr.results[i] = blocked(fr.jobs[i], st.Closed)
			continue
		case behind != "":
			keep = append(keep, i)
			fr.say(i, behindKey, behind)
			continue
		case !st.Open():
			// Its provider holds it back; it holds no slot, and the
			// other providers' jobs go on.
			keep = append(keep, i)
			why := st.Waiting(p)
			fr.say(i, why, why)
			if !st.Until.IsZero() && (next.IsZero() || st.Until.Before(next)) {
				next = st.Until
			}
			continue
		}
		if !fr.sem.TryAcquire(1) {
			keep = append(keep, i)
			behind, behindKey = fr.slotWait, "\x00slot"
			fr.say(i, behindKey, behind)
			continue
		}
		if why, over := fr.spent.over("fanout"); over {
			fr.sem.Release(1)
			fr.results[i] = skipped(fr.jobs[i], why)
			continue
		}
		hold, why := fr.mem.tryAcquire(fr.jobs[i])
		if why != "" {
			// Memory is let in job order: the jobs after it wait.
			fr.sem.Release(1)
			keep = append(keep, i)
			fr.say(i, "\x00memory", why)
			behind, behindKey = fmt.Sprintf("waiting behind job %d (%s), which waits for memory", i, fr.jobs[i].label()), fmt.Sprintf("\x00behind %d", i)
			continue
		}
		fr.start(i, hold)
	}
	return keep, next
}

// start runs job i, which holds a slot, its provider's gate and hold (its
// share of the memory budget), in a goroutine of its own.
func (fr *fanoutRun) start(i int, hold *membudget.Hold) {
	p := fr.jobs[i].Task.Provider
	fr.gates.Take(p)
	s := &fanoutSlot{sem: fr.sem, held: true, wake: fr.wake}
	job := gated(fr.mem.follow(fr.jobs[i], hold), fr.gates)
	fr.wg.Add(1)
	go func() {
		defer fr.wg.Done()
		defer fr.gates.Done(p) // last: it wakes the loop
		defer hold.Release()
		defer s.release()
		ctx := context.WithValue(fr.ctx, slotKey{}, s)
		if fr.mem != nil {
			ctx = context.WithValue(ctx, memoryFollowedKey{}, true)
		}
		r := fr.f.runJob(ctx, i, job, fr.f.Worktrees, fr.names[i])
		fr.gates.Learn(p, gateFailure(r.Verdict), time.Now())
		fr.spent.add(r.Usage)
		if v := r.Verdict; fr.f.FailFast && !v.Verdict.Success() {
			fr.cancel(fmt.Errorf("fail-fast: job %d (%s) ended %s", i, fr.jobs[i].label(), v.Verdict))
		}
		fr.results[i] = r
	}()
}

// wait waits for something that may let a waiting job start: a slot or a
// gate changed, memory was freed (room), a provider's reset came (next),
// or the run ended.
func (fr *fanoutRun) wait(room <-chan struct{}, next time.Time) {
	var reset <-chan time.Time
	if !next.IsZero() {
		timer := time.NewTimer(time.Until(next))
		defer timer.Stop()
		reset = timer.C
	}
	select {
	case <-fr.poke:
	case <-room:
	case <-reset:
	case <-fr.ctx.Done():
	}
}

// fanoutSlot is one job's hold on the fanout's parallelism. Only the job's
// goroutine uses it.
type fanoutSlot struct {
	sem  *semaphore.Weighted
	held bool
	wake func() // the fanout's loop: a slot may be free
}

// slotKey is the context key of a Fanout job's slot.
type slotKey struct{}

// WithoutSlot calls wait and returns its error. Inside a [Fanout] job it
// gives the job's slot of MaxParallel back for the call and takes one again
// before it returns (failing with ctx's error if ctx ends first), so that a
// layer waiting to retry (the retry package) or for a provider's rate limit
// to reset holds no slot while it waits. Outside a Fanout it just calls
// wait. Call it from the goroutine that runs the job's Dispatch.
func WithoutSlot(ctx context.Context, wait func() error) error {
	s, _ := ctx.Value(slotKey{}).(*fanoutSlot)
	if s == nil {
		return wait()
	}
	s.release()
	err := wait()
	if aerr := s.acquire(ctx); aerr != nil && err == nil {
		err = aerr
	}
	return err
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
		s.wake()
	}
}

// runJob dispatches one job, in a worktree named wtName when it has one,
// and always returns its result.
func (f *Fanout) runJob(ctx context.Context, i int, job Job, wts Worktrees, wtName string) JobResult {
	if ctx.Err() != nil {
		return synthesized(job, nil, "", true)
	}
	if f.OnEvent != nil {
		f.OnEvent(i, Event{Type: event.FanoutJobStarting, Time: time.Now().UTC()})
	}
	label := job.label()
	task := job.Task
	if on := f.OnEvent; on != nil || task.Observer != nil {
		var emitMu sync.Mutex
		orig := task.Observer
		task.Observer = func(e Event) {
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
	var wt *WorktreeInfo
	if job.Worktree && f.runs(task) {
		// (A blocked job runs nothing: it needs no worktree.)
		info, err := wts.Create(ctx, task.Workdir, wtName)
		if err != nil {
			return synthesized(job, nil, "worktree: "+err.Error(), ctx.Err() != nil)
		}
		wt = &info
		task.Workdir = info.Path
	}
	v, err := f.Dispatcher.Dispatch(ctx, task)
	r := JobResult{Verdict: v}
	switch {
	case err != nil && v.RunID != "":
		// The attempt ran, but a layer above it failed (a retry budget
		// that could not be kept): the verdict stands, with the error.
		r.StderrTail = text.LastRunes(v.StderrTail+"\npilot: "+err.Error(), stderrTailRunes)
	case err != nil:
		r = synthesized(job, nil, err.Error(), ctx.Err() != nil)
	}
	r.Job, r.TaskFile = label, job.Task.TaskFile
	if ctx.Err() != nil && r.FailureClass == FailCancelled {
		r.Interrupted = true
	}
	if wt != nil {
		// The worktree's fate is decided even when ctx is done.
		wt.Job, wt.TaskFile = job.describe(), job.Task.TaskFile
		info, err := wts.Finish(context.WithoutCancel(ctx), *wt, r.RunID)
		if err != nil {
			info = *wt
			info.Kept = true
			r.StderrTail = text.LastRunes(r.StderrTail+"\npilot: worktree: "+err.Error(), stderrTailRunes)
		}
		r.Worktree = &info
	}
	return r
}

// worktreeNames names the worktrees of the jobs with Worktree set, after
// the job (its Name, else its task file's base name without extension,
// else its provider) and the fanout's id, so that a branch says whose work
// it holds: pilot/fix-login-1a2b3c4d. A name a job before it took gets the
// job's number too: pilot/fix-login-2-1a2b3c4d.
func worktreeNames(jobs []Job, id string) []string {
	names := make([]string, len(jobs))
	used := map[string]bool{}
	for i, j := range jobs {
		if !j.Worktree {
			continue
		}
		base := j.Name
		if base == "" && j.Task.TaskFile != "" {
			base = filepath.Base(j.Task.TaskFile)
			base = strings.TrimSuffix(base, filepath.Ext(base))
		}
		if base == "" {
			base = j.Task.Provider
		}
		base = branchSafe(base)
		name := base + "-" + id
		if used[name] {
			name = fmt.Sprintf("%s-%d-%s", base, i+1, id)
		}
		used[name] = true
		names[i] = name
	}
	return names
}

// branchSafe makes s a short start of a worktree name: ASCII letters,
// digits, '-', '_' and '.', no "..", starting with a letter or a digit.
func branchSafe(s string) string {
	s = text.SafeName(s, '-')
	for strings.Contains(s, "..") {
		s = strings.ReplaceAll(s, "..", ".")
	}
	s = strings.TrimLeft(s, "-_.")
	if len(s) > 48 {
		s = s[:48]
	}
	if s == "" {
		return "job"
	}
	return s
}

// runs reports whether the Dispatcher would start anything for t (see
// Fanout).
func (f *Fanout) runs(t Task) bool {
	if r, ok := capability[interface{ Runs(Task) bool }](f.Dispatcher); ok {
		return r.Runs(t)
	}
	return true
}

// capability is the first dispatcher of d's layers that is a T: d itself,
// else what its Unwrap() TaskDispatcher method returns, and so on down.
func capability[T any](d TaskDispatcher) (T, bool) {
	for d != nil {
		if c, ok := d.(T); ok {
			return c, true
		}
		u, ok := d.(interface{ Unwrap() TaskDispatcher })
		if !ok {
			break
		}
		d = u.Unwrap()
	}
	var zero T
	return zero, false
}

// synthesized is the result of a job that produced no verdict of its own.
func synthesized(job Job, exitCode *int, stderrTail string, interrupted bool) JobResult {
	v := Verdict{
		Type:       event.Verdict,
		Job:        job.label(),
		Provider:   job.Task.Provider,
		Mode:       job.Task.Mode,
		Label:      job.Task.Label,
		TaskFile:   job.Task.TaskFile,
		Verdict:    Failed,
		ExitCode:   exitCode,
		StderrTail: text.LastRunes(stderrTail, stderrTailRunes),
	}
	v.FailureClass = FailGeneric
	v.FailureSource = "pilot"
	switch {
	case interrupted:
		v.FailureClass = FailCancelled
	case v.StderrTail != "":
		// Pilot's own failure (a worktree, a run directory): its error is
		// the evidence.
		v.FailureClass = FailPilot
		v.EvidenceSource, v.EvidenceExcerpt = "pilot", v.StderrTail
	}
	return JobResult{Verdict: v, Synthesized: true, Interrupted: interrupted}
}

// ErrSharedWorkdir is the Fanout guard error of two code jobs in one
// workdir, matched with errors.Is.
var ErrSharedWorkdir = errors.New("multiple code jobs share one workdir; give each its own worktree (Job.Worktree)")

// sharedWorkdir refuses two code jobs that would write in one workdir
// itself (a job in a worktree of it writes elsewhere), naming them: the
// pair whose first job comes first. code holds each workdir's code jobs.
func sharedWorkdir(jobs []Job, code map[string][]int) error {
	first, second := -1, -1
	for _, idx := range code {
		var in []int
		for _, i := range idx {
			if !jobs[i].Worktree {
				in = append(in, i)
			}
		}
		if len(in) >= 2 && (first < 0 || in[0] < first) {
			first, second = in[0], in[1]
		}
	}
	if first < 0 {
		return nil
	}
	name := func(i int) string { return fmt.Sprintf("%d (%s)", i+1, jobs[i].label()) }
	return fmt.Errorf("jobs %s and %s both write in %s: %w", name(first), name(second), jobs[first].Task.Workdir, ErrSharedWorkdir)
}

// errResumeInFanout refuses a resume job: a fanout runs fresh work.
var errResumeInFanout = errors.New("resume is not supported in fanout")

// errNoWorktrees refuses a Worktree job of a Fanout without Worktrees.
var errNoWorktrees = errors.New("the job asks for a worktree and Fanout.Worktrees is nil (the worktrees package's New makes git worktrees)")

// jobError is the error of a job the fanout refused before anything ran:
// "job N (label): err", wrapping err.
func jobError(i int, j Job, err error) error {
	return fmt.Errorf("job %d (%s): %w", i+1, j.label(), err)
}

// warnUncommitted warns, when wts can tell, that the repository holding
// dir has uncommitted changes its worktree jobs will not see.
func (f *Fanout) warnUncommitted(ctx context.Context, wts Worktrees, dir string) {
	u, ok := wts.(uncommittedCounter)
	if !ok || f.OnEvent == nil {
		return
	}
	if n, err := u.Uncommitted(ctx, dir); err == nil && n > 0 {
		f.OnEvent(-1, Event{Type: event.FanoutWarning, Time: time.Now().UTC(),
			Message: fmt.Sprintf("note: worktrees start from HEAD: %d file(s) with uncommitted changes in %s are not in them (commit them first for the jobs to see them)", n, dir)})
	}
}

// guard checks every job before anything is spawned.
func (f *Fanout) guard(ctx context.Context, jobs []Job, wts Worktrees) error {
	for i, j := range jobs {
		if j.Task.Mode == ModeResume {
			return jobError(i, j, errResumeInFanout)
		}
	}
	checker, _ := capability[interface {
		Check(context.Context, Task) error
	}](f.Dispatcher)
	// Every job's provider, mode and files first, then the credentials
	// (pilot-workers' order): a job's Check reaches its credential only
	// once the job itself is valid.
	var credErr error
	for i, j := range jobs {
		if checker == nil {
			break
		}
		if err := checker.Check(ctx, j.Task); err != nil {
			if errors.As(err, new(*CredentialError)) {
				if credErr == nil {
					credErr = err // it names the provider and the fix
				}
				continue
			}
			return jobError(i, j, err)
		}
	}
	if credErr != nil {
		return credErr
	}
	code := map[string][]int{}
	test := map[string]int{}
	checked := map[string]bool{}
	for i, j := range jobs {
		wd := workdirKey(j.Task.Workdir)
		if j.Worktree && wts == nil {
			return jobError(i, j, errNoWorktrees)
		}
		if j.Worktree && !checked[wd] {
			if err := wts.CheckRepo(ctx, j.Task.Workdir); err != nil {
				return jobError(i, j, err)
			}
			checked[wd] = true
			f.warnUncommitted(ctx, wts, j.Task.Workdir)
		}
		switch j.Task.Mode {
		case ModeCode:
			code[wd] = append(code[wd], i)
		case ModeTest:
			test[wd]++
		}
	}
	if err := sharedWorkdir(jobs, code); err != nil {
		return err
	}
	for wd, n := range test {
		if n >= 2 && f.OnEvent != nil {
			f.OnEvent(-1, Event{Type: event.FanoutWarning, Time: time.Now().UTC(),
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

// skipped is the result of a Fanout job that never started for the
// budget: why.
func skipped(job Job, why string) JobResult {
	r := synthesized(job, nil, why, false)
	r.FailureClass = FailBudget
	r.Skipped = "budget"
	return r
}
