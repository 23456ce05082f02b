package temporal

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

// fakeJobs is a RunJob stand-in that answers from a script: per job, the
// verdicts of its attempts in order (the last repeats).
type fakeJobs struct {
	script  map[string][]pilot.Verdict
	mu      sync.Mutex
	calls   []string
	queues  map[string]string
	running atomic.Int32
	most    atomic.Int32
}

func (f *fakeJobs) run(ctx context.Context, j Job) (Result, error) {
	n := f.running.Add(1)
	defer f.running.Add(-1)
	for {
		m := f.most.Load()
		if n <= m || f.most.CompareAndSwap(m, n) {
			break
		}
	}
	f.mu.Lock()
	k := 0
	for _, c := range f.calls {
		if c == j.Name {
			k++
		}
	}
	f.calls = append(f.calls, j.Name)
	f.queues[j.Name] = activity.GetInfo(ctx).TaskQueue
	f.mu.Unlock()
	vs := f.script[j.Name]
	v := pilot.Verdict{Type: "worker_runner.verdict", Verdict: pilot.Completed}
	if len(vs) > 0 {
		v = vs[min(k, len(vs)-1)]
	}
	res := Result{Job: j.Name, Verdict: JobVerdict{Verdict: v}, Generation: k + 1}
	if v.Verdict.Success() {
		return res, nil
	}
	return res, verdictError(res, (&Activities{}).Policy)
}

func workflowEnv(t *testing.T, f *fakeJobs) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterWorkflow(env)
	f.queues = map[string]string{}
	env.RegisterActivityWithOptions(f.run, activity.RegisterOptions{Name: ActivityName})
	return env
}

// workflowResults is the results of the workflow env ran, which must
// have succeeded.
func workflowResults(t *testing.T, env *testsuite.TestWorkflowEnvironment) []Result {
	t.Helper()
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var rs []Result
	if err := env.GetWorkflowResult(&rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

func jobs(names ...string) []Job {
	var js []Job
	for _, n := range names {
		js = append(js, Job{Name: n, Repo: "/repo", Provider: "p", Mode: pilot.ModeCode})
	}
	return js
}

func TestRunJobsResultsInJobOrderWithinTheLimit(t *testing.T) {
	failed := pilot.Verdict{Type: "worker_runner.verdict", Verdict: pilot.Failed, Failure: pilot.Failure{FailureClass: pilot.FailProviderAuth}}
	f := &fakeJobs{script: map[string][]pilot.Verdict{"b": {failed}}}
	env := workflowEnv(t, f)
	js := jobs("a", "b", "c", "d", "e", "f")
	js[2].Deps = []string{"b"} // c waits for b, which fails
	js[3].Deps = []string{"a"}
	js[4].Capability = "claude"
	env.ExecuteWorkflow(WorkflowName, Input{Jobs: js, Limit: 2})
	rs := workflowResults(t, env)
	var got []string
	for _, r := range rs {
		s := r.Job + ":" + string(r.Verdict.Verdict.Verdict)
		if r.Verdict.Blocked {
			s += " blocked (" + r.Verdict.BlockedReason + ")"
		}
		got = append(got, s)
	}
	want := []string{"a:completed", "b:error", "c:error blocked (dependency b did not succeed)", "d:completed", "e:completed", "f:completed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if m := f.most.Load(); m > 2 {
		t.Errorf("%d jobs ran at once; the limit is 2", m)
	}
	for _, c := range f.calls {
		if c == "c" {
			t.Error("job c ran although its dependency failed")
		}
	}
	if q := f.queues["e"]; q != "pilot.claude" {
		t.Errorf("job e ran on queue %q; want pilot.claude", q)
	}
	if q := f.queues["a"]; q != "pilot" {
		t.Errorf("job a ran on queue %q; want pilot", q)
	}
}

func TestRunJobsGatesARateLimitedProvider(t *testing.T) {
	limited := pilot.Verdict{Type: "worker_runner.verdict", Verdict: pilot.Failed, Failure: pilot.Failure{FailureClass: pilot.FailProviderRateLimit, RetryAfterMS: 20000}}
	ok := pilot.Verdict{Type: "worker_runner.verdict", Verdict: pilot.Completed}
	f := &fakeJobs{script: map[string][]pilot.Verdict{"r": {limited, ok}}}
	env := workflowEnv(t, f)
	js := jobs("r", "s")
	js = append(js, Job{Name: "other", Repo: "/repo", Provider: "q", Mode: pilot.ModeCode})
	start := env.Now()
	env.ExecuteWorkflow(WorkflowName, Input{Jobs: js, Limit: 1})
	rs := workflowResults(t, env)
	for _, r := range rs {
		if !r.Verdict.Verdict.Verdict.Success() {
			t.Errorf("job %s: %+v; want completed", r.Job, r.Verdict)
		}
	}
	// r is rate limited: p's gate closes for 20 s, so other (provider q)
	// runs first, then r again, then s.
	if diff := cmp.Diff([]string{"r", "other", "r", "s"}, f.calls); diff != "" {
		t.Errorf("activity calls (-want +got):\n%s", diff)
	}
	if waited := env.Now().Sub(start); waited < 20*time.Second {
		t.Errorf("the workflow took %v of workflow time; the gate holds 20 s", waited)
	}
}

func TestCheckJobs(t *testing.T) {
	js := jobs("a", "b", "c", "a")
	js[0].Deps = []string{"c"}
	js[2].Deps = []string{"a", "zz"}
	err := CheckJobs(js)
	if err == nil {
		t.Fatal("CheckJobs passed bad jobs")
	}
	for _, want := range []string{"both named a", "depends on zz"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CheckJobs: %v; want it to say %q", err, want)
		}
	}
	js = jobs("a", "b")
	js[0].Deps, js[1].Deps = []string{"b"}, []string{"a"}
	if err := CheckJobs(js); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("CheckJobs of a cycle: %v", err)
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterWorkflow(env)
	env.ExecuteWorkflow(WorkflowName, Input{Jobs: js})
	var app *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &app) || app.Type() != ErrTypeBadJob {
		t.Errorf("RunJobs of a cycle: %v; want a %s error", err, ErrTypeBadJob)
	}
}

