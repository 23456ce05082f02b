package worklog_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot/examples/taskloop/worklog"
)

const execID = "test__p0__worker__a00"

// The seed's completed_replacements: what a worker writes into its block.
var completed = [][2]string{
	{"### 목표와 범위\n\n- 미작성", "### 목표와 범위\n\n- PLAN 범위 구현 및 검증"},
	{"### 체크포인트\n\n- 기록 없음", "### 체크포인트\n\n- 2026-07-24T00:01:00Z | 구현 | 완료 | 핵심 경로 수정 | evidence=`src/test.go` | next=검증"},
	{"### 예상 밖 이슈\n\n- 기록 없음", "### 예상 밖 이슈\n\n- 2026-07-24T00:02:00Z | correctness | 계획 밖 race 가능성 | impact=동시성 오류 | action=수정 및 테스트 | disposition=해결"},
	{"### 검증\n\n- 기록 없음", "### 검증\n\n- `go test ./...` - PASS"},
	{"- 상태: 미작성", "- 상태: 완료"},
	{"- 요약: 미작성", "- 요약: 구현 및 검증 완료"},
	{"- 완료 항목: 미작성", "- 완료 항목: 계획 체크리스트 전체"},
	{"- 변경 파일: 미작성", "- 변경 파일: `src/test.go`"},
	{"- 검증: 미작성", "- 검증: `go test ./...` PASS"},
	{"- 미해결/후속: 미작성", "- 미해결/후속: 없음"},
	{"- 예상 밖 이슈 요약: 미작성", "- 예상 밖 이슈 요약: race 가능성 수정 완료"},
	{"- CODE_REVIEW 동기화: 미작성", "- CODE_REVIEW 동기화: 완료"},
}

