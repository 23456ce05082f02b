package schedule

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

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/internal/gate"
	"github.com/pilotworkers/pilot/internal/membudget"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/size"
)

// Status is how a job of a graph ended (in the CLI's JSON, "status").
type Status string

// The statuses of a job when Run returns.
const (
	// StatusComplete: the job's dispatch succeeded.
	StatusComplete Status = "complete"
	// StatusFailed: it ran and failed (or never ran because ctx ended).
	StatusFailed Status = "failed"
	// StatusBlocked: it is held (Job.Hold), its retry budget ran out (its
	// dispatch sent a retry.EventBlocked event), or its provider's quota
	// is used up; BlockedReason says which.
	StatusBlocked Status = "blocked"
	// StatusWaiting: it never started because a job it depends on did not
	// complete; WaitingOn names those jobs.
	StatusWaiting Status = "waiting"
	// StatusExternalActive: another live pilot sharing the Store owns
	// the job, so this one did not start it; BlockedReason says who. The
	// group is not over.
	StatusExternalActive Status = "external-active"
	// StatusSkipped: it never started because the graph's finished jobs
	// had spent Scheduler.MaxCostUSD; BlockedReason says how much.
	StatusSkipped Status = "skipped"
)

// A Result is one job's outcome.
type Result struct {
	ID            string
	Status        Status
	BlockedReason string
	WaitingOn     []string
	// Verdict is the job's last dispatch's verdict; zero when it never
	// ran. Gated counts the times the job waited for its provider's rate
	// limit to reset and resumed its session.
	Verdict pilot.Verdict
	Gated   int
	// Interrupted is set for a job that never started because ctx ended;
	// its Verdict is made up (cancelled).
	Interrupted bool
	// Worktree is a worktree job's worktree as its last dispatch left it
	// (Kept when it left work on its branch); nil for other jobs and for
	// one that never got one.
	Worktree *pilot.WorktreeInfo
	// Integration is what Scheduler.Integrate made of the job's branch;
	// nil when there was none to merge.
	Integration *Integration
}

// Integration is what became of a complete job's branch under
// Scheduler.Integrate.
type Integration struct {
	// Branch is the integration branch; Merged is set when the job's work
	// is on it now.
	Branch string
	Merged bool
	// Conflict lists the paths that kept the job's branch out (the merge
	// needs a person; the branch is kept as it is), and Error says why it
	// was not merged otherwise.
	Conflict []string
	Error    string
}

// The kinds of Event.
const (
	EventSelected = "schedule.selected" // the job starts now
	EventDeferred = "schedule.deferred" // a ready job waits: Reason, and Conflict when a running job's write set overlaps, or ForMemory
	EventGated    = "schedule.gated"    // the job's provider is rate limited until Until: the job waits, holding no slot
	EventBlocked  = "schedule.blocked"  // the job is blocked: Reason
	EventDone     = "schedule.done"     // the job ended: Reason is its status
	EventDispatch = "schedule.dispatch" // a dispatch event of the job: Dispatch
	// EventSalvaged: the job, taken over from a pilot that died while it
	// ran, starts from the work that one left in its worktree, now
	// committed on its branch (or, Reason says, could not).
	EventSalvaged = "schedule.salvaged"
	// EventIntegrated: the job's branch was merged into Scheduler.Integrate,
	// or was not (Reason says why).
	EventIntegrated = "schedule.integrated"
)

// An Event is one decision of the scheduler, or one dispatch event of a
// job.
type Event struct {
	Type     string
	Job      string
	Reason   string
	Conflict string
	Provider string
	Until    time.Time
	Dispatch *pilot.Event
	// ForMemory is set on a deferred event of a job that waits for
	// memory (Scheduler.MemoryBudget).
	ForMemory bool
}

