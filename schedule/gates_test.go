package schedule_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/schedule"
)

// fakeClock is virtual time: waiting for a timer moves the clock to it at
// once.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func providerJob(id, provider string, deps ...string) schedule.Job {
	j := job(id, deps...)
	j.Task.Provider = provider
	return j
}

// A rate limit with a known reset gates its provider: the provider's queued
// jobs wait until the reset without holding a slot (another provider's job
// runs meanwhile), and the limited job resumes its own session then.
func TestARateLimitGatesItsProviderUntilTheReset(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)}
	reset := clock.now.Add(20 * time.Second)
	type call struct {
		label, resume, prompt string
		at                    time.Time
	}
	var mu sync.Mutex
	var calls []call
	s := &schedule.Scheduler{
		MaxParallel: 1,
		Now:         clock.Now,
		After:       clock.After,
		Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
			mu.Lock()
			calls = append(calls, call{tk.Label, tk.Resume, tk.Prompt, clock.Now()})
			first := len(calls) == 1
			mu.Unlock()
			if first { // L1's first attempt: limited, with a session to resume
				v := pilot.Verdict{Provider: tk.Provider, Verdict: pilot.Failed, Resume: "sess-1"}
				v.FailureClass, v.RetryAfterMS = pilot.FailProviderRateLimit, 20000
				v.EvidenceExcerpt = "429 Too Many Requests: try again in 20s"
				return v, nil
			}
			return ok(ctx, tk)
		}),
	}
	var gated []string
	s.OnEvent = func(e schedule.Event) {
		if e.Type == schedule.EventGated {
			gated = append(gated, e.Job+" until "+e.Until.Format(time.TimeOnly))
		}
	}
	rs := run(t, s, schedule.Graph{Jobs: []schedule.Job{providerJob("L1", "limited"), providerJob("L2", "limited"), providerJob("O1", "other")}})
	if schedule.GroupStatus(rs) != "complete" || rs[0].Gated != 1 {
		t.Fatalf("results %v (L1 gated %d times)", rs, rs[0].Gated)
	}
	// O1 runs while the limited provider waits (when, on the virtual
	// clock, does not matter); the limited provider's jobs run at the
	// reset, L1 resuming its session.
	calls[1].at = time.Time{}
	want := []call{
		{"L1", "", "L1", reset.Add(-20 * time.Second)},
		{"O1", "", "O1", time.Time{}},
		{"L1", "sess-1", "Continue this session and complete the current task.", reset},
		{"L2", "", "L2", reset},
	}
	if diff := cmp.Diff(want, calls, cmp.AllowUnexported(call{})); diff != "" {
		t.Errorf("dispatches (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"L1 until 15:00:20", "L2 until 15:00:20"}, gated); diff != "" {
		t.Errorf("gated events (-want +got):\n%s", diff)
	}
}

// A used-up quota closes its provider's gate: its queued jobs block with the
// evidence, while other providers' jobs drain.
func TestAQuotaFailureBlocksItsProviderOnly(t *testing.T) {
	s := &schedule.Scheduler{
		MaxParallel: 1,
		Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
			if tk.Provider == "spent" {
				v := pilot.Verdict{Provider: tk.Provider, Verdict: pilot.Failed}
				v.FailureClass, v.EvidenceExcerpt = pilot.FailProviderQuota, "You've hit your usage limit."
				return v, nil
			}
			return ok(ctx, tk)
		}),
	}
	rs := run(t, s, schedule.Graph{Jobs: []schedule.Job{
		providerJob("S1", "spent"), providerJob("S2", "spent"), providerJob("O1", "other"), providerJob("O2", "other", "S1"),
	}})
	reason := "provider spent quota used up (job S1): You've hit your usage limit."
	want := map[string]string{
		"S1": "S1: blocked (" + reason + ")",
		"S2": "S2: blocked (" + reason + ")",
		"O1": "O1: complete",
		"O2": "O2: waiting on S1",
	}
	if diff := cmp.Diff(want, statuses(rs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if rs[1].Verdict.RunID != "" || rs[1].Verdict.Verdict != "" {
		t.Errorf("S2 was dispatched: %+v", rs[1].Verdict)
	}
}

// Jobs whose write sets overlap never run at once: the deferred job's event
// names the running job and the file. (That no two overlapping jobs are
// ever active is TestRandomGraphsKeepEveryRule's to check.)
func TestOverlappingWriteSetsNeverRunAtOnce(t *testing.T) {
	ws := t.TempDir()
	var deferred []schedule.Event
	s := &schedule.Scheduler{
		Dispatcher: pilottest.DispatchFunc(ok),
		OnEvent: func(e schedule.Event) {
			if e.Type == schedule.EventDeferred {
				deferred = append(deferred, e)
			}
		},
	}
	alpha, alpha2, beta, unknown := job("alpha"), job("alpha2"), job("beta"), job("everything")
	alpha.WriteSet = []string{"src/alpha.go"}
	alpha2.WriteSet = []string{"./src/x/../alpha.go", "src/other.go"}
	beta.WriteSet = []string{"src/beta.go"}
	unknown.WriteSet = []string{"src/"}
	rs := run(t, s, schedule.Graph{Workdir: ws, Jobs: []schedule.Job{alpha, alpha2, beta, unknown}})
	if schedule.GroupStatus(rs) != "complete" {
		t.Fatalf("results %v", rs)
	}
	if len(deferred) < 2 {
		t.Fatalf("deferred %+v; want alpha2 (overlap) and the unknown write set deferred", deferred)
	}
	if d := deferred[0]; d.Job != "alpha2" || d.Conflict != "alpha" || !strings.Contains(d.Reason, "alpha.go") {
		t.Errorf("first deferral %+v; want alpha2 behind alpha, naming the file", d)
	}
	if d := deferred[1]; d.Job != "everything" || !strings.Contains(d.Reason, "unknown") {
		t.Errorf("second deferral %+v; want the unknown write set behind a writer", d)
	}
}
