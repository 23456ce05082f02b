package loop_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/taskloop/loop"
	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/retry"
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(secondLoopEnv); cfg != "" {
		os.Exit(secondLoop(cfg)) // this process is a task loop of its own
	}
	pilottest.Main(m)
}

var seed = taskfile.DefaultSeed()

const writeSetTable = "## 수정 파일 요약\n\n| 파일 | 항목 |\n|---|---|\n"

func write(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
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

// workspace is a repository root with an agent-task directory.
func workspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "agent-task"), 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}

// addTask writes agent-task/<name>/ with a local G05 plan writing src and
// an empty review, both with the header (the seed's write_task); review
// text, when given, replaces the review.
func addTask(t *testing.T, ws, name, src string, review ...string) string {
	t.Helper()
	dir := filepath.Join(ws, "agent-task", filepath.FromSlash(name))
	header := fmt.Sprintf("<!-- task=%s plan=0 tag=SIM -->\n", filepath.Base(name))
	plan := header
	if src != "" {
		plan += writeSetTable + "| `" + src + "` | SIM-1 |\n"
	}
	write(t, filepath.Join(dir, "PLAN-local-G05.md"), plan)
	r := header
	if len(review) > 0 {
		r = review[0]
	}
	write(t, filepath.Join(dir, "CODE_REVIEW-local-G05.md"), r)
	return dir
}

const blockingUserReview = "# User Review Required - gate\n\n" +
	"## 상태\n\nUSER_REVIEW\n\n" +
	"## 사유\n\n- 유형: milestone-lock\n- 연결 대상: agent-roadmap/phase/p/milestones/m.md\n\n" +
	"## 차단 근거\n\n- 차단 판단 근거: API ownership decision blocks implementation.\n\n" +
	"## 연결 결정 필요\n\n- [ ] API ownership 선택\n\n" +
	"## 재개 조건\n\n- Milestone 결정 반영 후 재개\n"

// filledReview is a review whose implementation sections are complete.
func filledReview(header string) string {
	return header + "## 구현 항목별 완료 여부\n\n| 항목 | 완료 여부 |\n|---|---|\n| SIM-1 | [x] |\n\n" +
		"## 구현 체크리스트\n\n- [x] SIM-1\n- [x] CODE_REVIEW-*-G??.md의 구현 에이전트 소유 섹션을 채운다.\n\n" +
		"## 계획 대비 변경 사항\n\n계획과 동일하게 구현했다.\n\n## 주요 설계 결정\n\n없는 것을 만들지 않았다.\n\n" +
		"## 검증 결과\n\n결과: PASS (exit 0)\n"
}

func withVerdict(review, verdict string) string {
	return review + "\n## 코드리뷰 결과\n\n- 종합 판정: " + verdict + "\n"
}

// The paths of a task directory's files.
func planOf(dir string) string   { return filepath.Join(dir, "PLAN-local-G05.md") }
func reviewOf(dir string) string { return filepath.Join(dir, "CODE_REVIEW-local-G05.md") }

// A call is one stage attempt the fake saw.
type call struct {
	Task, Stage      string
	Dir              string // the task's directory
	Provider, Prompt string
	Resume           string
}

// fake is the stage dispatcher of the tests: act says what each attempt
// does; by default a worker fills the review, a selfcheck does nothing
// and a review passes.
type fake struct {
	t     *testing.T
	mu    sync.Mutex
	calls []call
	act   func(ctx context.Context, c call, n int, t pilot.Task) pilot.Verdict
	// counts of attempts by task and stage
	n map[string]int
}

func newFake(t *testing.T, act func(ctx context.Context, c call, n int, t pilot.Task) pilot.Verdict) *fake {
	return &fake{t: t, act: act, n: map[string]int{}}
}

