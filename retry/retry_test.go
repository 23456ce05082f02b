package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/retry"
)

// The retry policy, ported from the seed dispatcher's ReviewRetryTest and
// RepetitionLimitTest: fake attempts (scripted verdicts with records on
// disk), a fake clock, and a fake slot. Nothing sleeps.

// outcome is one scripted attempt: its failure class ("" for success) and
// what else its verdict says.
type outcome struct {
	class      pilot.FailureClass
	resume     string // Verdict.Resume
	retryAfter time.Duration
	outTokens  int64
	evidence   string
	toolCall   bool   // the verdict counts a tool call
	gone       string // Verdict.SessionGone: the session to resume is gone
}

func fail(c pilot.FailureClass) outcome { return outcome{class: c} }

var ok = outcome{}

// call is what one attempt was asked to do.
type call struct {
	task pilot.Task
	link pilot.Lineage
}

// fakeAttempts plays outcomes in order, one per attempt, writing each
// attempt's record.json (attempt-N/record.json under dir). It fails the test
// when asked for more attempts than it has.
type fakeAttempts struct {
	t        *testing.T
	dir      string
	outcomes []outcome
	mu       sync.Mutex
	calls    []call
	// during, when set, runs inside each attempt (slot checks).
	during func()
}

func newFake(t *testing.T, outcomes ...outcome) *fakeAttempts {
	return &fakeAttempts{t: t, dir: t.TempDir(), outcomes: outcomes}
}

func (f *fakeAttempts) record(i int) string {
	return filepath.Join(f.dir, fmt.Sprintf("attempt-%d", i), "record.json")
}

func (f *fakeAttempts) attempt(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
	link := task.Lineage
	f.mu.Lock()
	defer f.mu.Unlock()
	i := len(f.calls)
	f.calls = append(f.calls, call{task, link})
	if i >= len(f.outcomes) {
		f.t.Errorf("attempt %d: only %d were scripted", i+1, len(f.outcomes))
		return pilot.Verdict{}, errors.New("no more scripted attempts")
	}
	if f.during != nil {
		f.during()
	}
	o := f.outcomes[i]
	v := pilot.Verdict{Type: "worker_runner.verdict", Provider: task.Provider, Mode: task.Mode,
		RunID: fmt.Sprintf("run-%d", i), Verdict: pilot.Completed, Record: f.record(i), Resume: o.resume}
	if o.class != "" {
		v.Verdict = pilot.Failed
		v.FailureClass = o.class
		v.RetryAfterMS = o.retryAfter.Milliseconds()
		v.EvidenceExcerpt = o.evidence
	}
	if o.outTokens > 0 {
		v.Usage = &pilot.Usage{OutputTokens: o.outTokens}
	}
	rec := pilot.Record{RunID: v.RunID, Provider: task.Provider, Mode: task.Mode, Runner: "pi", Model: "m",
		Status: string(v.Verdict), Failure: v.Failure, Resume: v.Resume,
		Attempt: link.Attempt, PreviousRecord: link.PreviousRecord, ResumedFrom: link.ResumedFrom, ResumeFallback: link.ResumeFallback}
	if o.toolCall {
		v.ToolCalls = 1
	}
	v.SessionGone = o.gone
	writeJSONFile(f.t, v.Record, rec)
	return v, nil
}

func (f *fakeAttempts) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// fakeClock records the waits asked of it and returns at once.
type fakeClock struct {
	mu     sync.Mutex
	delays []time.Duration
	// at, when set, runs at every wait (slot checks, cancellation).
	at func(d time.Duration) error
}

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.delays = append(c.delays, d)
	at := c.at
	c.mu.Unlock()
	if at != nil {
		return at(d)
	}
	return nil
}

func (c *fakeClock) waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.delays...)
}

// fixedBackoff is a deterministic backoff: n seconds.
func fixedBackoff(n int) time.Duration { return time.Duration(n) * time.Second }

var piTask = pilot.Task{Provider: "pi", Mode: pilot.ModeCode, Prompt: "implement the thing"}