// A Scheduler runs graphs of jobs. Its fields are configuration; Dispatcher
// is required. It is safe for concurrent use and never changed by Run.
type Scheduler struct {
	// Dispatcher runs each job: a *pilot.Dispatcher, a retry.Dispatcher
	// over one, or a fake.
	Dispatcher pilot.TaskDispatcher
	// MaxParallel bounds how many jobs run at once; zero means no bound
	// (every ready job starts).
	MaxParallel int
	// Estimate, when set, is a job's expected duration when its own
	// Estimate is zero (from the run history of the same job, say; zero
	// for unknown). See Job.Estimate.
	Estimate func(Job) time.Duration
	// MemoryBudget bounds the resident memory of the running jobs' trees,
	// as Fanout.MemoryBudget does: a ready job starts only when it fits,
	// or when no job runs; until then it, and the ready jobs after it,
	// wait (deferred, ForMemory). Zero means no budget.
	MemoryBudget size.Bytes
	// MaxGated bounds how often one job waits for its provider's rate
	// limit before its rate limit counts as a failure; zero means 10.
	MaxGated int
	// OnEvent, when set, receives every decision and every dispatch event
	// of every job, never concurrently.
	OnEvent func(Event)
	// Store, when set, is shared with other pilots running the same
	// graph: a job another live pilot owns is not started (it ends
	// external-active), and jobs an earlier run completed are not run
	// again.
	Store *Store
	// Worktrees makes the worktrees of the jobs that set Job.Worktree and
	// merges their work; Run refuses such a job without it.
	// worktrees.New's value is one.
	Worktrees Worktrees
	// Integrate, when set, names a branch of the workdir's repository into
	// which, as the graph finishes, the branch of every complete worktree
	// job that left work is merged, in graph order: a merge queue. It is
	// created at the graph's base commit when missing, moved only by a
	// compare-and-swap, never checked out, and never left mid-merge: a job
	// whose work conflicts is left out (Result.Integration says why) and
	// its branch kept. Run refuses, before anything runs, a branch that is
	// checked out anywhere, is no valid name, or does not merge with the
	// base (the base is merged into an existing one first).
	Integrate string
	// MaxCostUSD, when set, bounds what the graph spends: once its
	// finished jobs' cost (their verdicts' usage) reaches it, no further
	// job starts; those end skipped, and what depends on them waits.
	// Running jobs finish. A job whose CLI reports no cost counts nothing.
	MaxCostUSD float64
	// Now and After are the clock (tests inject their own); nil means
	// time.Now and time.After.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
}

// resumePrompt is the prompt of a job that continues its session after its
// provider's rate limit reset.
const resumePrompt = "Continue this session and complete the current task."

// job is Run's state of one job.
type job struct {
	Job
	ws Writes // the normalized write set

	deps []int

	state    int // one of the st* constants
	res      Result
	deferred string // the reason of the last deferred event, to say it once

	def     string              // its definition, as the Store records it
	changed bool                // the Store's completion was of another definition
	salvage string              // the worktree a dead owner's run of the job left (Store)
	active  *pilot.WorktreeInfo // its worktree while it runs, and while it is gated
	hold    *membudget.Hold     // its share of the memory budget while it runs
}

const (
	stPending = iota
	stRunning
	stDone
)

type finish struct {
	i   int
	v   pilot.Verdict
	err error
	// blocked is the reason of the dispatch's retry.EventBlocked event, or
	// why its worktree could not start from its dependencies' work.
	blocked string
	// wt is the worktree it ran in.
	wt *pilot.WorktreeInfo
}

// Run runs g's jobs and returns their results in graph order. An error means
// g is not valid (a *GraphError) and nothing ran. Run returns once every job
// has a result and no dispatch it started is still running; when ctx ends,
// running jobs are ended by their dispatcher and jobs not yet started fail
// as interrupted.
func (s *Scheduler) Run(ctx context.Context, g Graph) ([]Result, error) {
	if s.Dispatcher == nil {
		return nil, errors.New("schedule: Scheduler.Dispatcher is nil")
	}
	if err := g.Check(); err != nil {
		return nil, err
	}
	r := &runState{s: s, now: s.Now, after: s.After}
	r.gates = gate.New(func(provider string) int {
		return pilot.LimitsOf(s.Dispatcher, pilot.Task{Provider: provider}).MaxParallel
	}, nil)
	if r.now == nil {
		r.now = time.Now
	}
	if r.after == nil {
		r.after = time.After
	}
	r.maxGated = s.MaxGated
	if r.maxGated <= 0 {
		r.maxGated = 10
	}
	r.full = fmt.Sprintf("all %d slots are running", s.MaxParallel)
	r.mem = s.memory()
	r.init(g)
	if err := r.prepareWorktrees(ctx, g); err != nil {
		return nil, err
	}
	return r.run(ctx)
}

