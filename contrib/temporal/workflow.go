package temporal

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/internal/gate"
	"github.com/pilotworkers/pilot/schedule"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// WorkflowName is the name RunJobs is registered under.
const WorkflowName = "pilot.RunJobs"

// Defaults of Input's zero-valued fields.
const (
	DefaultQueue            = "pilot"
	DefaultLimit            = 8
	DefaultHeartbeatTimeout = 30 * time.Second
	DefaultStartToClose     = 2 * time.Hour
	DefaultMaxAttempts      = 10
	// DefaultRateLimitWait is how long a provider's gate holds after a
	// rate-limited verdict that gave no retry-after.
	DefaultRateLimitWait = 30 * time.Second
	// maxRateLimitWait caps a provider's retry-after, as pilot's retry
	// package does (retry.DefaultRateLimitCap).
	maxRateLimitWait = 60 * time.Second
	// defaultRetryInterval is Input.RetryInterval's default.
	defaultRetryInterval = time.Second
)

// Input is what RunJobs runs. Its zero-valued fields take the defaults
// above (see WithDefaults).
type Input struct {
	// Jobs run in dependency order (Job.Deps); the results come back in
	// this order.
	Jobs []Job
	// Limit is the most jobs whose activities are in flight at once,
	// across all workers. It counts attempts, not agents: an attempt that
	// attaches to a live run, or waits out an old generation, holds a
	// slot and runs no agent of its own, and an old generation's agent
	// still ending after its attempt timed out holds none.
	Limit int
	// ProviderLimits bounds the jobs of a provider running at once,
	// across all workers: a providers file's max_parallel, an account's
	// session limit. A job whose provider's slots all run waits holding
	// none of Limit's, while other providers' jobs start. A provider not
	// named, or named with 0, is bounded by Limit alone.
	ProviderLimits map[string]int
	// Queue is the task queue of jobs without a capability, and the
	// prefix of the others' (see QueueFor).
	Queue string
	// HeartbeatTimeout is how long a job's activity may go without a
	// heartbeat before Temporal runs it again (where it attaches to the
	// live run, or takes the job over); StartToClose bounds one attempt;
	// MaxAttempts bounds the attempts of one job, and the re-dispatches
	// of a rate-limited one.
	HeartbeatTimeout time.Duration
	StartToClose     time.Duration
	MaxAttempts      int32
	// RetryInterval is the first wait before Temporal retries an attempt
	// (it doubles, up to a minute); 1 s when zero.
	RetryInterval time.Duration
}