func (f *fake) Dispatch(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
	task, stage, _ := strings.Cut(t.Label, " ")
	c := call{Task: task, Stage: stage, Provider: t.Provider, Prompt: t.Prompt, Resume: t.Resume,
		Dir: filepath.Join(t.Workdir, "agent-task", filepath.FromSlash(task))}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	n := f.n[t.Label]
	f.n[t.Label]++
	f.mu.Unlock()
	if f.act != nil {
		if v := f.act(ctx, c, n, t); v.Type != "" {
			return v, nil
		}
	}
	return defaultAct(f.t, c, t), nil
}

func (f *fake) count(task, stage string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[task+" "+stage]
}

func (f *fake) all() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// taskDir is the directory of the call's task.
func taskDir(_ *testing.T, c call) string { return c.Dir }

func defaultAct(t *testing.T, c call, pt pilot.Task) pilot.Verdict {
	if err := play(c); err != nil {
		t.Fatal(err)
	}
	return ok(pt)
}

// play does what a scripted attempt of the call's stage does to its task:
// a worker fills the review, a selfcheck nothing, a review passes.
func play(c call) error {
	switch c.Stage {
	case taskfile.StageWorker:
		rev, err := os.ReadFile(reviewOf(c.Dir))
		if err != nil {
			return err
		}
		h, _ := taskfile.ParseHeader(string(rev))
		return os.WriteFile(reviewOf(c.Dir), []byte(filledReview(fmt.Sprintf("<!-- task=%s plan=%d tag=%s -->\n", h.Task, h.Plan, h.Tag))), 0o644)
	case taskfile.StageReview:
		data, err := os.ReadFile(reviewOf(c.Dir))
		if err != nil {
			return err
		}
		rev := string(data)
		if i := strings.Index(rev, "\n## 코드리뷰 결과\n"); i >= 0 {
			rev = rev[:i] // the review rewrites its verdict
		}
		return os.WriteFile(reviewOf(c.Dir), []byte(withVerdict(rev, "PASS")), 0o644)
	}
	return nil
}

func ok(t pilot.Task) pilot.Verdict {
	zero := 0
	return pilot.Verdict{Type: "worker_runner.verdict", Provider: t.Provider, Mode: t.Mode, Label: t.Label, Verdict: pilot.Completed, ExitCode: &zero}
}

func failed(t pilot.Task, class pilot.FailureClass) pilot.Verdict {
	one := 1
	return pilot.Verdict{Type: "worker_runner.verdict", Provider: t.Provider, Mode: t.Mode, Label: t.Label, Verdict: pilot.Failed,
		ExitCode: &one, Failure: pilot.Failure{FailureClass: class, EvidenceExcerpt: "scripted " + string(class)}}
}

// clock records the retry waits instead of waiting.
type clock struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (c *clock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return ctx.Err()
}

func (c *clock) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waits)
}

// routes send every grade to the provider "pi", reviews to "codex".
func testSeed() *taskfile.Seed {
	s := taskfile.DefaultSeed()
	s.Routes = []taskfile.Route{{MinGrade: 0, MaxGrade: 99, CLI: "pi", Provider: "pi", ReviewProvider: "codex"}}
	return &s
}

func openState(t *testing.T, dir string) *loop.State {
	t.Helper()
	st, err := loop.OpenState(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newLoop is a loop over ws with the fake d, its state in a directory of
// its own, retries waiting on c.
func newLoop(t *testing.T, ws string, d pilot.TaskDispatcher, c *clock) *loop.Loop {
	t.Helper()
	if c == nil {
		c = &clock{}
	}
	return &loop.Loop{
		Workspace:  ws,
		Seed:       testSeed(),
		Dispatcher: d,
		State:      openState(t, filepath.Join(t.TempDir(), "state")),
		Policy:     retry.Policy{Sleep: c.sleep},
	}
}

func run(t *testing.T, l *loop.Loop, group string) loop.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := l.Run(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func taskReport(t *testing.T, rep loop.Report, name string) loop.TaskReport {
	t.Helper()
	for _, tr := range rep.Tasks {
		if tr.Name == name {
			return tr
		}
	}
	t.Fatalf("no task %s in the report %+v", name, rep)
	return loop.TaskReport{}
}