type runState struct {
	s        *Scheduler
	now      func() time.Time
	after    func(time.Duration) <-chan time.Time
	maxGated int

	jobs    []*job
	gates   *gate.Set // the providers' gates: slots, rate limits, quotas
	writers Writers   // the running jobs' write sets
	running int
	ready   *Ready // pending jobs whose dependencies are complete
	full    string // the reason a job waits for a slot
	fresh   []int  // jobs that became ready since the last pass
	mem     *memoryState

	emitMu sync.Mutex
	done   chan finish

	spent   float64 // the finished jobs' cost, for MaxCostUSD
	workdir string  // the graph's
	base    string  // the graph's base commit, for worktree jobs
	token   string  // unique to this run, in its worktrees' names
	// claimToken names this Run in the store's records: two Runs of one
	// process never both take a job.
	claimToken string
}

func (r *runState) init(g Graph) {
	workdir := g.Workdir
	if workdir == "" {
		workdir = "."
	}
	r.workdir = workdir
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	r.claimToken = hex.EncodeToString(tok[:])
	norm, nerr := newNormalizer(workdir)
	index := map[string]int{}
	for i, j := range g.Jobs {
		index[j.ID] = i
		jb := &job{Job: j, def: definition(j)}
		jb.res.ID = j.ID
		switch {
		case len(j.WriteSet) == 0, j.Worktree:
		case nerr != nil:
			jb.ws = Writes{Unknown: true, Why: nerr.Error()}
		default:
			jb.ws.Files, _, jb.ws.Why = norm.writeSet(j.WriteSet)
			jb.ws.Unknown = jb.ws.Why != ""
		}
		r.jobs = append(r.jobs, jb)
	}
	deps := make([][]int, len(r.jobs))
	for i, jb := range r.jobs {
		for _, d := range jb.Deps {
			jb.deps = append(jb.deps, index[d])
		}
		deps[i] = jb.deps
	}
	est := make([]time.Duration, len(r.jobs))
	for i, jb := range r.jobs {
		est[i] = jb.Estimate
		if est[i] <= 0 && r.s.Estimate != nil {
			est[i] = r.s.Estimate(jb.Job)
		}
	}
	ws := make([]Writes, len(r.jobs))
	for i, jb := range r.jobs {
		ws[i] = jb.ws
	}
	r.ready = NewReadyPlanned(deps, est, ws, r.s.MaxParallel)
	r.fresh = append(r.fresh, r.ready.Jobs()...)
	r.done = make(chan finish)
}

func (r *runState) emit(e Event) {
	if r.s.OnEvent == nil {
		return
	}
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	r.s.OnEvent(e)
}

func (r *runState) run(ctx context.Context) ([]Result, error) {
	if st := r.s.Store; st != nil {
		done, err := st.prepare(r.now())
		if err != nil {
			return nil, err
		}
		defer r.renewLeases(st)()
		for i, jb := range r.jobs {
			rec, ok := done[jb.ID]
			if !ok || jb.Hold != "" || jb.Rerun {
				continue
			}
			if rec.Def != "" && rec.Def != jb.def {
				jb.changed = true // it runs again
				continue
			}
			r.completedElsewhere(i, rec)
		}
	}
	for i, jb := range r.jobs {
		if jb.Hold != "" {
			r.block(i, jb.Hold) // a stop the caller reports: only its dependents wait
		}
	}
	ctxDone := ctx.Done()
	for {
		var wake <-chan time.Time
		if next := r.pass(ctx); !next.IsZero() {
			wake = r.after(next.Sub(r.now()))
		}
		if r.running == 0 && wake == nil {
			break
		}
		select {
		case f := <-r.done:
			r.finish(f)
		case <-wake:
		case <-r.mem.wake():
		case <-ctxDone:
			ctxDone = nil // the running dispatches end themselves
		}
	}
	if ctx.Err() != nil {
		r.interrupt()
	}
	r.integrate(ctx)
	return r.results(), nil
}