// A provider's limit holds across all workers: with provider a at one job
// at once and two slots in all, a's jobs run one after another while b's
// jobs take the other slot. The first a job runs until both b jobs have
// ended, which they can only do if a's waiting jobs hold no slot.
func TestRunJobsProviderLimitHoldsNoGlobalSlot(t *testing.T) {
	var mu sync.Mutex
	activeA, mostA, bDone := 0, 0, 0
	bothB := make(chan struct{})
	broken := make(chan struct{})
	var once sync.Once
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute) // past the guard below
	RegisterWorkflow(env)
	env.RegisterActivityWithOptions(func(ctx context.Context, j Job) (Result, error) {
		mu.Lock()
		first := false
		if j.Provider == "a" {
			activeA++
			mostA = max(mostA, activeA)
			if activeA > 1 {
				once.Do(func() { close(broken) }) // the bound is broken: stop holding
			}
			first = j.Name == "a1"
		}
		mu.Unlock()
		if first {
			select {
			case <-bothB:
			case <-broken:
			case <-time.After(20 * time.Second):
				// Not a wait for a child: a guard, so that a workflow
				// whose waiting jobs hold slots fails here, not by hanging.
				t.Error("job a1 waited 20 s for b's jobs: a job waiting for provider a's slot held a global slot")
			}
		}
		mu.Lock()
		if j.Provider == "a" {
			activeA--
		} else if bDone++; bDone == 2 {
			close(bothB)
		}
		mu.Unlock()
		return Result{Job: j.Name, Verdict: JobVerdict{Verdict: pilot.Verdict{Type: "worker_runner.verdict", Verdict: pilot.Completed}}}, nil
	}, activity.RegisterOptions{Name: ActivityName})
	js := jobs("a1", "a2", "a3", "b1", "b2")
	for i := range js {
		js[i].Provider = js[i].Name[:1]
	}
	env.ExecuteWorkflow(WorkflowName, Input{Jobs: js, Limit: 2, ProviderLimits: map[string]int{"a": 1}})
	rs := workflowResults(t, env)
	for _, r := range rs {
		if r.Verdict.Verdict.Verdict != pilot.Completed {
			t.Errorf("job %s: %s, want completed", r.Job, r.Verdict.Verdict.Verdict)
		}
	}
	if mostA != 1 {
		t.Errorf("%d jobs of provider a ran at once; its limit is 1", mostA)
	}
}

