package temporal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/retry"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
)

// ActivityName is the name RunJob is registered under.
const ActivityName = "pilot.RunJob"

// Error types (ApplicationError.Type) of RunJob's errors other than a
// failed verdict's, whose type is its failure class (or "empty").
const (
	// ErrTypeBadJob: the job or the Activities' configuration is invalid;
	// never retried.
	ErrTypeBadJob = "pilot-bad-job"
	// ErrTypePilot: pilot could not run the job (git, the run directory,
	// a missing credential); Details hold the Result.
	ErrTypePilot = "pilot-error"
	// ErrTypeFenced: a newer generation took the job over while this one
	// ran; its result does not count. Retried: the next attempt finds the
	// newer generation and attaches to it or takes its verdict.
	ErrTypeFenced = "pilot-fenced"
)

// A Job is one task for RunJob: what to dispatch, and the git repository
// whose worktree it runs in, where its fence and branch live.
type Job struct {
	// Name names the job: its fence ref, its branch and its worktree.
	// It is used once per repository: a job whose branch was published
	// is done, and running it again returns its verdict.
	Name string
	// Repo is the git repository: a path every worker that may run the
	// job reaches, or a git URL (ssh://, https://, git://, file://,
	// user@host:path), which each worker clones into its CacheDir; its
	// server must offer atomic pushes. Base is the commit the job's
	// worktree starts from, HEAD when empty.
	Repo string
	Base string
	// Capability routes the job to the workers that have it (a task
	// queue each; see Input.Queue); empty means the default queue.
	Capability string
	// Deps are the names of jobs that must succeed before this one
	// starts (RunJobs only).
	Deps []string
	// Merge names jobs of the same repository whose published branches
	// the job's work starts from: a generation that starts at Base (no
	// earlier generation's commits to go on from) starts at Base with
	// each of their branches merged in, in order, as pilot schedule's
	// worktree jobs do. A conflict fails the job (not retried), naming
	// the branch and the paths, and leaves nothing half merged. RunJobs
	// adds the job's Deps, in job order.
	Merge []string
	// Writes are the files the job may write, relative to the
	// repository (RunJobs only): no two jobs whose Writes overlap run at
	// once, on any machine. A directory (written with a trailing slash,
	// or "."), or a pattern, is an unknown write set: the job runs
	// beside no other job that writes. Empty: it keeps no job apart.
	Writes []string
	// Estimate is how long the job is expected to run (RunJobs only;
	// zero: unknown): of the jobs ready at once, the one with the longest
	// remaining path of estimates starts first, as pilot schedule's do
	// (schedule.NewReadyCriticalFirst).
	Estimate time.Duration

	// The pilot.Task the job dispatches, with the job's worktree as its
	// workdir.
	Provider    string
	Mode        pilot.Mode
	Prompt      string
	TaskFile    string
	Label       string
	Timeout     time.Duration
	IdleTimeout time.Duration
}

// task is j as a pilot task in worktree wt.
func (j Job) task(wt string, gen int) pilot.Task {
	label := j.Label
	if label == "" {
		label = j.Name
	}
	return pilot.Task{
		Provider: j.Provider, Mode: j.Mode, Prompt: j.Prompt, TaskFile: j.TaskFile,
		Workdir: wt, Timeout: j.Timeout, IdleTimeout: j.IdleTimeout, Label: label,
		Key:     j.Name,
		Lineage: pilot.Lineage{Key: j.Name, Attempt: gen},
	}
}

// check refuses a job that cannot run, saying what to fix.
func (j Job) check() error {
	if err := checkJobName(j.Name); err != nil {
		return err
	}
	if j.Repo == "" {
		return fmt.Errorf("temporal: job %s has no repository: set Job.Repo to the git repository its worktree, fence and branch live in", j.Name)
	}
	if !filepath.IsAbs(j.Repo) && !isRemote(j.Repo) {
		return fmt.Errorf("temporal: job %s: Job.Repo %q is relative: workers run elsewhere, give an absolute path or a git URL", j.Name, j.Repo)
	}
	if j.Provider == "" {
		return fmt.Errorf("temporal: job %s has no provider: set Job.Provider", j.Name)
	}
	return nil
}

