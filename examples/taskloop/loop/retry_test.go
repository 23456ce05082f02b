package loop_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/taskloop/loop"
	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
	"github.com/pilotworkers/pilot/retry"
)

// The seed's ReviewRetryTest and RepetitionLimitTest: a stage's attempts
// under the retry policy and the loop's own limits, over a fake stage
// dispatcher (the seed mocks invoke).

// reviewTask is a task whose review already holds a verdict (it starts at
// review) and whose implementation sections are filled.
func reviewTask(t *testing.T, ws, verdict string) string {
	t.Helper()
	header := "<!-- task=01_task plan=0 tag=SIM -->\n"
	return addTask(t, ws, "g/01_task", "src/a.go", withVerdict(filledReview(header), verdict))
}

func TestRetriesTwoControlViolationsThenSucceeds(t *testing.T) {
	ws := workspace(t)
	reviewTask(t, ws, "WARN")
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		if c.Stage == taskfile.StageReview && n < 2 {
			return ok(pt) // a WARN verdict left, no follow-up plan
		}
		return pilot.Verdict{}
	})
	l := newLoop(t, ws, f, nil)
	var ends []retry.Result
	l.OnEvent = func(e loop.Event) {
		if e.Type == loop.EventStageEnd {
			ends = append(ends, *e.Verdict)
		}
	}
	rep := run(t, l, "g")
	if rep.Status != "complete" {
		t.Fatalf("report %+v; want complete", rep)
	}
	if n := f.count("g/01_task", taskfile.StageReview); n != 3 {
		t.Errorf("%d review attempts, want 3", n)
	}
	if len(ends) != 1 || ends[0].Attempts != 3 || !ends[0].Verdict.Verdict.Success() {
		t.Errorf("stage ends %+v; want one review stage that succeeded at its third attempt", ends)
	}
	if n := f.count("g/01_task", taskfile.StageWorker); n != 0 {
		t.Errorf("the worker ran %d times; a review in recovery needs none", n)
	}
}

func TestReviewControlRetriesDoNotCreateABlocker(t *testing.T) {
	ws := workspace(t)
	reviewTask(t, ws, "FAIL")
	var classes []pilot.FailureClass
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		if n < 3 {
			return ok(pt)
		}
		return pilot.Verdict{}
	})
	c := &clock{}
	l := newLoop(t, ws, f, c)
	l.OnEvent = func(e loop.Event) {
		if e.Type == loop.EventDispatch {
			return
		}
		if e.Type == loop.EventStageEnd {
			classes = append(classes, e.Verdict.FailureClass)
		}
	}
	rep := run(t, l, "g")
	if rep.Status != "complete" || f.count("g/01_task", taskfile.StageReview) != 4 {
		t.Fatalf("report %+v after %d reviews; want complete after 4", rep, f.count("g/01_task", taskfile.StageReview))
	}
	if ts := l.State.Retry.Task("g/01_task"); ts.Blocked != "" || ts.RecoveryFailures["review"] != 0 {
		t.Errorf("state %+v; want no block, no failures left", ts)
	}
	if c.count() != 3 {
		t.Errorf("%d waits, want 3 (one before each retry)", c.count())
	}
}

func TestDoesNotRetryObsoleteModelWorkLogFailure(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, "g/01_task", "src/a.go")
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		return failed(pt, loop.FailWorkLogIncomplete)
	})
	l := newLoop(t, ws, f, nil)
	rep := run(t, l, "g")
	if n := f.count("g/01_task", taskfile.StageWorker); n != 1 {
		t.Errorf("%d worker attempts, want 1", n)
	}
	if tr := taskReport(t, rep, "g/01_task"); tr.Status != "blocked" || !strings.Contains(tr.Reason, "work-log-incomplete") {
		t.Errorf("task %+v; want blocked by the failure that is not retried", tr)
	}
}

