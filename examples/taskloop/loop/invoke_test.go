package loop_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/taskloop/loop"
	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
	"github.com/pilotworkers/pilot/examples/taskloop/worklog"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/retry"
)

// The seed's WorkLogInvokeIntegrationTest, the parts that are the task
// loop's: stage attempts of real worker processes (the fake agent) through
// a real pilot.Dispatcher, and the work log around them.

// body is text as a fake agent's write= step takes it.
func body(text string) string {
	q := strconv.Quote(text)
	return q[1 : len(q)-1]
}

const taskName = "g/01_task"

func taskPath(ws, file string) string {
	return filepath.Join(ws, "agent-task", "g", "01_task", file)
}

// realLoop is a loop whose stages run the fake agent: pi runs worker and
// selfcheck with the given script, codex reviews with its own.
func realLoop(t *testing.T, ws string, worker, review []string) *loop.Loop {
	t.Helper()
	d := pilottest.Dispatcher(t, []pilot.Provider{
		pilottest.FakeProvider(t, "pi", worker...),
		pilottest.FakeProvider(t, "codex", review...),
	})
	l := newLoop(t, ws, d, nil)
	return l
}

// fills is a worker's script step that fills the task's review.
func fills(ws string) string {
	return "write=" + taskPath(ws, "CODE_REVIEW-local-G05.md") + "=" + body(filledReview("<!-- task=01_task plan=0 tag=SIM -->\n"))
}

// passes is a review's script step that gives the official verdict PASS.
func passes(ws string) string {
	return "append=" + taskPath(ws, "CODE_REVIEW-local-G05.md") + "=" + body("\n## 코드리뷰 결과\n\n- 종합 판정: PASS\n")
}

var reKSTRow = regexp.MustCompile(`\| \d+ \| [^|\n]+\+09:00 \| (START|FINISH) \|`)

func TestInvokeWritesDispatcherOwnedMilestoneTimeline(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, taskName, "src/a.go")
	l := realLoop(t, ws, []string{"out=work complete", "out={prompt}", fills(ws)}, []string{"out=reviewed", passes(ws)})
	var records []string
	l.OnEvent = func(e loop.Event) {
		if e.Type == loop.EventStageEnd {
			records = append(records, e.Verdict.Record)
		}
	}
	rep := run(t, l, "g")
	if rep.Status != "complete" {
		t.Fatalf("report %+v", rep)
	}
	archive := taskReport(t, rep, taskName).Archive
	log := read(t, filepath.Join(archive, worklog.FileName))
	for _, want := range []string{
		"Dispatcher-owned execution timeline",
		"| START | g/01_task | worker | 0 | pi | running |",
		"| FINISH | g/01_task | worker | 0 | pi | succeeded:0 |",
		"| FINISH | g/01_task | selfcheck | 0 | pi | succeeded:0 |",
		"| FINISH | g/01_task | review | 0 | codex | succeeded:0 |",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("work log lacks %q:\n%s", want, log)
		}
	}
	if n := len(reKSTRow.FindAllString(log, -1)); n != 6 {
		t.Errorf("%d timeline rows in KST, want 6:\n%s", n, log)
	}
	// The FINISH rows name pilot's records, which the stage verdicts name.
	if len(records) != 3 {
		t.Fatalf("%d stage ends, want 3", len(records))
	}
	for _, r := range records {
		if !strings.Contains(log, "`"+r+"`") {
			t.Errorf("work log does not name record %s", r)
		}
	}
	// The worker was given the stage's prompt, and nothing of a work-log
	// contract.
	rec, err := pilot.ReadRecord(records[0])
	if err != nil {
		t.Fatal(err)
	}
	stream := read(t, rec.StreamLog)
	if !strings.Contains(stream, "Read "+taskPath(ws, "PLAN-local-G05.md")+" and implement it.") || strings.Contains(stream, "checkpoint after each meaningful phase") {
		t.Errorf("the worker's prompt, in its stream:\n%s", stream)
	}
}

func TestInvokeDoesNotRequireModelWrittenWorkLog(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, taskName, "src/a.go")
	// The worker writes no work log of its own, and says nothing of one.
	l := realLoop(t, ws, []string{"out=done without report", fills(ws)}, []string{"out=reviewed", passes(ws)})
	var workers []pilot.Verdict
	l.OnEvent = func(e loop.Event) {
		if e.Type == loop.EventStageEnd && e.Stage == taskfile.StageWorker {
			workers = append(workers, e.Verdict.Verdict)
		}
	}
	if rep := run(t, l, "g"); rep.Status != "complete" {
		t.Fatalf("report %+v", rep)
	}
	if len(workers) != 1 || !workers[0].Verdict.Success() || workers[0].FailureClass != "" {
		t.Errorf("worker stages %+v; want one success", workers)
	}
}