// A Result is a job's final verdict, as RunJob returns it (and, on a
// failed verdict, as the details of its error).
type Result struct {
	Job     string     `json:"job"`
	Verdict JobVerdict `json:"verdict"`
	// Generation is the launch of the job that gave the verdict.
	Generation int `json:"generation,omitempty"`
	// Commit is the commit published on the job's branch
	// (BranchPrefix+Job) with a successful verdict.
	Commit string `json:"commit,omitempty"`
	// Attached is set when this attempt took the verdict of a run an
	// earlier attempt started.
	Attached bool `json:"attached,omitempty"`
	// Error is set when pilot itself failed (no verdict of the worker).
	Error string `json:"error,omitempty"`
}

// A JobVerdict is a job's verdict, with what the workflow adds to it: its
// JSON form is the verdict's, these fields after it.
type JobVerdict struct {
	pilot.Verdict
	// Synthesized marks a verdict the workflow made up for a job that has
	// none of its own; Interrupted one cut short; Blocked one whose
	// dependency did not succeed (BlockedReason says which).
	Synthesized   bool   `json:"synthesized,omitempty"`
	Interrupted   bool   `json:"interrupted,omitempty"`
	Blocked       bool   `json:"blocked,omitempty"`
	BlockedReason string `json:"blocked_reason,omitempty"`
}

// Progress is what RunJob's heartbeats carry, as long as the job's worker
// lives (or, attached, while the run it waits for holds the job).
type Progress struct {
	Job        string `json:"job"`
	Generation int    `json:"generation"`
	// Phase is "starting", "attached", "running" or the phase of the
	// worker's session; LastActivity the time of the dispatch's last
	// event.
	Phase        string    `json:"phase"`
	LastActivity time.Time `json:"last_activity"`
	RunID        string    `json:"run_id,omitempty"`
	// Inspection is pilot's latest stall inspection of a silent worker
	// (without its stream tail): what it saw and for how long. An
	// inspection stops nothing; the heartbeats go on while the worker
	// lives, and only pilot ending it ends them.
	Inspection *pilot.StallInspection `json:"inspection,omitempty"`
}

// Activities runs jobs as Temporal activities: RunJob, registered as
// ActivityName. Its exported fields are configuration; it is never
// changed by RunJob.
type Activities struct {
	// Dispatcher runs each job's task (a *pilot.Dispatcher, or a fake in
	// tests); required.
	Dispatcher pilot.TaskDispatcher
	// Policy decides, from a failed verdict's class, whether the job is
	// run again (Temporal retries it) and whether in the same session.
	// Its budgets and waits are not used: Temporal's retry policy bounds
	// the attempts.
	Policy retry.Policy
	// WorktreeDir holds the jobs' worktrees on this host, one folder per
	// repository (named by a hash of its git directory, as job names are
	// unique only within a repository), in it one per job, in that one
	// per generation: DIR/<repo>-<hash>/<job>/g<N>. Empty means
	// pilot-worktrees/<job>/g<N> in the repository's git directory.
	WorktreeDir string
	// CacheDir holds this host's clones of the jobs' remote repositories
	// (a Job.Repo that is a URL), one bare clone per URL; empty means
	// pilot-temporal in the user's cache directory.
	CacheDir string
	// Host names this machine in fences; empty means os.Hostname. Only a
	// run on the same host can be attached to.
	Host string
	// Heartbeat is the time between heartbeats; zero means a quarter of
	// the activity's heartbeat timeout, or 10 s without one. The same
	// ticks renew the generation's lease, which is four of them; pilot's
	// Dispatcher.Grace must be well under two, so that a worker ended for
	// a lease it cannot renew is gone before the lease is.
	Heartbeat time.Duration
}

// Register registers RunJob with w as ActivityName.
func (a *Activities) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.RunJob, activity.RegisterOptions{Name: ActivityName})
}

// inProcess holds the jobs this process runs (repo + job name), to tell a
// live owner in this very process from one whose attempt is gone.
var inProcess sync.Map