func runRetry(t *testing.T, f *fakeAttempts, p retry.Policy, key retry.Key) (retry.Result, []pilot.Event) {
	t.Helper()
	var mu sync.Mutex
	var events []pilot.Event
	task := piTask
	task.Observer = func(e pilot.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	v, err := retry.Dispatch(context.Background(), pilottest.DispatchFunc(f.attempt), task, key, p)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	return v, events
}

func openState(t *testing.T, path string) *retry.Store {
	t.Helper()
	s, err := retry.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRetryTwoControlViolationsThenSucceeds(t *testing.T) {
	const violation = pilot.FailureClass("review-control-violation")
	f := newFake(t, fail(violation), fail(violation), ok)
	clock := &fakeClock{}
	v, _ := runRetry(t, f, retry.Policy{Retry: []pilot.FailureClass{violation}, Sleep: clock.sleep, Backoff: fixedBackoff}, retry.Key{})
	if v.Verdict.Verdict != pilot.Completed || v.Record != f.record(2) || v.Attempts != 3 || v.Blocked {
		t.Errorf("verdict %s record %s attempts %d blocked %v; want completed, %s, 3, not blocked", v.Verdict.Verdict, v.Record, v.Attempts, v.Blocked, f.record(2))
	}
	if f.count() != 3 {
		t.Errorf("%d attempts, want 3", f.count())
	}
	if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second}, clock.waits()); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	for i, c := range f.calls {
		if c.task.Prompt != piTask.Prompt || c.task.Resume != "" {
			t.Errorf("attempt %d: prompt %q resume %q; want the task afresh", i+1, c.task.Prompt, c.task.Resume)
		}
		want := pilot.Lineage{Key: retry.TaskKey(piTask), Attempt: i + 1}
		if i > 0 {
			want.PreviousRecord = f.record(i - 1)
		}
		if diff := cmp.Diff(want, c.link); diff != "" {
			t.Errorf("attempt %d link (-want +got):\n%s", i+1, diff)
		}
	}
}

func TestRetryControlViolationsDoNotBlock(t *testing.T) {
	const violation = pilot.FailureClass("review-control-violation")
	state := openState(t, filepath.Join(t.TempDir(), "state.json"))
	f := newFake(t, fail(violation), fail(violation), fail(violation), ok)
	clock := &fakeClock{}
	v, _ := runRetry(t, f, retry.Policy{Retry: []pilot.FailureClass{violation}, Sleep: clock.sleep, State: state},
		retry.Key{Task: "group/01_task", Stage: "review"})
	if v.Verdict.Verdict != pilot.Completed || v.Record != f.record(3) || f.count() != 4 {
		t.Errorf("verdict %s record %s after %d attempts; want completed, %s, 4", v.Verdict.Verdict, v.Record, f.count(), f.record(3))
	}
	ts := state.Task("group/01_task")
	if ts.Blocked != "" || ts.RecoveryFailures["review"] != 0 || ts.Group != "group" || ts.LastRecord != f.record(3) {
		t.Errorf("state after success: %+v; want unblocked, no failures, group \"group\", the last record", ts)
	}
}

func TestRetryDoesNotRetryUnknownOrNonRetryableClasses(t *testing.T) {
	for _, tt := range []struct {
		class pilot.FailureClass
		p     retry.Policy
	}{
		// The seed's obsolete work-log failure: a class pilot does not
		// know is not retried.
		{class: "work-log-incomplete"},
		// A caller's class marked non-retryable, even when listed as
		// retryable too.
		{class: "work-log-runtime-write", p: retry.Policy{
			Retry: []pilot.FailureClass{"work-log-runtime-write"}, NonRetryable: []pilot.FailureClass{"work-log-runtime-write"}}},
		{class: pilot.FailProviderAuth},
		{class: pilot.FailProviderQuota, p: retry.Policy{Retry: []pilot.FailureClass{pilot.FailProviderQuota}}},
		{class: pilot.FailSpawn},
		{class: pilot.FailCancelled},
		{class: pilot.FailProcessTerminated},
		{class: pilot.FailGeneric, p: retry.Policy{NonRetryable: []pilot.FailureClass{pilot.FailGeneric}}},
	} {
		t.Run(string(tt.class), func(t *testing.T) {
			f := newFake(t, fail(tt.class), ok)
			clock := &fakeClock{}
			tt.p.Sleep = clock.sleep
			v, _ := runRetry(t, f, tt.p, retry.Key{})
			if v.Verdict.Verdict != pilot.Failed || v.FailureClass != tt.class || v.Record != f.record(0) || v.Attempts != 1 || v.Blocked {
				t.Errorf("verdict %s %s record %s attempts %d blocked %v; want the first attempt's failure, not blocked",
					v.Verdict.Verdict, v.FailureClass, v.Record, v.Attempts, v.Blocked)
			}
			if f.count() != 1 || len(clock.waits()) != 0 {
				t.Errorf("%d attempts and %d waits, want 1 and 0", f.count(), len(clock.waits()))
			}
		})
	}
}