func TestRunJobsRefusesANegativeProviderLimit(t *testing.T) {
	env := workflowEnv(t, &fakeJobs{})
	env.ExecuteWorkflow(WorkflowName, Input{Jobs: jobs("a"), ProviderLimits: map[string]int{"p": -1}})
	err := env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), "provider p has a limit of -1") {
		t.Errorf("workflow error %v, want one naming provider p's limit", err)
	}
}

// Each gate opens on time: a provider gated for 5 s while another's
// 50 s gate has its timer pending runs again after 5 s, not 50.
func TestRunJobsShortGateDoesNotWaitForALongerOne(t *testing.T) {
	limited := func(ms int64) pilot.Verdict {
		return pilot.Verdict{Type: "worker_runner.verdict", Verdict: pilot.Failed, Failure: pilot.Failure{FailureClass: pilot.FailProviderRateLimit, RetryAfterMS: ms}}
	}
	ok := pilot.Verdict{Type: "worker_runner.verdict", Verdict: pilot.Completed}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterWorkflow(env)
	start := env.Now()
	var mu sync.Mutex
	calls := map[string]int{}
	ranAt := map[string]time.Duration{} // a job's second run, in workflow time
	longDone := make(chan struct{})
	env.RegisterActivityWithOptions(func(ctx context.Context, j Job) (Result, error) {
		mu.Lock()
		calls[j.Name]++
		n := calls[j.Name]
		if n == 2 {
			ranAt[j.Name] = env.Now().Sub(start)
		}
		mu.Unlock()
		v := ok
		switch {
		case j.Name == "long" && n == 1:
			v = limited(50_000)
			defer close(longDone)
		case j.Name == "short" && n == 1:
			<-longDone // the long gate's timer is set first
			v = limited(5_000)
		}
		res := Result{Job: j.Name, Verdict: JobVerdict{Verdict: v}}
		if v.Verdict.Success() {
			return res, nil
		}
		return res, verdictError(res, (&Activities{}).Policy)
	}, activity.RegisterOptions{Name: ActivityName})
	js := []Job{
		{Name: "long", Repo: "/repo", Provider: "slow", Mode: pilot.ModeCode},
		{Name: "short", Repo: "/repo", Provider: "quick", Mode: pilot.ModeCode},
	}
	env.ExecuteWorkflow(WorkflowName, Input{Jobs: js, Limit: 2})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := ranAt["short"]; got < 5*time.Second || got >= 50*time.Second {
		t.Errorf("the 5 s gate's job ran again %v into the workflow; want after 5 s, before the 50 s gate opened", got)
	}
	if got := ranAt["long"]; got < 50*time.Second {
		t.Errorf("the 50 s gate's job ran again %v into the workflow; want after 50 s", got)
	}
}

// WithDefaults fills the zero (or negative) fields that have defaults,
// and leaves the others, and the fields set, as they are.
func TestInputWithDefaults(t *testing.T) {
	js := jobs("a")
	limits := map[string]int{"p": 1}
	got := Input{Jobs: js, ProviderLimits: limits, Limit: -1, MaxAttempts: -2}.WithDefaults()
	want := Input{
		Jobs: js, ProviderLimits: limits,
		Queue: DefaultQueue, Limit: DefaultLimit, HeartbeatTimeout: DefaultHeartbeatTimeout,
		StartToClose: DefaultStartToClose, MaxAttempts: DefaultMaxAttempts, RetryInterval: time.Second,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WithDefaults of a zero input (-want +got):\n%s", diff)
	}
	set := Input{Queue: "q", Limit: 3, HeartbeatTimeout: time.Second, StartToClose: time.Minute, MaxAttempts: 2, RetryInterval: 5 * time.Second}
	if diff := cmp.Diff(set, set.WithDefaults()); diff != "" {
		t.Errorf("WithDefaults changed fields that were set (-want +got):\n%s", diff)
	}
	if again := got.WithDefaults(); !cmp.Equal(got, again) {
		t.Errorf("WithDefaults of a resolved input changed it: %+v", again)
	}
}