// WithDefaults returns in with each of its fields that has a default and
// is zero (or negative) set to it: Queue, Limit, HeartbeatTimeout,
// StartToClose, MaxAttempts and RetryInterval.
//
// A program that starts RunJobs should send in.WithDefaults(): the values
// are then the workflow's input, in its history, and a run in flight
// keeps them whatever later versions of this package default to. RunJobs
// resolves what is still zero itself, once, and records what it resolved
// in the history, so that a replay of the run decides as the run did.
func (in Input) WithDefaults() Input {
	if in.Queue == "" {
		in.Queue = DefaultQueue
	}
	if in.Limit <= 0 {
		in.Limit = DefaultLimit
	}
	if in.HeartbeatTimeout <= 0 {
		in.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if in.StartToClose <= 0 {
		in.StartToClose = DefaultStartToClose
	}
	if in.MaxAttempts <= 0 {
		in.MaxAttempts = DefaultMaxAttempts
	}
	if in.RetryInterval <= 0 {
		in.RetryInterval = defaultRetryInterval
	}
	return in
}

// resolvedDefaults is what RunJobs records of its input once the
// defaults are resolved (not the jobs: the input has them). It is in the
// history of every run as JSON: renaming a field makes runs in flight
// replay with it zero.
type resolvedDefaults struct {
	Queue            string
	Limit            int
	HeartbeatTimeout time.Duration
	StartToClose     time.Duration
	MaxAttempts      int32
	RetryInterval    time.Duration
}

func defaultsOf(in Input) resolvedDefaults {
	return resolvedDefaults{
		Queue: in.Queue, Limit: in.Limit, HeartbeatTimeout: in.HeartbeatTimeout,
		StartToClose: in.StartToClose, MaxAttempts: in.MaxAttempts, RetryInterval: in.RetryInterval,
	}
}

func (d resolvedDefaults) apply(in Input) Input {
	in.Queue, in.Limit, in.HeartbeatTimeout = d.Queue, d.Limit, d.HeartbeatTimeout
	in.StartToClose, in.MaxAttempts, in.RetryInterval = d.StartToClose, d.MaxAttempts, d.RetryInterval
	return in
}

// QueueFor is the task queue of jobs needing capability (the CLIs a
// machine has, "claude" or "pi+codex"), under queue: queue itself when
// capability is empty, else queue + "." + capability. A worker polls the
// queues of the capabilities it has.
func QueueFor(queue, capability string) string {
	if queue == "" {
		queue = DefaultQueue
	}
	if capability == "" {
		return queue
	}
	return queue + "." + capability
}

// RegisterWorkflow registers RunJobs with w as WorkflowName.
func RegisterWorkflow(w worker.WorkflowRegistry) {
	w.RegisterWorkflowWithOptions(RunJobs, workflow.RegisterOptions{Name: WorkflowName})
}

// CheckJobs reports what is wrong with the jobs of in before they are
// submitted: a bad job, a name used twice, an unknown dependency, a cycle.
func CheckJobs(jobs []Job) error {
	var errs []string
	index := make(map[string]int, len(jobs))
	for i, j := range jobs {
		if err := j.check(); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if k, dup := index[j.Name]; dup {
			errs = append(errs, fmt.Sprintf("jobs %d and %d are both named %s: give each job a name of its own", k+1, i+1, j.Name))
			continue
		}
		index[j.Name] = i
	}
	for _, j := range jobs {
		for _, w := range j.Writes {
			if path.IsAbs(w) || w == ".." || strings.HasPrefix(w, "../") || strings.HasPrefix(path.Clean(w), "../") {
				errs = append(errs, fmt.Sprintf("job %s writes %q, which is not inside its repository: name files relative to the repository", j.Name, w))
			}
		}
		for _, d := range j.Deps {
			if _, ok := index[d]; !ok {
				errs = append(errs, fmt.Sprintf("job %s depends on %s, which is not one of the jobs: add it or drop the dependency", j.Name, d))
			}
		}
	}
	if len(errs) == 0 {
		// Kahn: what never becomes ready is on a cycle.
		indeg := make([]int, len(jobs))
		next := make(map[string][]int)
		for i, j := range jobs {
			indeg[i] = len(j.Deps)
			for _, d := range j.Deps {
				next[d] = append(next[d], i)
			}
		}
		var queue []int
		for i := range jobs {
			if indeg[i] == 0 {
				queue = append(queue, i)
			}
		}
		for len(queue) > 0 {
			i := queue[0]
			queue = queue[1:]
			for _, k := range next[jobs[i].Name] {
				if indeg[k]--; indeg[k] == 0 {
					queue = append(queue, k)
				}
			}
		}
		var cyc []string
		for i, n := range indeg {
			if n > 0 {
				cyc = append(cyc, jobs[i].Name)
			}
		}
		if len(cyc) > 0 {
			errs = append(errs, fmt.Sprintf("jobs %s depend on each other in a cycle: break it", strings.Join(cyc, ", ")))
		}
	}
	if len(errs) > 0 {
		return errors.New("temporal: " + strings.Join(errs, "; "))
	}
	return nil
}

// Job states in RunJobs.
const (
	jobWaiting = iota
	jobRunning
	jobDone
)

// RunJobs is the workflow that runs in.Jobs as RunJob activities, at most
// in.Limit at once (and of each provider at most its in.ProviderLimits),
// never two whose Writes overlap (schedule.Writers' rule, as one machine's
// scheduler keeps it), each once its dependencies succeeded, and returns one
// Result per job in job order. A job whose dependency did not succeed is
// not run: its verdict is synthesized, blocked. A job whose verdict is a
// provider-rate-limit closes that provider's gate, in the workflow, for
// every worker: no job of the provider starts until the retry-after
// (capped at a minute) has passed, and the job runs again, at most
// MaxAttempts times. Cancelling the workflow cancels the running
// activities and waits for each to acknowledge (its worker's process
// tree gone); jobs not started get synthesized cancelled verdicts.
// RunJobs fills in's zero fields as WithDefaults does, once, and records
// the values in the workflow's history.
func RunJobs(ctx workflow.Context, in Input) ([]Result, error) {
	if err := CheckJobs(in.Jobs); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeBadJob, nil)
	}
	for p, n := range in.ProviderLimits {
		if n < 0 {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("temporal: provider %s has a limit of %d jobs at once: give a count, or 0 for none", p, n), ErrTypeBadJob, nil)
		}
	}
	// Version 1: the defaults of in's zero fields are resolved once, in a
	// SideEffect, and a replay takes them from the history whatever the
	// constants are by then. Before it they were resolved inline, and
	// histories recorded before it replay so (a GetVersion that finds no
	// marker in a replay adds no command).
	if workflow.GetVersion(ctx, "defaults-recorded", workflow.DefaultVersion, 1) >= 1 {
		var d resolvedDefaults
		resolve := func(workflow.Context) any { return defaultsOf(in.WithDefaults()) }
		if err := workflow.SideEffect(ctx, resolve).Get(&d); err != nil {
			return nil, err
		}
		in = d.apply(in)
	} else {
		in = in.WithDefaults()
	}
	n := len(in.Jobs)
	index := make(map[string]int, n)
	for i, j := range in.Jobs {
		index[j.Name] = i
	}
	results := make([]Result, n)
	state := make([]int, n)
	ok := make([]bool, n)
	rateLimited := make([]int32, n)
	running, done := 0, 0
	// Which jobs may start is decided by the scheduler's own rules: its
	// readiness (dependencies complete, graph order), its provider gates
	// (caps, rate limits) and its write sets.
	deps := make([][]int, n)
	writes := make([]schedule.Writes, n)
	for i, j := range in.Jobs {
		for _, d := range j.Deps {
			deps[i] = append(deps[i], index[d])
		}
		writes[i] = writesOf(j)
	}
	// Version 1: the ready jobs start in the scheduler's planned order
	// (longest remaining path first, unless graph order finishes sooner
	// by the estimates); histories recorded before it replay in graph
	// order, as they ran.
	ready := schedule.NewReady(deps)
	if workflow.GetVersion(ctx, "critical-path-first", workflow.DefaultVersion, 1) >= 1 {
		est := make([]time.Duration, n)
		for i, j := range in.Jobs {
			est[i] = j.Estimate
		}
		ready = schedule.NewReadyPlanned(deps, est, writes, in.Limit)
	}
	gates := gate.New(func(p string) int { return in.ProviderLimits[p] }, nil)
	var writers schedule.Writers
	name := func(i int) string { return in.Jobs[i].Name }
	var timerAt time.Time // when the pending gate timer fires; zero for none
	sel := workflow.NewSelector(ctx)
	// Version 1: a gate that opens before the pending timer fires gets a
	// timer of its own (before it, a 5 s gate waited out a 60 s one).
	// Histories recorded before it replay as they ran.
	earliestGate := workflow.GetVersion(ctx, "earliest-gate-timer", workflow.DefaultVersion, 1) >= 1
	// Version 1: a job's worktree starts from its dependencies' branches
	// merged (Job.Merge). Histories recorded before it replay as they ran.
	mergeDeps := workflow.GetVersion(ctx, "merge-deps", workflow.DefaultVersion, 1) >= 1

	finish := func(i int, res Result, success bool) {
		res.Job = in.Jobs[i].Name
		results[i], state[i], ok[i] = res, jobDone, success
		done++
		if success {
			ready.Complete(i)
		}
	}
	// failedDep names a dependency of job i that ended without success.
	failedDep := func(i int) string {
		for _, d := range in.Jobs[i].Deps {
			if k := index[d]; state[k] == jobDone && !ok[k] {
				return d
			}
		}
		return ""
	}
	start := func(i int) {
		j := in.Jobs[i]
		if mergeDeps {
			// Its work starts from its dependencies', in job order.
			j.Merge = slices.Clone(j.Merge)
			for k, o := range in.Jobs {
				if slices.Contains(j.Deps, o.Name) && k != i && !slices.Contains(j.Merge, o.Name) {
					j.Merge = append(j.Merge, o.Name)
				}
			}
		}
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:           QueueFor(in.Queue, j.Capability),
			StartToCloseTimeout: in.StartToClose,
			HeartbeatTimeout:    in.HeartbeatTimeout,
			WaitForCancellation: true,
			RetryPolicy: &temporal.RetryPolicy{
				InitialInterval:    in.RetryInterval,
				BackoffCoefficient: 2,
				MaximumInterval:    time.Minute,
				MaximumAttempts:    in.MaxAttempts,
				// A rate limit comes back to the workflow, which gates
				// the provider for every worker.
				NonRetryableErrorTypes: []string{string(pilot.FailProviderRateLimit), ErrTypeBadJob},
			},
		})
		state[i] = jobRunning
		running++
		ready.Take(i)
		gates.Take(j.Provider)
		writers.Start(i, writes[i])
		f := workflow.ExecuteActivity(actx, ActivityName, j)
		sel.AddFuture(f, func(f workflow.Future) {
			running--
			gates.Done(j.Provider)
			writers.Finish(i, writes[i])
			var res Result
			err := f.Get(ctx, &res)
			if err == nil {
				finish(i, res, res.Verdict.Verdict.Verdict.Success())
				return
			}
			res, has := ResultOf(err)
			var app *temporal.ApplicationError
			if errors.As(err, &app) && app.Type() == string(pilot.FailProviderRateLimit) && ctx.Err() == nil {
				if rateLimited[i]++; rateLimited[i] < in.MaxAttempts {
					wait := DefaultRateLimitWait
					if has && res.Verdict.RetryAfterMS > 0 {
						wait = time.Duration(res.Verdict.RetryAfterMS) * time.Millisecond
					}
					gates.Hold(j.Provider, workflow.Now(ctx).Add(min(wait, maxRateLimitWait)))
					state[i] = jobWaiting
					ready.Again(i)
					return
				}
			}
			if !has || res.Verdict.Type == "" {
				res.Verdict = synthesized(j, err)
			}
			if res.Error == "" && !has {
				res.Error = err.Error()
			}
			finish(i, res, false)
		})
	}

	for done < n {
		for changed := true; changed; {
			changed = false
			for i := range in.Jobs {
				if state[i] != jobWaiting {
					continue
				}
				if ctx.Err() != nil {
					v := synthesized(in.Jobs[i], errors.New("the workflow was cancelled before the job started"))
					v.FailureClass = pilot.FailCancelled
					finish(i, Result{Verdict: v}, false)
					changed = true
					continue
				}
				if failed := failedDep(i); failed != "" {
					v := synthesized(in.Jobs[i], nil)
					v.Blocked = true
					v.BlockedReason = fmt.Sprintf("dependency %s did not succeed", failed)
					finish(i, Result{Verdict: v}, false)
					changed = true
				}
			}
		}
		if done == n {
			break
		}
		now := workflow.Now(ctx)
		var nextGate time.Time
		for _, i := range ready.Jobs() {
			if running >= in.Limit || ctx.Err() != nil {
				break
			}
			if state[i] != jobWaiting {
				ready.Take(i)
				continue
			}
			st := gates.Check(in.Jobs[i].Provider, now)
			if g := st.Until; !g.IsZero() {
				if nextGate.IsZero() || g.Before(nextGate) {
					nextGate = g
				}
				continue
			}
			if st.Full > 0 {
				continue // a job of its provider ending wakes the selector
			}
			if k, _ := writers.Conflict(writes[i], name); k >= 0 {
				continue // job k ending wakes the selector
			}
			start(i)
		}
		if running == 0 && nextGate.IsZero() {
			if ctx.Err() != nil {
				continue // the loop above synthesizes the rest
			}
			return results, fmt.Errorf("temporal: %d jobs can neither run nor wait (a bug of RunJobs)", n-done)
		}
		if !nextGate.IsZero() && (timerAt.IsZero() || earliestGate && nextGate.Before(timerAt)) {
			// A later timer still pending fires in its turn and finds
			// nothing to do but look again.
			at := nextGate
			timerAt = at
			sel.AddFuture(workflow.NewTimer(ctx, nextGate.Sub(now)), func(workflow.Future) {
				if at.Equal(timerAt) {
					timerAt = time.Time{}
				}
			})
		}
		sel.Select(ctx)
	}
	return results, nil
}