func TestDoesNotPromoteWorkLogInfrastructureFailure(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, "g/01_task", "src/a.go")
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		return failed(pt, loop.FailWorkLogWrite)
	})
	l := newLoop(t, ws, f, nil)
	rep := run(t, l, "g")
	if n := f.count("g/01_task", taskfile.StageWorker); n != 1 {
		t.Errorf("%d worker attempts, want 1", n)
	}
	tr := taskReport(t, rep, "g/01_task")
	if tr.Status != "blocked" || !strings.Contains(tr.Reason, "work log could not be written") {
		t.Errorf("task %+v; want blocked by the work log", tr)
	}
	if ts := l.State.Retry.Task("g/01_task"); ts.RecoveryFailures["worker"] > 1 {
		t.Errorf("recovery failures %v", ts.RecoveryFailures)
	}
}

func TestRetriesPiSessionStallTwiceWithSameModel(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, "g/01_task", "src/a.go")
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		if c.Stage == taskfile.StageWorker && n < 2 {
			v := failed(pt, pilot.FailSessionStall)
			v.Resume = "/sessions/" + string(rune('a'+n)) + ".jsonl"
			v.Record = "/runs/" + string(rune('a'+n)) + "/record.json"
			return v
		}
		return pilot.Verdict{}
	})
	c := &clock{}
	l := newLoop(t, ws, f, c)
	if rep := run(t, l, "g"); rep.Status != "complete" {
		t.Fatalf("report %+v", rep)
	}
	var workers []call
	for _, c := range f.all() {
		if c.Stage == taskfile.StageWorker {
			workers = append(workers, c)
		}
	}
	if len(workers) != 3 {
		t.Fatalf("%d worker attempts, want 3", len(workers))
	}
	resume := seed.Prompts["resume"]
	if resume != "Think in English. Final in Korean. Continue this session and complete the current task." {
		t.Errorf("the seed's resume prompt is %q", resume)
	}
	for i, w := range workers {
		if w.Provider != "pi" {
			t.Errorf("attempt %d went to %s, want the same provider", i+1, w.Provider)
		}
	}
	if workers[0].Resume != "" || workers[1].Resume != "/sessions/a.jsonl" || workers[2].Resume != "/sessions/b.jsonl" {
		t.Errorf("resumes %q %q %q; want none, then each stalled attempt's session", workers[0].Resume, workers[1].Resume, workers[2].Resume)
	}
	if workers[1].Prompt != resume || workers[2].Prompt != resume {
		t.Errorf("resumed prompts %q, %q; want %q", workers[1].Prompt, workers[2].Prompt, resume)
	}
}

func TestRetriesPiConnectionAndGenericFailures(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, "g/01_task", "src/a.go")
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		if c.Stage == taskfile.StageWorker {
			switch n {
			case 0:
				return failed(pt, pilot.FailProviderConnection)
			case 1:
				return failed(pt, pilot.FailGeneric)
			}
		}
		return pilot.Verdict{}
	})
	c := &clock{}
	l := newLoop(t, ws, f, c)
	if rep := run(t, l, "g"); rep.Status != "complete" {
		t.Fatalf("report %+v", rep)
	}
	if n := f.count("g/01_task", taskfile.StageWorker); n != 3 || c.count() != 2 {
		t.Errorf("%d worker attempts and %d waits, want 3 and 2", n, c.count())
	}
}

func TestPiTenthFailureBlocksWithoutCooldown(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, "g/01_task", "src/a.go")
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		return failed(pt, pilot.FailProviderStreamDisconnect)
	})
	c := &clock{}
	l := newLoop(t, ws, f, c)
	rep := run(t, l, "g")
	if n := f.count("g/01_task", taskfile.StageWorker); n != retry.DefaultMaxFailures || c.count() != retry.DefaultMaxFailures-1 {
		t.Errorf("%d attempts and %d waits, want %d and %d", n, c.count(), retry.DefaultMaxFailures, retry.DefaultMaxFailures-1)
	}
	if tr := taskReport(t, rep, "g/01_task"); tr.Status != "blocked" || !strings.Contains(tr.Reason, "recovery failure limit exhausted: 10/10") {
		t.Errorf("task %+v", tr)
	}
}