// pass starts every ready job it can and returns the earliest time a
// provider gate opens for a job that waits on it (zero for none).
func (r *runState) pass(ctx context.Context) time.Time {
	if ctx.Err() != nil {
		return time.Time{}
	}
	now := r.now()
	var wake time.Time
	r.mem.pass()
	for _, i := range r.ready.Jobs() {
		jb := r.jobs[i]
		if jb.state != stPending {
			r.ready.Take(i)
			continue
		}
		if r.s.MaxParallel > 0 && r.running >= r.s.MaxParallel {
			// No slot: the rest wait as they are. Only the jobs that
			// became ready since the last pass are told so.
			for _, k := range r.fresh {
				if fj := r.jobs[k]; fj.state == stPending && fj.deferred == "" {
					r.defer1(fj, r.full, "")
				}
			}
			break
		}
		st := r.gates.Check(jb.Task.Provider, now)
		if st.Closed != "" {
			r.ready.Take(i)
			r.block(i, st.Closed)
			continue
		}
		if !st.Until.IsZero() {
			r.gated(jb, st.Until)
			if wake.IsZero() || st.Until.Before(wake) {
				wake = st.Until
			}
			continue
		}
		if st.Full > 0 {
			// Its provider's slots are all running: it waits for one,
			// holding none of the graph's; other providers' jobs go on.
			r.defer1(jb, st.Waiting(jb.Task.Provider), "")
			continue
		}
		if c, why := r.conflict(jb); why != "" {
			r.defer1(jb, why, c)
			continue
		}
		if m := r.s.MaxCostUSD; m > 0 && r.spent >= m {
			r.ready.Take(i)
			r.skip(i, fmt.Sprintf("budget: the graph's finished jobs spent $%.4f of its MaxCostUSD $%.4f; no further job starts", r.spent, m))
			continue
		}
		hold, why := r.admit(jb)
		if why != "" {
			// It waits for memory, and the ready jobs after it wait
			// behind it.
			r.deferForMemory(jb, why)
			break
		}
		jb.hold = hold
		r.ready.Take(i)
		if !r.start(ctx, i) {
			// Another pilot runs a job whose write set overlaps: ask
			// again after a while (no event of this run says when).
			r.ready.Again(i)
			if next := now.Add(foreignPoll); wake.IsZero() || next.Before(wake) {
				wake = next
			}
		}
	}
	r.fresh = r.fresh[:0]
	return wake
}

// renewLeases renews this run's records in st every leaseRenew, for the
// pilots that cannot see this process's pids (Store.leased), until the
// function it returns is called.
func (r *runState) renewLeases(st *Store) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(leaseRenew)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = st.renew(r.claimToken, r.now()) // best effort: a missed renewal only shortens the lease
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// foreignPoll is how often a job kept waiting by another pilot's running
// job asks the store again.
const foreignPoll = 2 * time.Second

// gated says, once per reset time, that jb waits for its provider's gate.
func (r *runState) gated(jb *job, until time.Time) {
	reason := "provider " + jb.Task.Provider + " is rate limited until " + until.UTC().Format(time.RFC3339)
	if jb.deferred == reason {
		return
	}
	jb.deferred = reason
	r.emit(Event{Type: EventGated, Job: jb.ID, Reason: reason, Provider: jb.Task.Provider, Until: until})
}

func (r *runState) defer1(jb *job, reason, conflict string) {
	if jb.deferred == reason {
		return
	}
	jb.deferred = reason
	r.emit(Event{Type: EventDeferred, Job: jb.ID, Reason: reason, Conflict: conflict, Provider: jb.Task.Provider})
}