func TestWorkLogContractChecksTheWorkersBlock(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, taskName, "src/a.go")
	// Under the contract, a worker that leaves its block unfilled fails
	// its attempt, and that failure is not retried.
	l := realLoop(t, ws, []string{"out=done without report", fills(ws)}, []string{"out=reviewed", passes(ws)})
	l.Contract = true
	rep := run(t, l, "g")
	tr := taskReport(t, rep, taskName)
	if tr.Status != "blocked" || !strings.Contains(tr.Reason, string(loop.FailWorkLogIncomplete)) || !strings.Contains(tr.Reason, "체크포인트 미작성") {
		t.Errorf("task %+v; want blocked by the unfilled block", tr)
	}
	log := read(t, taskPath(ws, worklog.FileName))
	for _, want := range []string{"## 실행 `01_task__p0__worker__a00`", "### 런타임 종료 기록 `01_task__p0__worker__a00`", "- failure_class: `work-log-incomplete`"} {
		if !strings.Contains(log, want) {
			t.Errorf("work log lacks %q:\n%s", want, log)
		}
	}
}

func TestRuntimeLogWriteFailureFinishesLocatorAsBlockedFailure(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, taskName, "src/a.go")
	l := realLoop(t, ws, []string{"out=done"}, nil)
	var worker *retry.Result
	l.OnEvent = func(e loop.Event) {
		switch {
		case e.Type == loop.EventDispatch && e.Dispatch.Type == "worker_runner.started":
			// The disk goes bad while the worker runs: its work log
			// cannot be written any more.
			path := taskPath(ws, worklog.FileName)
			if err := os.Remove(path); err != nil {
				t.Error(err)
			}
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Error(err)
			}
		case e.Type == loop.EventStageEnd:
			worker = e.Verdict
		}
	}
	rep := run(t, l, "g")
	if worker == nil || worker.FailureClass != loop.FailWorkLogWrite || !strings.Contains(worker.EvidenceExcerpt, "is a directory") || worker.Attempts != 1 {
		t.Fatalf("worker stage %+v; want one attempt failed as %s with the error", worker, loop.FailWorkLogWrite)
	}
	tr := taskReport(t, rep, taskName)
	if tr.Status != "blocked" || !strings.Contains(tr.Reason, "the work log could not be written") || rep.ExitCode() != 2 {
		t.Errorf("task %+v, exit %d; want blocked, exit 2", tr, rep.ExitCode())
	}
	// pilot's own record of the worker is closed out: the worker did its
	// part.
	rec, err := pilot.ReadRecord(worker.Record)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != "completed" || rec.EndedAt == nil {
		t.Errorf("record status %q ended %v; want completed and ended", rec.Status, rec.EndedAt)
	}
}

func TestCancelledInvokeFinishesLocatorAndRuntimeRecord(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, taskName, "src/a.go")
	l := realLoop(t, ws, []string{"out=ready", "block"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var worker *retry.Result
	l.OnEvent = func(e loop.Event) {
		switch {
		case e.Type == loop.EventDispatch && e.Dispatch.Type == "worker_runner.started":
			cancel()
		case e.Type == loop.EventStageEnd:
			worker = e.Verdict
		}
	}
	rep, err := l.Run(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if worker == nil || worker.FailureClass != pilot.FailCancelled {
		t.Fatalf("worker stage %+v; want cancelled", worker)
	}
	log := read(t, taskPath(ws, worklog.FileName))
	if !strings.Contains(log, "| FINISH | g/01_task | worker | 0 | pi | failed:cancelled |") {
		t.Errorf("work log lacks the cancelled FINISH row:\n%s", log)
	}
	rec, err := pilot.ReadRecord(worker.Record)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status == "running" || rec.EndedAt == nil || rec.FailureClass != pilot.FailCancelled {
		t.Errorf("record status %q class %q ended %v; want closed out as cancelled", rec.Status, rec.FailureClass, rec.EndedAt)
	}
	// Cut short, the group is not over: neither blocked nor complete.
	if tr := taskReport(t, rep, taskName); tr.Status != "active" || rep.ExitCode() != 3 {
		t.Errorf("task %+v, exit %d; want active, exit 3", tr, rep.ExitCode())
	}
	if b := l.State.Retry.Task(taskName).Blocked; b != "" {
		t.Errorf("a cancelled run blocked the task: %q", b)
	}
}