func TestRecoveryFailureLimitSurvivesDispatcherRestart(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, "g/01_task", "src/a.go")
	stateDir := filepath.Join(t.TempDir(), "state")
	first, err := loop.OpenState(stateDir, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Retry.UpdateTask("g/01_task", func(ts *retry.TaskState) {
		ts.RecoveryFailures = map[string]int{"worker": retry.DefaultMaxFailures - 1}
	}); err != nil {
		t.Fatal(err)
	}
	first.Close()
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		return failed(pt, pilot.FailGeneric)
	})
	l := newLoop(t, ws, f, nil)
	l.State.Close()
	l.State = openState(t, stateDir)
	rep := run(t, l, "g")
	if n := f.count("g/01_task", taskfile.StageWorker); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
	if b := l.State.Retry.Task("g/01_task").Blocked; !strings.Contains(b, "recovery failure limit exhausted") {
		t.Errorf("blocked %q", b)
	}
	if rep.ExitCode() != 2 {
		t.Errorf("exit %d, want 2", rep.ExitCode())
	}
}

func TestAlreadyExhaustedRecoveryBudgetDoesNotInvokeModel(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, "g/01_task", "src/a.go")
	f := newFake(t, nil)
	l := newLoop(t, ws, f, nil)
	if err := l.State.Retry.UpdateTask("g/01_task", func(ts *retry.TaskState) {
		ts.RecoveryFailures = map[string]int{"worker": retry.DefaultMaxFailures}
	}); err != nil {
		t.Fatal(err)
	}
	rep := run(t, l, "g")
	if n := len(f.all()); n != 0 {
		t.Errorf("%d attempts, want none", n)
	}
	if tr := taskReport(t, rep, "g/01_task"); tr.Status != "blocked" {
		t.Errorf("task %+v, want blocked", tr)
	}
}

// pilotRecord writes a record.json of a failed, resumable attempt, as pilot
// writes it, with its native session file.
func pilotRecord(t *testing.T, class pilot.FailureClass) (record, session string) {
	t.Helper()
	dir := t.TempDir()
	session = write(t, filepath.Join(dir, "session.jsonl"), "{}\n")
	one := 1
	rec := pilot.Record{RunID: "r1", Provider: "pi", Runner: "pi", Status: "error", Verdict: pilot.Failed, ExitCode: &one,
		Failure: pilot.Failure{FailureClass: class}, Resume: session, RetryKey: "g/01_task"}
	rec.SessionRecord = &pilot.SessionRecord{NativeSessionPath: session}
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return write(t, filepath.Join(dir, "record.json"), string(data)), session
}

func TestFailedLagunaLocatorIsRecoveredAfterDispatcherRestart(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, "g/01_task", "src/a.go")
	record, session := pilotRecord(t, pilot.FailSessionStall)
	if got, err := retry.ResumeFromRecord(record); err != nil || got != session {
		t.Fatalf("ResumeFromRecord = %q, %v; want %q", got, err, session)
	}
	// The dispatcher that ran it is gone; its state says the worker's last
	// attempt stalled.
	stateDir := filepath.Join(t.TempDir(), "state")
	first, err := loop.OpenState(stateDir, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Retry.UpdateTask("g/01_task", func(ts *retry.TaskState) {
		ts.RecoveryFailures = map[string]int{"worker": 1}
		ts.LastRecord, ts.LastFailureClass, ts.LastStage = record, pilot.FailSessionStall, "worker"
	}); err != nil {
		t.Fatal(err)
	}
	first.Close()
	f := newFake(t, nil)
	l := newLoop(t, ws, f, nil)
	l.State.Close()
	l.State = openState(t, stateDir)
	if rep := run(t, l, "g"); rep.Status != "complete" {
		t.Fatalf("report %+v", rep)
	}
	calls := f.all()
	if len(calls) == 0 || calls[0].Stage != taskfile.StageWorker || calls[0].Resume != session || calls[0].Prompt != seed.Prompts["resume"] {
		t.Errorf("first attempt %+v; want the worker resuming %s with the resume prompt", calls[0], session)
	}
}