// conflict names a running job whose write set keeps jb from starting, and
// why; "" when none does.
func (r *runState) conflict(jb *job) (string, string) {
	k, why := r.writers.Conflict(jb.ws, func(k int) string { return r.jobs[k].ID })
	if k < 0 {
		return "", ""
	}
	return r.jobs[k].ID, why
}

// start starts job i, unless the store says otherwise; it returns false
// when the job waits, ready again, for another pilot's running job whose
// write set overlaps its own.
func (r *runState) start(ctx context.Context, i int) bool {
	jb := r.jobs[i]
	if st := r.s.Store; st != nil {
		c, err := st.claim(jb.ID, r.claimToken, jb.def, jb.Rerun, jb.ws, r.now())
		jb.salvage = c.salvage
		if !c.claimed {
			jb.hold.Release()
			jb.hold = nil
		}
		switch {
		case err != nil:
			r.block(i, "the state store refused the job: "+err.Error())
			return true
		case c.done != nil:
			// Another pilot completed it since this run read the store.
			r.completedElsewhere(i, *c.done)
			return true
		case c.wait != "":
			r.defer1(jb, c.wait, "")
			return false
		case !c.claimed:
			jb.res.BlockedReason = c.holder
			r.emit(Event{Type: EventBlocked, Job: jb.ID, Reason: c.holder, Provider: jb.Task.Provider})
			r.end(i, StatusExternalActive)
			return true
		}
	}
	jb.state = stRunning
	jb.deferred = ""
	r.running++
	r.gates.Take(jb.Task.Provider)
	r.writers.Start(i, jb.ws)
	selected := Event{Type: EventSelected, Job: jb.ID, Provider: jb.Task.Provider}
	if jb.changed {
		selected.Reason = "its definition changed since it completed"
	}
	r.emit(selected)
	t := jb.Task
	orig := t.Observer
	id := jb.ID
	store := r.s.Store
	var mu sync.Mutex
	blocked := ""
	hold := jb.hold
	t.Observer = func(e pilot.Event) {
		if orig != nil {
			orig(e)
		}
		followMemory(hold, e)
		if e.Type == retry.EventBlocked {
			mu.Lock()
			blocked = e.Message
			if info, ok := e.Retry.(*retry.Info); ok && info.Reason != "" {
				blocked = info.Reason
			}
			mu.Unlock()
		}
		if store != nil && e.Started != nil {
			// Best effort: the claim already holds the job; this tells
			// other pilots how to see that its worker lives.
			_ = store.started(id, r.claimToken, e.Started.Pid, filepath.Join(e.Started.RunDir, "stream.log"), r.now())
		}
		r.emit(Event{Type: EventDispatch, Job: id, Dispatch: &e})
	}
	var branches []string
	if jb.Worktree && jb.active == nil {
		branches = r.depBranches(i)
	}
	active, salvage := jb.active, jb.salvage
	jb.salvage = ""
	go func() {
		returned := false
		defer func() {
			if !returned { // runtime.Goexit (a fake's t.FailNow), or a panic on its way up
				r.done <- finish{i: i, err: errDispatchExited, wt: active}
			}
		}()
		if jb.Worktree {
			fresh := active == nil
			if fresh && salvage != "" {
				branches = r.salvage(ctx, jb, salvage, branches)
			}
			wt, conflict, err := r.enterWorktree(ctx, jb.ID, &t, active, branches)
			if wt == nil {
				returned = true
				r.done <- finish{i: i, err: err, blocked: conflict}
				return
			}
			active = wt
			if fresh && store != nil {
				// Best effort, as started, and before the worker starts:
				// a pilot that takes the job over after this one dies
				// finds its worktree by it.
				_ = store.entered(id, r.claimToken, wt.Name, r.now())
			}
		}
		v, err := r.s.Dispatcher.Dispatch(ctx, t)
		returned = true
		mu.Lock()
		reason := blocked
		mu.Unlock()
		r.done <- finish{i, v, err, reason, active}
	}()
	return true
}

// errDispatchExited ends a job whose Dispatch never returned: its goroutine
// exited (runtime.Goexit), so Run does not wait for it forever.
var errDispatchExited = errors.New("the job's Dispatch did not return: its goroutine exited (runtime.Goexit, as t.FailNow does in a fake dispatcher)")