func TestRetryStallTwiceInTheSameSession(t *testing.T) {
	const prompt = "Think in English. Final in Korean. Continue this session and complete the current task."
	f := newFake(t,
		outcome{class: pilot.FailSessionStall, resume: "/sessions/a.jsonl"},
		outcome{class: pilot.FailSessionStall, resume: "/sessions/a.jsonl"},
		ok)
	clock := &fakeClock{}
	v, events := runRetry(t, f, retry.Policy{ResumePrompt: prompt, Sleep: clock.sleep}, retry.Key{})
	if v.Verdict.Verdict != pilot.Completed || v.Record != f.record(2) || v.ResumedFrom != f.record(1) {
		t.Errorf("verdict %s record %s resumed from %s; want completed, %s, resumed from %s", v.Verdict.Verdict, v.Record, v.ResumedFrom, f.record(2), f.record(1))
	}
	if f.count() != 3 {
		t.Fatalf("%d attempts, want 3", f.count())
	}
	for i, c := range f.calls {
		if c.task.Provider != piTask.Provider || c.task.Mode != piTask.Mode {
			t.Errorf("attempt %d ran %s/%s; want the same provider and mode", i+1, c.task.Provider, c.task.Mode)
		}
	}
	if c := f.calls[0]; c.task.Prompt != piTask.Prompt || c.task.Resume != "" {
		t.Errorf("first attempt: prompt %q resume %q; want the task itself", c.task.Prompt, c.task.Resume)
	}
	for i := 1; i < 3; i++ {
		c := f.calls[i]
		if c.task.Prompt != prompt || c.task.Resume != "/sessions/a.jsonl" || c.task.TaskFile != "" {
			t.Errorf("attempt %d: prompt %q resume %q task file %q; want the resume prompt in the failed session", i+1, c.task.Prompt, c.task.Resume, c.task.TaskFile)
		}
		if c.link.ResumedFrom != f.record(i-1) || c.link.PreviousRecord != f.record(i-1) {
			t.Errorf("attempt %d resumed from %q (previous %q), want %q", i+1, c.link.ResumedFrom, c.link.PreviousRecord, f.record(i-1))
		}
	}
	if len(clock.waits()) != 2 {
		t.Errorf("%d waits, want 2", len(clock.waits()))
	}
	retries := 0
	for _, e := range events {
		if e.Type == retry.EventRetry {
			retries++
			if r := e.Retry.(*retry.Info); !r.Resume || !r.Counted {
				t.Errorf("retry event %+v: want a counted resume", e.Retry)
			}
		}
	}
	if retries != 2 {
		t.Errorf("%d retry events, want 2", retries)
	}
}

func TestRetryStallWithoutASessionStartsAfresh(t *testing.T) {
	f := newFake(t, fail(pilot.FailContextLimit), ok)
	v, _ := runRetry(t, f, retry.Policy{Sleep: (&fakeClock{}).sleep}, retry.Key{})
	if v.Verdict.Verdict != pilot.Completed || f.count() != 2 {
		t.Fatalf("verdict %s after %d attempts", v.Verdict.Verdict, f.count())
	}
	if c := f.calls[1]; c.task.Prompt != piTask.Prompt || c.task.Resume != "" || c.link.ResumedFrom != "" {
		t.Errorf("second attempt %+v; want the task afresh", c)
	}
}

func TestRetryConnectionAndGenericFailuresWithTwoWaits(t *testing.T) {
	f := newFake(t, fail(pilot.FailProviderConnection), fail(pilot.FailGeneric), ok)
	clock := &fakeClock{}
	v, _ := runRetry(t, f, retry.Policy{Sleep: clock.sleep}, retry.Key{})
	if v.Verdict.Verdict != pilot.Completed || v.Record != f.record(2) || f.count() != 3 || v.Attempts != 3 {
		t.Errorf("verdict %s record %s attempts %d (%d calls)", v.Verdict.Verdict, v.Record, v.Attempts, f.count())
	}
	waits := clock.waits()
	if len(waits) != 2 {
		t.Fatalf("waits %v, want 2", waits)
	}
	// The default backoff: 10 s then 20 s, each less at most a fifth.
	for i, w := range waits {
		hi := retry.BackoffCeiling(i + 1)
		if w > hi || w < hi-hi/5 {
			t.Errorf("wait %d: %s, want in [%s, %s]", i+1, w, hi-hi/5, hi)
		}
	}
}