func TestExhaustedSelfcheckBudgetDoesNotInvokeModel(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, "g/01_task", "src/a.go")
	f := newFake(t, nil)
	l := newLoop(t, ws, f, nil)
	if err := l.State.Retry.UpdateTask("g/01_task", func(ts *retry.TaskState) {
		ts.Counters = map[string]int{"selfcheck_incomplete": loop.SelfcheckIncompleteLimit}
	}); err != nil {
		t.Fatal(err)
	}
	rep := run(t, l, "g")
	if f.count("g/01_task", taskfile.StageSelfcheck) != 0 || f.count("g/01_task", taskfile.StageWorker) != 1 {
		t.Errorf("calls %+v; want the worker only", f.all())
	}
	if tr := taskReport(t, rep, "g/01_task"); tr.Status != "blocked" || !strings.Contains(tr.Reason, "limit already exhausted") {
		t.Errorf("task %+v", tr)
	}
}

func TestExhaustedReviewBudgetDoesNotInvokeModel(t *testing.T) {
	ws := workspace(t)
	reviewTask(t, ws, "WARN")
	f := newFake(t, nil)
	l := newLoop(t, ws, f, nil)
	if err := l.State.Retry.UpdateTask("g/01_task", func(ts *retry.TaskState) {
		ts.Counters = map[string]int{"review_no_progress": loop.ReviewNoProgressLimit}
	}); err != nil {
		t.Fatal(err)
	}
	rep := run(t, l, "g")
	if n := len(f.all()); n != 0 {
		t.Errorf("%d attempts, want none", n)
	}
	if tr := taskReport(t, rep, "g/01_task"); tr.Status != "blocked" || !strings.Contains(tr.Reason, "limit already exhausted") {
		t.Errorf("task %+v", tr)
	}
}

func TestSelfcheckIncompleteTenthPassBlocksTask(t *testing.T) {
	ws := workspace(t)
	dir := addTask(t, ws, "g/01_task", "src/a.go")
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		if c.Stage == taskfile.StageWorker {
			// The worker leaves the verification unwritten.
			write(t, reviewOf(dir), strings.Replace(filledReview("<!-- task=01_task plan=0 tag=SIM -->\n"), "결과: PASS (exit 0)", "결과:\n_미실행_", 1))
			return ok(pt)
		}
		return pilot.Verdict{}
	})
	l := newLoop(t, ws, f, nil)
	if err := l.State.Retry.UpdateTask("g/01_task", func(ts *retry.TaskState) {
		ts.Counters = map[string]int{"selfcheck_incomplete": loop.SelfcheckIncompleteLimit - 1}
	}); err != nil {
		t.Fatal(err)
	}
	rep := run(t, l, "g")
	if n := f.count("g/01_task", taskfile.StageSelfcheck); n != 1 {
		t.Errorf("%d selfchecks, want 1", n)
	}
	if tr := taskReport(t, rep, "g/01_task"); tr.Status != "blocked" || !strings.Contains(tr.Reason, "selfcheck implementation fields remain incomplete") {
		t.Errorf("task %+v", tr)
	}
}