// finish takes a dispatch's end: the job is complete, failed, blocked, or
// waits for its provider's rate limit and resumes its session then.
func (r *runState) finish(f finish) {
	jb := r.jobs[f.i]
	jb.hold.Release()
	jb.hold = nil
	r.running--
	r.gates.Done(jb.Task.Provider)
	r.writers.Finish(f.i, jb.ws)
	v := f.v
	jb.res.Verdict = v
	if u := v.Usage; u != nil && u.CostUSD != nil {
		r.spent += *u.CostUSD
	}
	until, gated := r.resetOf(jb, v)
	if f.err != nil || f.blocked != "" {
		gated = false
	}
	jb.active = f.wt
	if f.wt != nil && !gated { // a gated job resumes in its worktree
		if err := r.leaveWorktree(jb, v.RunID); err != nil && f.err == nil {
			f.err = err
		}
	}
	if st := r.s.Store; st != nil {
		if !gated { // a gated job stays claimed until it resumes
			complete := f.err == nil && v.Verdict.Success()
			branch := ""
			if w := jb.res.Worktree; complete && w != nil && w.Kept {
				branch = w.Branch
			}
			if err := st.release(jb.ID, r.claimToken, complete, jb.def, branch, r.now()); err != nil && complete {
				v.StderrTail += "\npilot: recording completion: " + err.Error()
				jb.res.Verdict = v
			}
		}
	}
	switch {
	case f.err != nil:
		jb.res.Verdict = pilotFailure(jb, v, f.err)
		r.end(f.i, StatusFailed)
	case v.Verdict.Success():
		r.end(f.i, StatusComplete)
		r.completed(f.i)
	case f.blocked != "":
		r.block(f.i, f.blocked)
	case gated:
		until = r.gates.Hold(jb.Task.Provider, until)
		jb.res.Gated++
		jb.state = stPending
		r.gated(jb, until)
		if v.Resume != "" {
			// The limited job resumes its own session at the reset.
			jb.Task.Resume = v.Resume
			jb.Task.Prompt, jb.Task.TaskFile = resumePrompt, ""
		}
		r.ready.Again(f.i)
		r.fresh = append(r.fresh, f.i)
	case v.FailureClass == pilot.FailProviderQuota:
		// Its provider is closed for the rest of the graph; the job
		// itself ends with its own evidence, whoever closed it first.
		q := gate.Failure{Quota: true, Job: jb.ID, Evidence: v.EvidenceExcerpt}
		r.gates.Learn(jb.Task.Provider, q, r.now())
		r.block(f.i, q.Closes(jb.Task.Provider))
	default:
		r.end(f.i, StatusFailed)
	}
}

// pilotFailure is the verdict of a job pilot itself could not run, or see
// to the end (err): v as far as it got, failed in class pilot-error with
// err as the evidence.
func pilotFailure(jb *job, v pilot.Verdict, err error) pilot.Verdict {
	msg := err.Error()
	if !strings.HasPrefix(msg, "pilot: ") {
		msg = "pilot: " + msg // pilot's own errors say so already
	}
	if v.Type == "" {
		v = pilot.Verdict{Type: event.Verdict, Provider: jb.Task.Provider, Mode: jb.Task.Mode, Label: jb.Task.Label}
	}
	v.Verdict = pilot.Failed
	v.Failure = pilot.Failure{FailureClass: pilot.FailPilot, FailureSource: "pilot",
		EvidenceSource: "pilot", EvidenceExcerpt: msg}
	v.StderrTail = msg
	return v
}

// completedElsewhere ends job i complete as the store's record rec says
// an earlier run, or another pilot, completed it: its dependents are
// ready, and a worktree job's branch is theirs to build on.
func (r *runState) completedElsewhere(i int, rec ownerRecord) {
	if rec.Branch != "" {
		r.jobs[i].res.Worktree = &pilot.WorktreeInfo{Branch: rec.Branch, Kept: true}
	}
	r.end(i, StatusComplete)
	r.completed(i)
}