func TestRetryTenthFailureBlocksWithoutCooldown(t *testing.T) {
	outcomes := make([]outcome, retry.DefaultMaxFailures)
	for i := range outcomes {
		outcomes[i] = fail(pilot.FailProviderStreamDisconnect)
	}
	f := newFake(t, outcomes...)
	clock := &fakeClock{}
	state := openState(t, filepath.Join(t.TempDir(), "state.json"))
	v, events := runRetry(t, f, retry.Policy{Sleep: clock.sleep, State: state}, retry.Key{Task: "w/1", Stage: "worker"})
	if v.Verdict.Verdict != pilot.Failed || v.Record != f.record(9) || !v.Blocked || v.BlockedReason != "recovery failure limit exhausted: 10/10" || v.Attempts != 10 {
		t.Errorf("verdict %s record %s blocked %v %q attempts %d", v.Verdict.Verdict, v.Record, v.Blocked, v.BlockedReason, v.Attempts)
	}
	if f.count() != retry.DefaultMaxFailures {
		t.Errorf("%d attempts, want %d", f.count(), retry.DefaultMaxFailures)
	}
	if n := len(clock.waits()); n != retry.DefaultMaxFailures-1 {
		t.Errorf("%d waits, want %d (none after the blocking failure)", n, retry.DefaultMaxFailures-1)
	}
	ts := state.Task("w/1")
	if ts.Blocked != "recovery failure limit exhausted: 10/10" || ts.RecoveryFailures["worker"] != 10 {
		t.Errorf("state %+v", ts)
	}
	if last := events[len(events)-1]; last.Type != retry.EventBlocked || last.Retry.(*retry.Info).Reason != v.BlockedReason {
		t.Errorf("last event %+v, want the block", last)
	}
}

func TestRetryBudgetSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".git", "pilot", "state.json")
	key := retry.Key{Task: "group/01_task", Stage: "worker"}
	first, err := retry.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.UpdateTask(key.Task, func(s *retry.TaskState) {
		s.RecoveryFailures = map[string]int{"worker": retry.DefaultMaxFailures - 1}
	}); err != nil {
		t.Fatal(err)
	}
	first.Close()

	// The restarted dispatcher: one more failure blocks.
	second := openState(t, path)
	f := newFake(t, fail(pilot.FailGeneric), ok)
	clock := &fakeClock{}
	v, _ := runRetry(t, f, retry.Policy{Sleep: clock.sleep, State: second}, key)
	if !v.Blocked || !strings.Contains(v.BlockedReason, "recovery failure limit exhausted") || v.Record != f.record(0) {
		t.Errorf("verdict blocked %v %q record %s", v.Blocked, v.BlockedReason, v.Record)
	}
	if f.count() != 1 || len(clock.waits()) != 0 {
		t.Errorf("%d attempts, %d waits; want 1 and 0", f.count(), len(clock.waits()))
	}
	second.Close()

	third := openState(t, path)
	if ts := third.Task(key.Task); !strings.Contains(ts.Blocked, "recovery failure limit exhausted: 10/10") {
		t.Errorf("after another restart: %+v", ts)
	}
}