// RunJob runs one job on this worker and returns its Result.
//
// It reads the job's fence first. A job whose generation is done with a
// success, or with a failure pilot's Policy does not retry, gets that
// verdict again: nothing is launched. A generation still running holds
// the job while its lease is renewed: RunJob waits for its verdict
// (attached) instead of starting a second worker. On this host, an owner
// whose processes are all gone (pid, start time and boot id; its worker's
// too) is dead at once; an owner that lives but renews nothing (stopped)
// has its worker's group ended when its lease and a quarter more have
// passed. Of another host, an owner is taken over only when no renewal
// has come for its lease and a quarter more, on this host's clock from
// the last renewal seen. Then RunJob commits generation N+1 to the fence,
// and launches, in a worktree of the generation's own (see WorktreeDir)
// on its own work branch, started from the commits of the latest
// earlier generation that made a worktree; a worker that resumes a done generation's session goes on in
// that generation's worktree when it is on this host. (A generation that
// ended cancelled is taken over too: a live attempt seeing it means the
// cancellation was its attempt's loss, such as a worker cut off the
// server, whose SDK cancels the activity, not the workflow's.)
//
// While the worker runs, heartbeats come from a goroutine of their own,
// carrying Progress, through pilot's stall inspections; each tick renews
// the generation's lease by compare-and-swap. A generation that finds a
// newer one in its fence, or cannot renew for two heartbeat intervals
// (half its lease of four), ends its worker's tree. A successful
// verdict is published by creating the job's branch at the worktree's
// HEAD in the same ref transaction that closes the fence, so only the
// generation holding the fence publishes, and only once; the tree must
// be clean (the work committed) and its HEAD descend from the job's base
// (Job.Base resolved when the first generation launched), else the
// fence is closed with what is wrong and nothing is published.
//
// A failed verdict is returned as an error: a temporal.ApplicationError
// whose type is the failure class, not retryable when Policy does not
// retry the class (provider-auth, provider-quota, spawn-failed,
// cancelled, and classes pilot does not know), with the Result as its
// details (see ResultOf). Cancellation ends the worker's process tree;
// RunJob returns (a canceled error) only once the tree is gone.
func (a *Activities) RunJob(ctx context.Context, j Job) (Result, error) {
	if a.Dispatcher == nil {
		return Result{}, temporal.NewNonRetryableApplicationError("temporal: Activities has no Dispatcher: set Activities.Dispatcher (a *pilot.Dispatcher)", ErrTypeBadJob, nil)
	}
	if err := j.check(); err != nil {
		return Result{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeBadJob, nil)
	}
	if j.Base == "" {
		j.Base = "HEAD"
	}
	r := &jobRun{a: a, j: j, f: fence{repo: j.Repo, job: j.Name}}
	if isRemote(j.Repo) {
		dir := a.CacheDir
		if dir == "" {
			c, err := os.UserCacheDir()
			if err != nil {
				return Result{}, temporal.NewNonRetryableApplicationError("temporal: no cache directory for the clones of remote repositories: set Activities.CacheDir ("+err.Error()+")", ErrTypeBadJob, nil)
			}
			dir = filepath.Join(c, "pilot-temporal")
		}
		local, err := clone(ctx, dir, j.Repo)
		if err != nil {
			return r.pilotError(ctx, Result{Job: j.Name}, err)
		}
		r.f = fence{repo: local, job: j.Name, remote: j.Repo}
	}
	r.info = activity.GetInfo(ctx)
	r.host = a.Host
	if r.host == "" {
		r.host, _ = os.Hostname()
	}
	r.interval = a.Heartbeat
	if r.interval <= 0 {
		r.interval = 10 * time.Second
		if hb := r.info.HeartbeatTimeout; hb > 0 {
			r.interval = max(hb/4, 50*time.Millisecond)
		}
	}
	return r.run(ctx)
}

// A jobRun is one RunJob call.
type jobRun struct {
	a        *Activities
	j        Job
	f        fence
	info     activity.Info
	host     string
	interval time.Duration
}

func (r *jobRun) key() string { return r.j.Repo + "\x00" + r.j.Name }

func (r *jobRun) run(ctx context.Context) (Result, error) {
	attached := false
	for {
		oid, o, err := r.f.read(ctx)
		if err != nil {
			return r.pilotError(ctx, Result{Job: r.j.Name}, err)
		}
		switch {
		case o.State == stateDone && o.Error == "" && o.Verdict != nil && o.Verdict.FailureClass != pilot.FailCancelled:
			res := Result{Job: r.j.Name, Verdict: JobVerdict{Verdict: *o.Verdict}, Generation: o.Generation, Commit: o.Commit, Attached: attached}
			if o.Verdict.Verdict.Success() {
				if o.Commit != "" {
					if err := r.f.repairBranch(ctx, o.Commit); err != nil {
						return r.pilotError(ctx, res, err)
					}
				}
				return res, nil
			}
			if again, _ := r.a.Policy.Retries(o.Verdict.FailureClass); !again {
				return res, verdictError(res, r.a.Policy)
			}
			// A failure pilot's policy retries: this attempt is the retry.
		case o.State == stateRunning && (o.Host != r.host || r.ownerAlive(o)):
			// A generation runs, or may: wait for its verdict, or for its
			// lease to run out.
			attached = true
			expired, err := r.await(ctx, oid, o)
			if err != nil {
				return Result{Job: r.j.Name, Generation: o.Generation, Attached: true}, err
			}
			if expired == nil {
				continue // the fence moved on, or its owner is gone
			}
			// No renewal for the lease and its grace: the owner ended its
			// agent, or cannot; the job is this attempt's.
			oid, o = expired.oid, expired.own
		}
		res, err := r.launch(ctx, oid, o)
		if errors.Is(err, errRetake) {
			continue // another attempt took the fence first: look again
		}
		return res, err
	}
}