func TestSelfcheckRunsAgainUntilTheFieldsAreFilled(t *testing.T) {
	ws := workspace(t)
	dir := addTask(t, ws, "g/01_task", "src/a.go")
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		switch {
		case c.Stage == taskfile.StageWorker:
			return ok(pt) // fills nothing
		case c.Stage == taskfile.StageSelfcheck && n == 2:
			write(t, reviewOf(dir), filledReview("<!-- task=01_task plan=0 tag=SIM -->\n"))
			return ok(pt)
		}
		return pilot.Verdict{}
	})
	l := newLoop(t, ws, f, nil)
	if rep := run(t, l, "g"); rep.Status != "complete" {
		t.Fatalf("report %+v", rep)
	}
	if n := f.count("g/01_task", taskfile.StageSelfcheck); n != 3 {
		t.Errorf("%d selfchecks, want 3", n)
	}
	if n := l.State.Retry.Task("g/01_task").Counters["selfcheck_incomplete"]; n != 0 {
		t.Errorf("counter %d after the fields were filled, want 0", n)
	}
}

func TestReviewTenthNoProgressPassBlocksTask(t *testing.T) {
	ws := workspace(t)
	// A review in recovery (its sync item is checked) that gives no
	// verdict and changes nothing: no progress. (A verdict without a
	// follow-up would be a control violation instead.)
	addTask(t, ws, "g/01_task", "src/a.go", filledReview("<!-- task=01_task plan=0 tag=SIM -->\n"))
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict { return ok(pt) })
	l := newLoop(t, ws, f, nil)
	if err := l.State.Retry.UpdateTask("g/01_task", func(ts *retry.TaskState) {
		ts.Counters = map[string]int{"review_no_progress": loop.ReviewNoProgressLimit - 1}
	}); err != nil {
		t.Fatal(err)
	}
	rep := run(t, l, "g")
	if n := len(f.all()); n != 1 || f.count("g/01_task", taskfile.StageReview) != 1 {
		t.Errorf("calls %+v; want one review", f.all())
	}
	if tr := taskReport(t, rep, "g/01_task"); tr.Status != "blocked" || !strings.Contains(tr.Reason, "review made no progress: 10/10") {
		t.Errorf("task %+v", tr)
	}
}

func TestReviewWithoutProgressRunsAgainUntilTheLimit(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, "g/01_task", "src/a.go", filledReview("<!-- task=01_task plan=0 tag=SIM -->\n"))
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict { return ok(pt) })
	l := newLoop(t, ws, f, nil)
	rep := run(t, l, "g")
	if n := f.count("g/01_task", taskfile.StageReview); n != loop.ReviewNoProgressLimit {
		t.Errorf("%d reviews, want %d", n, loop.ReviewNoProgressLimit)
	}
	if tr := taskReport(t, rep, "g/01_task"); tr.Status != "blocked" {
		t.Errorf("task %+v", tr)
	}
}

func TestReviewWithAFollowUpKeepsTheVerdictInTheLog(t *testing.T) {
	ws := workspace(t)
	dir := reviewTask(t, ws, "WARN")
	f := newFake(t, func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		if c.Stage == taskfile.StageReview && n == 0 {
			// The review keeps its WARN in the review file and writes a
			// follow-up plan.
			write(t, planOf(dir), "<!-- task=01_task plan=1 tag=SIM -->\n"+writeSetTable+"| `src/a.go` | SIM-2 |\n")
			return ok(pt)
		}
		return pilot.Verdict{}
	})
	l := newLoop(t, ws, f, nil)
	rep := run(t, l, "g")
	if rep.Status != "complete" {
		t.Fatalf("report %+v", rep)
	}
	if f.count("g/01_task", taskfile.StageWorker) != 1 || f.count("g/01_task", taskfile.StageReview) != 2 {
		t.Errorf("calls %+v; want review, worker, selfcheck, review", f.all())
	}
	archive := taskReport(t, rep, "g/01_task").Archive
	logged := read(t, filepath.Join(archive, "code_review_local_G05_0.log"))
	if !strings.Contains(logged, "종합 판정: WARN") {
		t.Errorf("the first review's log:\n%s", logged)
	}
	if _, err := os.Stat(filepath.Join(archive, loop.CompleteLog)); err != nil {
		t.Error(err)
	}
}