func TestRetryExhaustedBudgetInvokesNothing(t *testing.T) {
	state := openState(t, filepath.Join(t.TempDir(), "state.json"))
	key := retry.Key{Task: "group/01_task", Stage: "worker"}
	last := filepath.Join(t.TempDir(), "record.json")
	if err := state.UpdateTask(key.Task, func(s *retry.TaskState) {
		s.RecoveryFailures = map[string]int{"worker": retry.DefaultMaxFailures}
		s.LastRecord, s.LastFailureClass = last, pilot.FailProviderStreamDisconnect
	}); err != nil {
		t.Fatal(err)
	}
	f := newFake(t)
	clock := &fakeClock{}
	v, events := runRetry(t, f, retry.Policy{Sleep: clock.sleep, State: state}, key)
	if f.count() != 0 || len(clock.waits()) != 0 {
		t.Errorf("%d attempts, %d waits; want none", f.count(), len(clock.waits()))
	}
	want := "recovery failure limit exhausted: 10/10"
	if !v.Blocked || v.BlockedReason != want || v.Attempts != 0 || !v.Synthesized || v.Record != last ||
		v.Verdict.Verdict != pilot.Failed || v.FailureClass != pilot.FailProviderStreamDisconnect {
		t.Errorf("verdict %+v", v)
	}
	if got := state.Task(key.Task).Blocked; got != want {
		t.Errorf("state blocked %q, want %q", got, want)
	}
	if len(events) != 1 || events[0].Type != retry.EventBlocked {
		t.Errorf("events %+v, want one block", events)
	}
	// Blocked now: still nothing runs, whatever the budget.
	v, _ = runRetry(t, f, retry.Policy{MaxFailures: 50, Sleep: clock.sleep, State: state}, key)
	if f.count() != 0 || !v.Blocked {
		t.Errorf("a blocked task ran: %d attempts, blocked %v", f.count(), v.Blocked)
	}
}

func TestRetryRateLimitWithoutWorkIsNotCounted(t *testing.T) {
	state := openState(t, filepath.Join(t.TempDir(), "state.json"))
	f := newFake(t,
		outcome{class: pilot.FailProviderRateLimit, retryAfter: 30 * time.Second},
		outcome{class: pilot.FailProviderRateLimit, retryAfter: 10 * time.Minute},
		ok)
	clock := &fakeClock{}
	v, events := runRetry(t, f, retry.Policy{MaxFailures: 2, Sleep: clock.sleep, Backoff: fixedBackoff, State: state}, retry.Key{Task: "t"})
	// Two rate limits would exhaust a budget of 2 if they counted.
	if v.Verdict.Verdict != pilot.Completed || f.count() != 3 || v.Blocked {
		t.Errorf("verdict %s after %d attempts, blocked %v", v.Verdict.Verdict, f.count(), v.Blocked)
	}
	if diff := cmp.Diff([]time.Duration{30 * time.Second, retry.DefaultRateLimitCap}, clock.waits()); diff != "" {
		t.Errorf("waits: the retry-after, then the cap (-want +got):\n%s", diff)
	}
	for _, e := range events {
		if e.Type == retry.EventRetry && e.Retry.(*retry.Info).Counted {
			t.Errorf("a rate limit without work counted: %+v", e.Retry)
		}
	}
}

func TestRetryRateLimitAfterWorkCounts(t *testing.T) {
	for _, o := range []outcome{
		{class: pilot.FailProviderRateLimit, retryAfter: 45 * time.Second, outTokens: 12},
		{class: pilot.FailProviderRateLimit, retryAfter: 45 * time.Second, toolCall: true},
	} {
		f := newFake(t, o, o)
		clock := &fakeClock{}
		v, _ := runRetry(t, f, retry.Policy{MaxFailures: 2, Sleep: clock.sleep, Backoff: fixedBackoff}, retry.Key{})
		if !v.Blocked || f.count() != 2 {
			t.Errorf("%+v: blocked %v after %d attempts; want blocked after 2", o, v.Blocked, f.count())
		}
		// The wait is the longer of the backoff (1 s) and the retry-after.
		if diff := cmp.Diff([]time.Duration{45 * time.Second}, clock.waits()); diff != "" {
			t.Errorf("waits (-want +got):\n%s", diff)
		}
	}
}