// errRetake: the fence moved before this attempt could take it.
var errRetake = errors.New("fence taken")

// ownerAlive reports whether the owner of a running generation is a live
// process of this host that is still at it, or its worker is still alive:
// the worker of a pilot killed by SIGKILL lives on until pilot's
// supervisor has ended its tree, and no second worker may start before.
func (r *jobRun) ownerAlive(o Owner) bool {
	if o.Host != r.host {
		return false
	}
	if o.Boot != "" && o.Boot != bootID() {
		return false // the host rebooted since: nothing of that boot lives
	}
	if o.AgentPid > 0 && alive(o.AgentPid, o.AgentStart) {
		return true
	}
	if len(runProcs(o.RunID)) > 0 {
		return true // a descendant of its worker (setsid'd, say) lives on
	}
	if o.Pid == os.Getpid() {
		_, ok := inProcess.Load(r.key())
		return ok
	}
	return alive(o.Pid, o.PidStart)
}

// runAlive reports whether a process of o's run lives on this host: its
// worker, or any process carrying its run id.
func (r *jobRun) runAlive(o Owner) bool {
	return (o.AgentPid > 0 && alive(o.AgentPid, o.AgentStart)) || len(runProcs(o.RunID)) > 0
}

// endRun sends SIGTERM to o's worker's group and to every process of its
// run.
func (r *jobRun) endRun(o Owner) {
	if o.AgentPid > 0 {
		terminateGroup(o.AgentPid)
	}
	for _, pid := range runProcs(o.RunID) {
		terminate(pid)
	}
}

// An expiry is the fence as it stood when its generation's lease ran out.
type expiry struct {
	oid string
	own Owner
}

// await waits, heartbeating, while the running generation at oid holds
// the job: until the fence moves on (a verdict, a newer generation), its
// owner on this host is gone, or no renewal of its lease has come for the
// lease and a quarter more, measured on this host's monotonic clock from
// the last renewal seen (an expiry, returned). A live owner of this host
// whose lease ran out (a stopped process) has its agent ended first.
// Cancelled, await ends the agent of an owner of this host (the job's
// attempt is this one now) and waits for the same; of another host it
// returns at once: that agent is its owner's to end.
func (r *jobRun) await(ctx context.Context, oid string, o Owner) (*expiry, error) {
	hb := newHeartbeater(Progress{Job: r.j.Name, Generation: o.Generation, Phase: "attached", RunID: o.RunID, LastActivity: time.Now()})
	stop := hb.start(ctx, r.interval, nil)
	defer stop()
	lease := o.lease(4 * r.interval)
	seen := time.Now()
	poll := time.NewTicker(max(min(r.interval, lease/8, time.Second), time.Millisecond))
	defer poll.Stop()
	done := ctx.Done()
	cancelled := false
	here := o.Host == r.host
	canceled := func() error {
		return temporal.NewCanceledError(Result{Job: r.j.Name, Generation: o.Generation, Attached: true})
	}
	// Reads survive cancellation: the wait must outlast it.
	rctx := context.WithoutCancel(ctx)
	for {
		select {
		case <-done:
			if !here {
				return nil, canceled()
			}
			cancelled, done = true, nil
			if o.AgentPid > 0 {
				terminateGroup(o.AgentPid)
			}
			continue
		case <-poll.C:
		}
		now, cur, err := r.f.read(rctx)
		if err != nil {
			return nil, r.wrapPilot(err)
		}
		if now != oid && cur.Generation == o.Generation && cur.State == stateRunning {
			// A renewal (perhaps recording the worker): the lease goes on.
			oid, o, seen = now, cur, time.Now()
			if cancelled && o.AgentPid > 0 {
				terminateGroup(o.AgentPid)
			}
			continue
		}
		if now != oid || (here && !r.ownerAlive(cur)) {
			if cancelled {
				return nil, canceled()
			}
			return nil, nil
		}
		if time.Since(seen) < lease+lease/4 {
			continue
		}
		if here && r.runAlive(o) {
			// Its owner lives but renews nothing (stopped): end its
			// worker's tree, and take the job once it is gone.
			r.endRun(o)
			continue
		}
		if cancelled {
			return nil, canceled()
		}
		return &expiry{oid: oid, own: o}, nil
	}
}