// completed makes the dependents of job i whose dependencies are now all
// complete ready.
func (r *runState) completed(i int) {
	for _, d := range r.ready.Complete(i) {
		if r.jobs[d].state == stPending {
			r.fresh = append(r.fresh, d)
		}
	}
}

// resetOf says whether job jb's failure v is a rate or usage limit with a
// known reset, and when: the retry-after its provider asked for, or the
// clock time its CLI named ("resets 3pm", "try again at 3:04 PM"). A job
// that waited MaxGated times already is not gated again.
func (r *runState) resetOf(jb *job, v pilot.Verdict) (time.Time, bool) {
	if jb.res.Gated >= r.maxGated {
		return time.Time{}, false
	}
	return limitOf(v).ResetAt(r.now())
}

// limitOf is what verdict v says of its provider's gate.
func limitOf(v pilot.Verdict) gate.Failure {
	return gate.Failure{
		RateLimit:  v.FailureClass == pilot.FailProviderRateLimit,
		Quota:      v.FailureClass == pilot.FailProviderQuota,
		RetryAfter: time.Duration(v.RetryAfterMS) * time.Millisecond,
		Text:       v.EvidenceExcerpt + "\n" + v.StderrTail,
	}
}

func (r *runState) block(i int, reason string) {
	jb := r.jobs[i]
	jb.res.BlockedReason = reason
	r.emit(Event{Type: EventBlocked, Job: jb.ID, Reason: reason, Provider: jb.Task.Provider})
	r.end(i, StatusBlocked)
}

// skip ends job i, which never started, as skipped for reason.
func (r *runState) skip(i int, reason string) {
	jb := r.jobs[i]
	jb.res.BlockedReason = reason
	r.emit(Event{Type: EventBlocked, Job: jb.ID, Reason: reason, Provider: jb.Task.Provider})
	r.end(i, StatusSkipped)
}

func (r *runState) end(i int, st Status) {
	jb := r.jobs[i]
	jb.state = stDone
	jb.res.Status = st
	r.emit(Event{Type: EventDone, Job: jb.ID, Reason: string(st), Provider: jb.Task.Provider})
}

// interrupt fails every job not yet started, after ctx ended.
func (r *runState) interrupt() {
	for i, jb := range r.jobs {
		if jb.state != stPending || r.ready.Pending(i) > 0 {
			continue
		}
		jb.res.Verdict = pilot.Verdict{Type: event.Verdict, Provider: jb.Task.Provider, Mode: jb.Task.Mode,
			Label: jb.Task.Label, Verdict: pilot.Failed}
		jb.res.Verdict.FailureClass = pilot.FailCancelled
		jb.res.Interrupted = true
		r.end(i, StatusFailed)
	}
}

// results is every job's result; a job that never started waits on its
// dependencies that did not complete.
func (r *runState) results() []Result {
	out := make([]Result, len(r.jobs))
	for i, jb := range r.jobs {
		if jb.state == stPending {
			jb.res.Status = StatusWaiting
			for _, d := range jb.deps {
				if r.jobs[d].res.Status != StatusComplete {
					jb.res.WaitingOn = append(jb.res.WaitingOn, r.jobs[d].ID)
				}
			}
		}
		out[i] = jb.res
	}
	return out
}

// GroupStatus is what the results of one run say of the whole graph:
// "complete" when every job is; "non-terminal" when another live pilot
// owns a job (the group goes on there); else "blocked".
func GroupStatus(rs []Result) string {
	status := "complete"
	for _, r := range rs {
		switch {
		case r.Status == StatusExternalActive:
			return "non-terminal"
		case r.Status != StatusComplete:
			status = "blocked"
		}
	}
	return status
}

// String describes a result in one line, for logs.
func (r Result) String() string {
	var b strings.Builder
	b.WriteString(r.ID + ": " + string(r.Status))
	if r.BlockedReason != "" {
		b.WriteString(" (" + r.BlockedReason + ")")
	}
	if len(r.WaitingOn) > 0 {
		b.WriteString(" on " + strings.Join(r.WaitingOn, ", "))
	}
	return b.String()
}