// writesOf is j's write set as schedule.Writers takes it: its Writes,
// cleaned, deduplicated and sorted; unknown when one is a directory or a
// pattern. (CheckJobs refuses paths outside the repository.) Only the
// strings count: the submitter has no checkout to resolve links in.
func writesOf(j Job) schedule.Writes {
	var ws schedule.Writes
	for _, w := range j.Writes {
		c := path.Clean(w)
		switch {
		case strings.ContainsAny(w, "*?["):
			return schedule.Writes{Unknown: true, Why: fmt.Sprintf("%q is a pattern, not a file", w)}
		case w == "" || strings.HasSuffix(w, "/") || c == ".":
			return schedule.Writes{Unknown: true, Why: fmt.Sprintf("%q is a directory or the repository itself", w)}
		}
		if !slices.Contains(ws.Files, c) {
			ws.Files = append(ws.Files, c)
		}
	}
	slices.Sort(ws.Files)
	return ws
}

// synthesized is the verdict pilot makes up for job j, which has none of
// its own; err says why.
func synthesized(j Job, err error) JobVerdict {
	v := JobVerdict{Verdict: pilot.Verdict{
		Type: event.Verdict, Job: j.Name, Provider: j.Provider, Mode: j.Mode,
		Label: j.Label, Verdict: pilot.Failed,
	}, Synthesized: true}
	if err != nil {
		v.FailureClass = pilot.FailGeneric
		v.FailureSource = "temporal"
		v.EvidenceNote = err.Error()
		v.Interrupted = true
		var can *temporal.CanceledError
		if errors.As(err, &can) {
			v.FailureClass = pilot.FailCancelled
		}
	}
	return v
}