// launch commits the next generation to the fence (moving it from oid,
// whose owner is prev) and runs the job.
func (r *jobRun) launch(ctx context.Context, oid string, prev Owner) (Result, error) {
	self := os.Getpid()
	start, _ := pidStart(self)
	gen := prev.Generation + 1
	lease := 4 * r.interval
	own := Owner{Job: r.j.Name, Generation: gen, State: stateRunning, Host: r.host, Pid: self, PidStart: start, Boot: bootID(), Attempt: r.info.Attempt, LeaseMS: lease.Milliseconds(), Base: prev.Base}
	if _, loaded := inProcess.LoadOrStore(r.key(), gen); loaded {
		// Another attempt in this process runs the job (an earlier one,
		// timed out, still ending): wait for it through the fence.
		return Result{}, r.waitInProcess(ctx)
	}
	defer inProcess.Delete(r.key())
	res := Result{Job: r.j.Name, Generation: gen}
	branch := r.f.branch()
	at, err := r.f.refAt(ctx, branch)
	if err != nil {
		return r.pilotError(ctx, res, err)
	}
	if at != "" && prev.State == stateRunning {
		// Generation prev's publish may be half applied: git moves the
		// refs of one transaction one after the other, and its owner may
		// stop (or be stopped) between the branch and the fence. Taken
		// again later, the fence shows its verdict; nothing is launched.
		return res, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("temporal: job %s's branch %s exists (at %s) while generation %d still holds its fence: its publish may be half applied; trying again later", r.j.Name, branch, at, prev.Generation), ErrTypeFenced, temporal.ApplicationErrorOptions{Details: []any{res}})
	}
	if at != "" {
		// Its work could never be published: launching would only do it
		// again on every retry.
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("temporal: job %s's branch %s exists (at %s) but its fence published nothing: a job name is used once per repository; delete the branch or name the job anew", r.j.Name, branch, at), ErrTypeBadJob, nil, res)
	}
	if own.Base == "" {
		// The first generation fixes the base: a moving Job.Base (a
		// branch) does not change what the job's work stands on.
		base, err := r.f.resolveBase(ctx, r.j.Base)
		if err != nil {
			return r.pilotError(ctx, res, fmt.Errorf("temporal: job %s: its base %q names no commit of %s: %w", r.j.Name, r.j.Base, r.j.Repo, err))
		}
		own.Base = base
	}
	// A base an earlier generation chose on another host comes here.
	if err := r.f.haveCommit(ctx, own.Base); err != nil {
		return r.pilotError(ctx, res, err)
	}
	myOID, err := r.f.swap(ctx, oid, own)
	if errors.Is(err, ErrFenced) {
		return Result{}, errRetake
	}
	if err != nil {
		return r.pilotError(ctx, res, err)
	}
	common, err := git(ctx, r.f.repo, nil, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return r.closeWithError(ctx, myOID, own, res, err)
	}
	wtDir := filepath.Join(common, "pilot-worktrees")
	if r.a.WorktreeDir != "" {
		wtDir = filepath.Join(r.a.WorktreeDir, repoKey(common))
	}
	task := r.j.task("", gen)
	resume := false
	if prev.State == stateDone && prev.Verdict != nil {
		task.Lineage.PreviousRecord = prev.Verdict.Record
		if _, again := r.a.Policy.Retries(prev.Verdict.FailureClass); again && prev.Verdict.Resume != "" {
			prompt := r.a.Policy.ResumePrompt
			if prompt == "" {
				prompt = retry.DefaultResumePrompt
			}
			task.Resume, task.Prompt, task.TaskFile = prev.Verdict.Resume, prompt, ""
			task.Lineage.ResumedFrom = prev.Verdict.Record
			resume = true
		}
	}
	var wt string
	if resume {
		// A done generation's agent is gone: the session it resumes goes
		// on in its worktree (some CLIs key their sessions by directory),
		// on this generation's own work branch, when the worktree is on
		// this host.
		wt, err = r.f.continueIn(ctx, wtDir, prev.Generation, gen)
	}
	if wt == "" && err == nil {
		start := r.f.startOf(ctx, prev.Generation, own.Base)
		if start == own.Base && len(r.j.Merge) > 0 {
			start, err = r.f.mergeJobs(ctx, own.Base, r.j.Merge)
		}
		if err == nil {
			wt, err = r.f.worktree(ctx, wtDir, gen, start)
		}
	}
	if err != nil {
		return r.closeWithError(ctx, myOID, own, res, err)
	}
	task.Workdir = wt

	dctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hb := newHeartbeater(Progress{Job: r.j.Name, Generation: gen, Phase: "starting", LastActivity: time.Now()})
	task.Observer = hb.observe
	// The lease is renewed every heartbeat interval; two intervals
	// without a renewal end the worker (pilot's Grace later, its tree is
	// gone), half its lease: well before a taker elsewhere launches, and
	// inside the heartbeat timeout (four intervals), after which Temporal
	// may give the job to another worker.
	fc := newFenceCheck(r.f, myOID, own, cancel, r.interval)
	stop := hb.start(ctx, r.interval, fc.tick)
	v, derr := r.a.Dispatcher.Dispatch(dctx, task)
	myOID, own = fc.close()
	stop() // no heartbeat nor renewal from here on
	// The fence is closed even when this attempt was cancelled.
	wctx := context.WithoutCancel(ctx)
	// On a remote, the generation's commits go where the next one, on
	// any host, finds them; without them it starts from the base.
	_ = r.f.pushWork(wctx, wt, gen)
	// A worker ended for a lease it could not renew has no success to
	// give; one that succeeded before (its owner, stopped, could not
	// renew meanwhile) is published below if the fence is still this
	// generation's: the swap proves no other generation launched.
	if cause := context.Cause(dctx); errors.Is(cause, errFenceLost) && (derr != nil || !v.Verdict.Success()) {
		res.Verdict = JobVerdict{Verdict: v}
		// Closed when the fence can be written again and is still this
		// generation's, so that the next attempt launches anew.
		own.State, own.Error = stateDone, cause.Error()
		_, _ = r.f.swap(wctx, myOID, own)
		return res, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("job %s: generation %d ended its worker: %v; its result does not count", r.j.Name, gen, cause), ErrTypeFenced, temporal.ApplicationErrorOptions{Details: []any{res}})
	}
	if errors.Is(context.Cause(dctx), ErrFenced) {
		res.Verdict = JobVerdict{Verdict: v}
		return res, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("job %s: generation %d was superseded while it ran: its result does not count", r.j.Name, gen), ErrTypeFenced, temporal.ApplicationErrorOptions{Details: []any{res}})
	}
	if derr != nil {
		if ctx.Err() != nil {
			own.State, own.Error = stateDone, derr.Error()
			_, _ = r.f.swap(wctx, myOID, own)
			return res, temporal.NewCanceledError(res)
		}
		return r.closeWithError(wctx, myOID, own, res, derr)
	}
	res.Verdict = JobVerdict{Verdict: v}
	own.State, own.Verdict = stateDone, &v
	if v.Verdict.Success() {
		head, err := publishable(wctx, wt, own.Base)
		if err != nil {
			own.Verdict = nil
			return r.closeWithError(wctx, myOID, own, res, err)
		}
		own.Commit = head
		if _, err := r.f.publish(wctx, myOID, own, head); err != nil {
			return r.fencedOr(ctx, res, err)
		}
		res.Commit = head
		return res, nil
	}
	if _, err := r.f.swap(wctx, myOID, own); err != nil {
		return r.fencedOr(ctx, res, err)
	}
	if ctx.Err() != nil && v.FailureClass == pilot.FailCancelled {
		return res, temporal.NewCanceledError(res)
	}
	return res, verdictError(res, r.a.Policy)
}