func TestRetryResumeOfAGoneSessionFallsBackOnce(t *testing.T) {
	f := newFake(t,
		outcome{class: pilot.FailSessionStall, resume: "sess-1"},
		outcome{class: pilot.FailGeneric, gone: "No conversation found with session ID: sess-1"},
		outcome{class: pilot.FailSessionStall, resume: "sess-2"},
		outcome{class: pilot.FailGeneric, gone: "No conversation found with session ID: sess-2"},
		ok)
	clock := &fakeClock{}
	state := openState(t, filepath.Join(t.TempDir(), "state.json"))
	v, events := runRetry(t, f, retry.Policy{Sleep: clock.sleep, Backoff: fixedBackoff, State: state}, retry.Key{Task: "t"})
	if v.Verdict.Verdict != pilot.Completed || f.count() != 5 {
		t.Fatalf("verdict %s after %d attempts", v.Verdict.Verdict, f.count())
	}
	// Attempt 3 is the fallback: the task afresh, at once, not counted.
	c := f.calls[2]
	if c.task.Resume != "" || c.task.Prompt != piTask.Prompt || c.link.ResumedFrom != "" || c.link.PreviousRecord != f.record(1) ||
		!strings.Contains(c.link.ResumeFallback, "No conversation found with session ID: sess-1") {
		t.Errorf("fallback attempt %+v", c)
	}
	// Attempt 5 follows a second gone session: no second fallback, an
	// ordinary (counted) retry of a generic error, afresh.
	if c := f.calls[4]; c.link.ResumeFallback != "" || c.task.Resume != "" {
		t.Errorf("attempt 5 %+v: want an ordinary retry", c)
	}
	// Waits: after attempt 1 (1 failure), none for the fallback, after
	// attempt 3 (2 failures) and attempt 4 (3 failures).
	if diff := cmp.Diff([]time.Duration{1 * time.Second, 2 * time.Second, 3 * time.Second}, clock.waits()); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	fallbacks := 0
	for _, e := range events {
		if e.Type == retry.EventResumeFallback {
			fallbacks++
		}
	}
	if fallbacks != 1 {
		t.Errorf("%d fallback events, want 1", fallbacks)
	}
	var rec pilot.Record
	data, _ := os.ReadFile(f.record(2))
	json.Unmarshal(data, &rec)
	if rec.ResumeFallback == "" || rec.PreviousRecord != f.record(1) {
		t.Errorf("the fallback's record: resume_fallback %q previous %q", rec.ResumeFallback, rec.PreviousRecord)
	}
}

// A failed attempt's record is enough to resume it after a restart (the
// seed's laguna_resume_locator).
func TestResumeFromRecordAfterRestart(t *testing.T) {
	dir := t.TempDir()
	native := filepath.Join(dir, "session.jsonl")
	os.WriteFile(native, []byte("{}\n"), 0o600)
	recPath := filepath.Join(dir, "record.json")
	rec := pilot.Record{RunID: "r1", Provider: "pi", Runner: "pi", Model: "laguna-s:2.1", Status: "error",
		Failure: pilot.Failure{FailureClass: pilot.FailSessionStall}, Resume: native,
		SessionRecord: &pilot.SessionRecord{NativeSessionPath: native}}
	writeJSONFile(t, recPath, rec)
	got, err := retry.ResumeFromRecord(recPath)
	if err != nil || got != native {
		t.Fatalf("ResumeFromRecord = %q, %v; want %q", got, err, native)
	}

	// A restarted retry picks it up: the first attempt resumes it.
	state := openState(t, filepath.Join(dir, "state.json"))
	key := retry.Key{Task: "t", Stage: string(piTask.Mode)}
	if err := state.UpdateTask(key.Task, func(s *retry.TaskState) {
		s.RecoveryFailures = map[string]int{key.Stage: 1}
		s.LastRecord, s.LastFailureClass, s.LastStage = recPath, pilot.FailSessionStall, key.Stage
	}); err != nil {
		t.Fatal(err)
	}
	f := newFake(t, ok)
	v, _ := runRetry(t, f, retry.Policy{State: state}, key)
	if c := f.calls[0]; c.task.Resume != native || c.task.Prompt != retry.DefaultResumePrompt || c.link.ResumedFrom != recPath {
		t.Errorf("first attempt after the restart: %+v; want a resume of %s", c, native)
	}
	if v.ResumedFrom != recPath || state.Task("t").RecoveryFailures[key.Stage] != 0 {
		t.Errorf("verdict resumed from %q; state %+v", v.ResumedFrom, state.Task("t"))
	}

	// Not resumable: the session is gone, or the class is not resumed.
	os.Remove(native)
	if _, err := retry.ResumeFromRecord(recPath); !errors.Is(err, retry.ErrNotResumable) || !strings.Contains(err.Error(), "gone") {
		t.Errorf("gone session: %v", err)
	}
	rec.Failure.FailureClass = pilot.FailProviderAuth
	os.WriteFile(native, []byte("{}\n"), 0o600)
	writeJSONFile(t, recPath, rec)
	if _, err := retry.ResumeFromRecord(recPath); !errors.Is(err, retry.ErrNotResumable) {
		t.Errorf("provider-auth: %v", err)
	}
}

func TestRetryWaitCutByCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFake(t, fail(pilot.FailGeneric), ok)
	clock := &fakeClock{at: func(time.Duration) error {
		cancel()
		return ctx.Err()
	}}
	v, err := retry.Dispatch(ctx, pilottest.DispatchFunc(f.attempt), piTask, retry.Key{}, retry.Policy{Sleep: clock.sleep})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Interrupted || v.Attempts != 1 || f.count() != 1 {
		t.Errorf("interrupted %v attempts %d (%d calls); want the first verdict, interrupted", v.Interrupted, v.Attempts, f.count())
	}
}

func TestBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{
		1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 5: 160 * time.Second,
		6: 5 * time.Minute, 9: 5 * time.Minute, 1000: 5 * time.Minute,
	} {
		if got := retry.BackoffCeiling(n); got != want {
			t.Errorf("BackoffCeiling(%d) = %s, want %s", n, got, want)
		}
		for range 50 {
			if got := retry.DefaultBackoff(n); got > want || got < want-want/5 {
				t.Fatalf("DefaultBackoff(%d) = %s, want in [%s, %s]", n, got, want-want/5, want)
			}
		}
	}
}

func TestTaskKeyIsStable(t *testing.T) {
	a := pilot.Task{Provider: "pi", Mode: pilot.ModeCode, TaskFile: "/work/tasks/one.md"}
	b := a
	b.TaskFile = "/work/other/one.md"
	if retry.TaskKey(a) != retry.TaskKey(a) || retry.TaskKey(a) == retry.TaskKey(b) {
		t.Errorf("keys %q %q: want stable and distinct", retry.TaskKey(a), retry.TaskKey(b))
	}
	if k := retry.TaskKey(a); !strings.HasPrefix(k, "pi:code:one.md@") || strings.Contains(k, "/") {
		t.Errorf("key %q", k)
	}
	a.Label = "alpha/01_task"
	if retry.TaskKey(a) != "alpha/01_task" {
		t.Errorf("labelled key %q", retry.TaskKey(a))
	}
}

// A resume that fails because its session is gone (Verdict.SessionGone,
// which the runner's watcher reads from the CLI's own output) falls back to
// a fresh session at once; one that fails otherwise does not.
func TestRetryGoneSessionFallsBack(t *testing.T) {
	stall := outcome{class: pilot.FailSessionStall, resume: "sess"}
	for _, tt := range []struct {
		name     string
		gone     string
		fallback bool
	}{
		{"gone", "No conversation found with session ID: sess", true},
		{"not gone", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, stall, outcome{class: pilot.FailGeneric, gone: tt.gone}, ok)
			runRetry(t, f, retry.Policy{Sleep: (&fakeClock{}).sleep}, retry.Key{})
			if got := f.calls[2].link.ResumeFallback != ""; got != tt.fallback {
				t.Errorf("fallback %v, want %v (link %+v)", got, tt.fallback, f.calls[2].link)
			}
			if tt.fallback && !strings.Contains(f.calls[2].link.ResumeFallback, tt.gone) {
				t.Errorf("fallback %q does not quote %q", f.calls[2].link.ResumeFallback, tt.gone)
			}
		})
	}
}

func TestPolicyRetries(t *testing.T) {
	custom := pilot.FailureClass("my-class")
	tests := []struct {
		p             retry.Policy
		c             pilot.FailureClass
		retry, resume bool
	}{
		{retry.Policy{}, pilot.FailProviderAuth, false, false},
		{retry.Policy{}, pilot.FailProviderQuota, false, false},
		{retry.Policy{}, pilot.FailSpawn, false, false},
		{retry.Policy{}, pilot.FailCancelled, false, false},
		{retry.Policy{}, pilot.FailSessionStall, true, true},
		{retry.Policy{}, pilot.FailContextLimit, true, true},
		{retry.Policy{}, pilot.FailProviderConnection, true, false},
		{retry.Policy{}, custom, false, false},
		{retry.Policy{Retry: []pilot.FailureClass{custom}}, custom, true, false},
		{retry.Policy{NonRetryable: []pilot.FailureClass{pilot.FailGeneric}}, pilot.FailGeneric, false, false},
		{retry.Policy{Resume: []pilot.FailureClass{pilot.FailCancelled}}, pilot.FailCancelled, false, false},
	}
	for _, tt := range tests {
		again, resume := tt.p.Retries(tt.c)
		if again != tt.retry || resume != tt.resume {
			t.Errorf("%+v.Retries(%s) = %v, %v; want %v, %v", tt.p, tt.c, again, resume, tt.retry, tt.resume)
		}
	}
}