// No two jobs whose write sets overlap run at once, by schedule's rule:
// each activity takes a minute of the workflow's clock, so the minute
// each starts shows what ran beside what.
func TestRunJobsKeepsOverlappingWriteSetsApart(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterWorkflow(env)
	var mu sync.Mutex
	var t0 time.Time
	started := map[string]int{} // job -> the minute it started
	run := func(ctx context.Context, j Job) (Result, error) {
		mu.Lock()
		defer mu.Unlock()
		now := env.Now()
		if t0.IsZero() {
			t0 = now
		}
		started[j.Name] = int(now.Sub(t0) / time.Minute)
		return Result{Job: j.Name, Verdict: JobVerdict{Verdict: pilot.Verdict{Type: "worker_runner.verdict", Verdict: pilot.Completed}}}, nil
	}
	env.RegisterActivityWithOptions(run, activity.RegisterOptions{Name: ActivityName})
	env.OnActivity(ActivityName, mock.Anything, mock.Anything).After(time.Minute).Return(run)
	js := jobs("a", "b", "c", "d", "e")
	js[0].Writes = []string{"x"}
	js[1].Writes = []string{"./y", "x"} // overlaps a on x
	js[2].Writes = []string{"z"}
	js[3].Writes = []string{"src/"} // unknown: beside no writer
	env.ExecuteWorkflow(WorkflowName, Input{Jobs: js, Limit: 5})
	rs := workflowResults(t, env)
	if len(rs) != len(js) {
		t.Fatalf("%d results for %d jobs", len(rs), len(js))
	}
	want := map[string]int{"a": 0, "c": 0, "e": 0, "b": 1, "d": 2}
	if diff := cmp.Diff(want, started); diff != "" {
		t.Errorf("the minute each job started (-want +got):\n%s", diff)
	}
}

func TestCheckJobsRefusesWritesOutsideTheRepository(t *testing.T) {
	for _, w := range []string{"/etc/passwd", "../x", "a/../../x"} {
		js := jobs("a")
		js[0].Writes = []string{w}
		if err := CheckJobs(js); err == nil || !strings.Contains(err.Error(), "not inside its repository") {
			t.Errorf("Writes %q: CheckJobs = %v; want it refused", w, err)
		}
	}
	js := jobs("a")
	js[0].Writes = []string{"src/x.go", "./README.md", "docs/"}
	if err := CheckJobs(js); err != nil {
		t.Errorf("Writes inside the repository: %v", err)
	}
}

// RunJobs has each job start from its dependencies' work: their names in
// Job.Merge, in job order, after any the job names itself.
func TestRunJobsMergesDependenciesInJobOrder(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterWorkflow(env)
	var mu sync.Mutex
	merges := map[string][]string{}
	env.RegisterActivityWithOptions(func(ctx context.Context, j Job) (Result, error) {
		mu.Lock()
		merges[j.Name] = j.Merge
		mu.Unlock()
		return Result{Job: j.Name, Verdict: JobVerdict{Verdict: pilot.Verdict{Type: "worker_runner.verdict", Verdict: pilot.Completed}}}, nil
	}, activity.RegisterOptions{Name: ActivityName})
	js := jobs("a", "b", "c", "d")
	js[3].Deps = []string{"c", "a", "b"}
	js[3].Merge = []string{"x"}
	js[2].Deps = []string{"a"}
	env.ExecuteWorkflow(WorkflowName, Input{Jobs: js, Limit: 4})
	workflowResults(t, env)
	want := map[string][]string{"a": nil, "b": nil, "c": {"a"}, "d": {"x", "a", "b", "c"}}
	if diff := cmp.Diff(want, merges); diff != "" {
		t.Errorf("each job's Merge (-want +got):\n%s", diff)
	}
}