// waitInProcess waits, heartbeating, for the other attempt of this process
// that runs the job to end, then asks RunJob to look again.
func (r *jobRun) waitInProcess(ctx context.Context) error {
	hb := newHeartbeater(Progress{Job: r.j.Name, Phase: "attached", LastActivity: time.Now()})
	stop := hb.start(ctx, r.interval, nil)
	defer stop()
	poll := time.NewTicker(min(r.interval, time.Second))
	defer poll.Stop()
	for {
		if _, ok := inProcess.Load(r.key()); !ok {
			return errRetake
		}
		select {
		case <-ctx.Done():
			return temporal.NewCanceledError(Result{Job: r.j.Name, Attached: true})
		case <-poll.C:
		}
	}
}

// closeWithError closes generation own (at oid) with pilot's error and
// returns it.
func (r *jobRun) closeWithError(ctx context.Context, oid string, own Owner, res Result, err error) (Result, error) {
	own.State, own.Error = stateDone, err.Error()
	if _, ferr := r.f.swap(context.WithoutCancel(ctx), oid, own); ferr != nil {
		return r.fencedOr(ctx, res, ferr)
	}
	return r.pilotError(ctx, res, err)
}

// fencedOr returns the fenced error when err is one, else pilot's error.
func (r *jobRun) fencedOr(ctx context.Context, res Result, err error) (Result, error) {
	if errors.Is(err, ErrFenced) {
		return res, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("job %s: generation %d was superseded: %v", r.j.Name, res.Generation, err), ErrTypeFenced, temporal.ApplicationErrorOptions{Details: []any{res}})
	}
	return r.pilotError(ctx, res, err)
}