// Pilots that share the state claim each attempt on the budget under its
// lock: at the last allowed attempt, four pilots at once start it once,
// and the other three are blocked without dispatching. (Before, each read
// the budget, found one attempt left, and all four ran it: 13 failures
// on a budget of 10.)
func TestRetryTheLastAttemptStartsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	key := retry.Key{Task: "shared", Stage: "worker"}
	if err := openState(t, path).UpdateTask(key.Task, func(s *retry.TaskState) {
		s.RecoveryFailures = map[string]int{"worker": retry.DefaultMaxFailures - 1}
	}); err != nil {
		t.Fatal(err)
	}
	const pilots = 4
	started := make(chan struct{}, pilots)
	release := make(chan struct{})
	d := pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		started <- struct{}{}
		<-release
		return pilot.Verdict{Type: "worker_runner.verdict", Verdict: pilot.Failed, Failure: pilot.Failure{FailureClass: pilot.FailGeneric}}, nil
	})
	results := make(chan retry.Result, pilots)
	for range pilots {
		st := openState(t, path) // each pilot's own handle on the file
		go func() {
			res, err := retry.Dispatch(context.Background(), d, piTask, key, retry.Policy{State: st, Sleep: (&fakeClock{}).sleep})
			if err != nil {
				t.Error(err)
			}
			results <- res
		}()
	}
	// One dispatches and waits for release; the others are refused.
	var refused []retry.Result
	dispatched := 0
	for len(refused)+dispatched < pilots && len(refused) < pilots {
		select {
		case res := <-results:
			refused = append(refused, res)
		case <-started:
			dispatched++
		}
	}
	close(release)
	if dispatched != 1 {
		t.Errorf("%d pilots dispatched the last attempt, want 1", dispatched)
	}
	var last retry.Result
	for range dispatched {
		last = <-results
	}
	for _, res := range refused {
		if !res.Blocked || res.Attempts != 0 {
			t.Errorf("a refused pilot: %+v; want blocked, nothing dispatched", res)
		}
	}
	if last.Attempts != 1 || !last.Blocked {
		t.Errorf("the pilot that ran the last attempt: %+v; want 1 attempt, then blocked", last)
	}
	if ts := openState(t, path).Task(key.Task); ts.RecoveryFailures["worker"] != retry.DefaultMaxFailures {
		t.Errorf("failures counted %d, want %d", ts.RecoveryFailures["worker"], retry.DefaultMaxFailures)
	}
}

// An attempt's claim stands while it runs and counts once when it fails;
// one that another pilot's success reset counts afresh; one the caller
// cancels is taken back.
func TestRetryClaimsCountOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	key := retry.Key{Task: "shared", Stage: "worker"}
	st := openState(t, path)
	failures := func() int { return openState(t, path).Task(key.Task).RecoveryFailures["worker"] }
	var during int
	once := func(class pilot.FailureClass, inside func()) retry.Result {
		t.Helper()
		d := pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
			during = failures()
			if inside != nil {
				inside()
			}
			v := pilot.Verdict{Type: "worker_runner.verdict", Verdict: pilot.Completed}
			if class != "" {
				v.Verdict, v.Failure = pilot.Failed, pilot.Failure{FailureClass: class}
			}
			return v, nil
		})
		res, err := retry.Dispatch(context.Background(), d, piTask, key, retry.Policy{State: st, NonRetryable: []pilot.FailureClass{pilot.FailGeneric}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	once(pilot.FailGeneric, nil)
	if during != 1 || failures() != 1 {
		t.Errorf("a failed attempt: %d counted while it ran, %d after; want 1 and 1", during, failures())
	}
	once(pilot.FailCancelled, nil)
	if during != 2 || failures() != 1 {
		t.Errorf("a cancelled attempt: %d counted while it ran, %d after; want 2, then taken back to 1", during, failures())
	}
	// While this attempt runs, another pilot's attempt succeeds.
	once(pilot.FailGeneric, func() { once("", nil) })
	if failures() != 1 {
		t.Errorf("a failure after another pilot's success: %d counted, want 1", failures())
	}
}