func appendAttempt(t *testing.T, dir string) string {
	t.Helper()
	path, err := worklog.DefaultContract().AppendAttempt(filepath.Join(dir, worklog.FileName), worklog.Attempt{
		ExecutionID: execID, Stage: "worker", CLI: "pi", Model: "ornith:35b",
		Record: filepath.Join(dir, "record.json"), StartedAt: time.Date(2026, 7, 24, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// completedLog is the seed's make_completed_log.
func completedLog(t *testing.T) string {
	t.Helper()
	path := appendAttempt(t, t.TempDir())
	text := read(t, path)
	for _, r := range completed {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("the attempt block lacks %q:\n%s", r[0], text)
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	write(t, path, text)
	return path
}

func result(t *testing.T, path string) (string, []string) {
	t.Helper()
	status, errs, err := worklog.DefaultContract().AttemptResult(path, execID)
	if err != nil {
		t.Fatal(err)
	}
	return status, errs
}

func TestTemplateAndAttemptRequireCheckpointsAndFinalReport(t *testing.T) {
	path := appendAttempt(t, t.TempDir())
	text := read(t, path)
	if strings.Contains(text, "<!--") || strings.Contains(text, "{execution_id}") {
		t.Errorf("the rendered block keeps the template's comment or a placeholder:\n%s", text)
	}
	if !strings.Contains(text, "## 실행 `"+execID+"`") {
		t.Errorf("no heading for %s:\n%s", execID, text)
	}
	status, errs := result(t, path)
	if status != "" || !slices.Contains(errs, "체크포인트 미작성") || !slices.Contains(errs, "최종 리포트 상태 미작성") {
		t.Errorf("status %q errors %q; want no status, checkpoints and report status missing", status, errs)
	}
}

func TestCompletedAttemptPreservesUnexpectedIssueAndRuntimeResult(t *testing.T) {
	path := completedLog(t)
	status, errs := result(t, path)
	if status != "완료" || len(errs) != 0 {
		t.Fatalf("status %q errors %q; want 완료 and none", status, errs)
	}
	if err := worklog.DefaultContract().AppendRuntimeResult(path, execID, "0", "", "/runs/x/record.json"); err != nil {
		t.Fatal(err)
	}
	text := read(t, path)
	for _, want := range []string{"계획 밖 race 가능성", "### 런타임 종료 기록 `" + execID + "`", "- failure_class: `none`"} {
		if !strings.Contains(text, want) {
			t.Errorf("work log lacks %q:\n%s", want, text)
		}
	}
	if status, errs := result(t, path); status != "완료" || len(errs) != 0 {
		t.Errorf("after the runtime record: status %q errors %q", status, errs)
	}
}

func TestCheckpointCannotBeReplacedWithNone(t *testing.T) {
	path := completedLog(t)
	write(t, path, strings.Replace(read(t, path), completed[1][1], "### 체크포인트\n\n- 없음", 1))
	status, errs := result(t, path)
	if status != "완료" || !slices.Contains(errs, "체크포인트 형식 불일치") {
		t.Errorf("status %q errors %q; want 완료 with a checkpoint format error", status, errs)
	}
}

func TestUnexpectedIssueAcceptsExplicitNone(t *testing.T) {
	path := completedLog(t)
	write(t, path, strings.Replace(read(t, path), completed[2][1], "### 예상 밖 이슈\n\n- 없음", 1))
	if status, errs := result(t, path); status != "완료" || len(errs) != 0 {
		t.Errorf("status %q errors %q; want 완료 and none", status, errs)
	}
}

func TestCodeReviewSyncMustBeExactlyComplete(t *testing.T) {
	path := completedLog(t)
	write(t, path, strings.Replace(read(t, path), "- CODE_REVIEW 동기화: 완료", "- CODE_REVIEW 동기화: 실패", 1))
	status, errs := result(t, path)
	if status != "완료" || !slices.Contains(errs, "최종 리포트 CODE_REVIEW 동기화는 완료여야 한다") {
		t.Errorf("status %q errors %q; want the sync error", status, errs)
	}
}

func TestPromptRequiresCheckpointsUnexpectedIssuesAndFinalReport(t *testing.T) {
	p := worklog.DefaultContract().Prompt("/tmp/task/WORK_LOG.md", "task__p0__worker__a00")
	for _, want := range []string{"checkpoint after each meaningful phase", "unexpected issues", "최종 리포트", "CODE_REVIEW", "/tmp/task/WORK_LOG.md", "task__p0__worker__a00"} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q: %s", want, p)
		}
	}
}

func TestStateLossSkipsExecutionIdAlreadyPresentInWorkLog(t *testing.T) {
	path := completedLog(t) // names test__p0__worker__a00
	calls := 0
	next := func() (int, error) { calls++; return calls - 1, nil } // the store starts over at 0
	n, id, err := worklog.NextExecution(path, next, func(n int) string { return worklog.ExecutionID("test", 0, "worker", n) })
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || id != "test__p0__worker__a01" || calls != 2 {
		t.Errorf("attempt %d id %s after %d calls; want 1, test__p0__worker__a01, 2", n, id, calls)
	}
}

func TestWorkLogTimestampUsesKstOffset(t *testing.T) {
	if got := worklog.Format(time.Date(2026, 7, 24, 0, 0, 0, 0, time.UTC)); got != "2026-07-24T09:00:00+09:00" {
		t.Errorf("Format = %s, want 2026-07-24T09:00:00+09:00", got)
	}
	if !regexp.MustCompile(`\+09:00$`).MatchString(worklog.Format(time.Now())) {
		t.Errorf("Format(now) = %s, want a +09:00 offset", worklog.Format(time.Now()))
	}
}

func TestExistingMilestoneLogIsPreservedAndExtended(t *testing.T) {
	path := filepath.Join(t.TempDir(), worklog.FileName)
	write(t, path, "# malformed\nno newline at the end")
	at := time.Date(2026, 7, 24, 0, 0, 0, 0, time.UTC)
	for i, e := range []worklog.Entry{
		{Time: at, Event: worklog.Start, Task: "test", Stage: "worker", CLI: "pi", Status: "running", ExecutionID: execID},
		{Time: at, Event: worklog.Finish, Task: "test", Stage: "worker", CLI: "pi", Status: "succeeded:0", ExecutionID: execID, Record: "/r/record.json"},
	} {
		if err := worklog.Append(path, e); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	// A worker writes below the timeline; the next row still goes into
	// the table.
	write(t, path, read(t, path)+"\nnotes the worker added\n")
	if err := worklog.Append(path, worklog.Entry{Time: at, Event: worklog.Start, Task: "test", Stage: "selfcheck", Attempt: 0, CLI: "pi", Status: "running", ExecutionID: "test__p0__selfcheck__a00"}); err != nil {
		t.Fatal(err)
	}
	text := read(t, path)
	for _, want := range []string{
		"# malformed\nno newline at the end\n",
		"## Dispatcher Timeline",
		"Dispatcher-owned execution timeline",
		"| 1 | 2026-07-24T09:00:00+09:00 | START | test | worker | 0 | pi | running |",
		"| 2 | 2026-07-24T09:00:00+09:00 | FINISH | test | worker | 0 | pi | succeeded:0 |",
		"| 3 | 2026-07-24T09:00:00+09:00 | START | test | selfcheck | 0 | pi | running |",
		"notes the worker added",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("work log lacks %q:\n%s", want, text)
		}
	}
	if strings.Index(text, "| 3 |") > strings.Index(text, "notes the worker added") {
		t.Errorf("row 3 went below the worker's notes, out of the table:\n%s", text)
	}
	if strings.Count(text, worklog.TimelineHeading) != 1 {
		t.Errorf("the timeline heading appears %d times", strings.Count(text, worklog.TimelineHeading))
	}
	if ok, err := worklog.Has(path, execID); err != nil || !ok {
		t.Errorf("Has(%s) = %v, %v; want true", execID, ok, err)
	}
}

func TestAttemptBlockGoesAboveTheTimeline(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, worklog.FileName)
	if err := worklog.Append(path, worklog.Entry{Time: time.Now(), Event: worklog.Start, Task: "t", Stage: "worker", Status: "running", ExecutionID: execID}); err != nil {
		t.Fatal(err)
	}
	appendAttempt(t, dir)
	text := read(t, path)
	if strings.Index(text, "## 실행") > strings.Index(text, worklog.TimelineHeading) {
		t.Errorf("the attempt block went below the timeline:\n%s", text)
	}
	if status, errs := result(t, path); status != "" || len(errs) == 0 {
		t.Errorf("an unfilled block: status %q errors %q", status, errs)
	}
}