// pilotError is RunJob's error when pilot could not run the job:
// cancelled when ctx is done, else retryable unless the error is a bad
// task or a missing credential, which another attempt would not fix.
func (r *jobRun) pilotError(ctx context.Context, res Result, err error) (Result, error) {
	res.Error = err.Error()
	if ctx.Err() != nil {
		return res, temporal.NewCanceledError(res)
	}
	var cred *pilot.CredentialError
	nonRetryable := errors.As(err, &cred)
	var ge *gitError
	if !nonRetryable && !errors.As(err, &ge) && !errors.Is(err, ErrFenced) {
		// Dispatch's errors other than a credential's are a bad task or
		// configuration (nothing started), or an unwritable run
		// directory: neither mends itself on another attempt.
		nonRetryable = true
	}
	return res, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("job %s: %v", r.j.Name, err), ErrTypePilot, temporal.ApplicationErrorOptions{NonRetryable: nonRetryable, Cause: err, Details: []any{res}})
}

func (r *jobRun) wrapPilot(err error) error {
	_, e := r.pilotError(context.Background(), Result{Job: r.j.Name}, err)
	return e
}

// verdictError is the error of a failed verdict: its class is the error's
// type; retryable as p says.
func verdictError(res Result, p retry.Policy) error {
	v := res.Verdict.Verdict
	class := string(v.FailureClass)
	if class == "" {
		class = string(v.Verdict)
	}
	again, _ := p.Retries(v.FailureClass)
	msg := fmt.Sprintf("job %s: %s (%s)", res.Job, v.Verdict, class)
	if v.EvidenceExcerpt != "" {
		msg += ": " + v.EvidenceExcerpt
	}
	opts := temporal.ApplicationErrorOptions{NonRetryable: !again, Details: []any{res}}
	if again && v.RetryAfterMS > 0 {
		opts.NextRetryDelay = time.Duration(v.RetryAfterMS) * time.Millisecond
	}
	return temporal.NewApplicationErrorWithOptions(msg, class, opts)
}

// ResultOf returns the Result an error of RunJob carries (a failed
// verdict's, a cancelled or superseded run's), as the workflow gets it
// from ExecuteActivity.
func ResultOf(err error) (Result, bool) {
	var res Result
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.HasDetails() {
		return res, app.Details(&res) == nil
	}
	var can *temporal.CanceledError
	if errors.As(err, &can) && can.HasDetails() {
		return res, can.Details(&res) == nil
	}
	return res, false
}

// repoKey names a repository's folder under Activities.WorktreeDir: its
// base name and a hash of its git directory's path ("app-3f9c2a1b0d4e"),
// so that two repositories' jobs of one name never share a worktree.
func repoKey(gitCommonDir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(gitCommonDir)))
	name := filepath.Base(filepath.Clean(gitCommonDir))
	if name == ".git" {
		name = filepath.Base(filepath.Dir(filepath.Clean(gitCommonDir)))
	}
	name = strings.TrimSuffix(name, ".git")
	return name + "-" + hex.EncodeToString(sum[:6])
}
