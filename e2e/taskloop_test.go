package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/examples/taskloop/loop"
	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
	"github.com/pilotworkers/pilot/examples/taskloop/worklog"
	"github.com/pilotworkers/pilot/internal/fakellm"
	"github.com/pilotworkers/pilot/internal/procfs"
	"github.com/pilotworkers/pilot/retry"
)

// stageMarkers tell the stages' requests apart: a text only that stage's
// prompt (the seed's "prompts") holds.
var stageMarkers = []struct{ stage, marker string }{
	{taskfile.StageWorker, "and implement it"},
	{taskfile.StageSelfcheck, "This is a self-check"},
	{taskfile.StageReview, "and start the review"},
}

// stageTurn reads a chat completions request: the stage whose prompt its
// user messages hold ("" if none or more than one), and the turn of that
// stage's conversation (the assistant messages it carries, from 0).
func stageTurn(body any) (stage string, turn int) {
	msgs, _ := field(body, "messages").([]any)
	var user strings.Builder
	for _, m := range msgs {
		switch field(m, "role") {
		case "assistant":
			turn++
		case "user":
			switch c := field(m, "content").(type) {
			case string:
				user.WriteString(c)
			case []any:
				for _, p := range c {
					if s, ok := field(p, "text").(string); ok {
						user.WriteString(s)
					}
				}
			}
		}
	}
	for _, s := range stageMarkers {
		if strings.Contains(user.String(), s.marker) {
			if stage != "" {
				return "", turn
			}
			stage = s.stage
		}
	}
	return stage, turn
}

func field(v any, name string) any {
	m, _ := v.(map[string]any)
	return m[name]
}

// TestTaskLoopDrivesATaskThroughThreeStagesWithRealPi runs
// examples/taskloop's loop over one task with all three stages on the real
// pi CLI against fakellm: the worker's model writes the file the plan
// names and the review's implementation sections with pi's write tool, the
// self-check's model finds nothing left, the review's model appends the
// official PASS verdict with pi's bash tool. The fake server answers each
// request by the stage prompt it carries and the turn of its conversation
// (Script.Aside), not by arrival order; a request it does not recognise
// finds the script empty and fails.
func TestTaskLoopDrivesATaskThroughThreeStagesWithRealPi(t *testing.T) {
	t.Parallel()
	for _, c := range clisOf("pi") {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runTaskLoop(t, c)
		})
	}
}

// runTaskLoop is TestTaskLoopDrivesATaskThroughThreeStagesWithRealPi on
// one pi generation.
func runTaskLoop(t *testing.T, c cli) {
	bin := c.binary(t)
	seed := taskfile.DefaultSeed()
	for _, s := range stageMarkers {
		if !strings.Contains(seed.Prompts[s.stage], s.marker) {
			t.Fatalf("the seed's %s prompt %q lacks %q, which tells its requests apart", s.stage, seed.Prompts[s.stage], s.marker)
		}
	}

	// One task, e2e/01_hello: a G05 plan that writes src/hello.go, and the
	// review stub.
	const group, name = "e2e", "01_hello"
	task := group + "/" + name
	ws := t.TempDir()
	dir := filepath.Join(ws, "agent-task", group, name)
	h := taskfile.Header{Task: name, Plan: 0, Tag: "HELLO"}
	header := fmt.Sprintf("<!-- task=%s plan=%d tag=%s -->\n", h.Task, h.Plan, h.Tag)
	reviewFile := "CODE_REVIEW-local-G05.md"
	writeFile(t, filepath.Join(dir, "PLAN-local-G05.md"), header+"# Plan - "+name+"\n\nWrite src/hello.go.\n\n"+
		"## 수정 파일 요약\n\n| 파일 | 항목 |\n|---|---|\n| `src/hello.go` | HELLO-1 |\n")
	writeFile(t, filepath.Join(dir, reviewFile), taskfile.ReviewStub(h))

	src := filepath.Join(ws, "src", "hello.go")
	const source = "package src\n\n// Hello is what pi's worker wrote.\nfunc Hello() string { return \"hello from pi\" }\n"
	filled := header + "# Code Review - " + name + "\n\n" +
		"## 구현 항목별 완료 여부\n\n| 항목 | 완료 여부 |\n|---|---|\n| HELLO-1 | [x] |\n\n" +
		"## 구현 체크리스트\n\n- [x] HELLO-1\n- [x] " + seed.ReviewSyncItem + "\n\n" +
		"## 계획 대비 변경 사항\n\n계획대로 구현했다.\n\n## 주요 설계 결정\n\n파일 하나만 썼다.\n\n" +
		"## 검증 결과\n\n결과: PASS (gofmt, exit 0)\n"
	const verdict = "\n## 코드리뷰 결과\n\n- 종합 판정: PASS\n"
	write := func(path, content string) fakellm.Call {
		return fakellm.ToolCall("write", map[string]string{"path": path, "content": content})
	}
	// The review finds the task where the worker left it (the loop
	// archives it only after the review).
	review := filepath.Join(dir, reviewFile)
	script := map[string][]fakellm.Step{
		taskfile.StageWorker: {
			fakellm.Tools(write(src, source), write(review, filled)),
			fakellm.Text("구현 완료: src/hello.go, 리뷰의 구현 섹션을 채웠다."),
		},
		taskfile.StageSelfcheck: {fakellm.Text("자체 점검 완료: 남은 항목 없음.")},
		taskfile.StageReview: {
			fakellm.Tools(fakellm.Bash("bash", "cat >> '"+review+"' <<'EOF'\n"+verdict+"EOF\n")),
			fakellm.Text("리뷰 완료: PASS"),
		},
	}
	srv := fakellm.New(fakellm.Script{Aside: func(r fakellm.Request) (fakellm.Step, bool) {
		stage, turn := stageTurn(r.Body)
		if steps := script[stage]; turn < len(steps) {
			return steps[turn], true
		}
		return fakellm.Step{}, false // to the empty script: exhausted, HTTP 500
	}})
	t.Cleanup(srv.Close)

	guard := newNetGuard(t)
	env := isolatedEnv(t, guard)
	delete(env, "PI_CODING_AGENT_DIR") // the runner gives each worker its own (BaseURL)
	if path := c.workerPath(t); path != "" {
		env["PATH"] = path // the node this pi needs, first
	}
	provider := func(name string) pilot.Provider {
		return pilot.Provider{Name: name, Runner: agents.RunnerPi, Binary: bin, Model: "fake-model",
			CredentialEnv: fakeKeyEnv, Env: maps.Clone(env), BaseURL: srv.URL() + "/v1"}
	}
	reg, err := pilot.NewRegistry(provider("e2e-pi"), provider("e2e-pi-review"))
	if err != nil {
		t.Fatal(err)
	}
	seed.Routes = []taskfile.Route{{MinGrade: 0, MaxGrade: 99, CLI: "pi", Model: "fake-model", Provider: "e2e-pi", ReviewProvider: "e2e-pi-review"}}
	st, err := loop.OpenState(filepath.Join(t.TempDir(), "state"), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var ends []loop.Event
	l := &loop.Loop{
		Workspace: ws,
		Seed:      &seed,
		Dispatcher: &pilot.Dispatcher{
			Runners:     agents.Runners(),
			Providers:   reg,
			RunDir:      t.TempDir(),
			Credentials: config.EnvCredentials{LookupEnv: func(k string) (string, bool) { return fakeKey, k == fakeKeyEnv }},
			Grace:       2 * time.Second,
			Timeout:     2 * time.Minute,
			IdleTimeout: time.Minute,
			LookupEnv: func(k string) (string, bool) {
				if k == "PATH" {
					return os.LookupEnv(k)
				}
				return "", false
			},
		},
		State: st,
		// One attempt per stage: a failure shows at once, not after
		// retries.
		Policy: retry.Policy{MaxFailures: 1, RateLimitRetries: -1},
		RunDir: "", // keep pilot's records: the stage verdicts name them
		OnEvent: func(e loop.Event) {
			if e.Type == loop.EventStageEnd {
				ends = append(ends, e)
			}
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := l.Run(ctx, group)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("report %+v in %v", rep, time.Since(start).Round(time.Millisecond))

	// Each stage's requests got that stage's answers, and nothing else
	// reached the model.
	turns := map[string]int{}
	for _, r := range srv.Requests() {
		switch {
		case r.Aside:
			stage, _ := stageTurn(r.Body)
			turns[stage]++
		case r.Exhausted:
			stage, turn := stageTurn(r.Body)
			t.Errorf("a model request the script has no answer for: stage %q turn %d, %s %s", stage, turn, r.Method, r.Path)
		}
	}
	if want := map[string]int{taskfile.StageWorker: 2, taskfile.StageSelfcheck: 1, taskfile.StageReview: 2}; !maps.Equal(turns, want) {
		t.Errorf("model requests by stage %v, want %v", turns, want)
	}

	for _, e := range ends {
		v := &e.Verdict.Verdict
		t.Logf("%s: %s, provider %s, exit %v, %d ms, record %s", e.Stage, v.Verdict, v.Provider, exitCode(*v), v.DurationMS, v.Record)
		if v.Verdict != pilot.Completed || v.ExitCode == nil || *v.ExitCode != 0 {
			t.Errorf("%s stage: verdict %q exit %v class %q (evidence %q), want completed with exit 0; stderr tail: %s",
				e.Stage, v.Verdict, exitCode(*v), v.FailureClass, v.EvidenceExcerpt, v.StderrTail)
		}
		rec, err := pilot.ReadRecord(v.Record)
		if err != nil {
			t.Errorf("%s stage's record: %v", e.Stage, err)
			continue
		}
		if rec.Runner != agents.RunnerPi || rec.Provider != v.Provider || rec.Status != string(pilot.Completed) {
			t.Errorf("%s stage's record: runner %q provider %q status %q, want runner %q, provider %q, completed",
				e.Stage, rec.Runner, rec.Provider, rec.Status, agents.RunnerPi, v.Provider)
		}
		checkNoKey(t, *v)
		if left := procfs.WithEnv(pilot.EnvRunID + "=" + v.RunID); len(left) > 0 {
			t.Errorf("processes of the %s stage's run %s still alive: %v", e.Stage, v.RunID, left)
		}
	}
	var got []string
	for _, e := range ends {
		got = append(got, e.Stage+" "+e.Verdict.Provider)
	}
	if want := []string{"worker e2e-pi", "selfcheck e2e-pi", "review e2e-pi-review"}; !slices.Equal(got, want) {
		t.Errorf("stage ends %q, want %q", got, want)
	}

	if rep.Status != "complete" || rep.ExitCode() != 0 || len(rep.Tasks) != 1 {
		t.Fatalf("report %+v (exit %d), want the one task complete, exit 0", rep, rep.ExitCode())
	}
	archive := rep.Tasks[0].Archive
	if !regexp.MustCompile(`^agent-task/archive/\d{4}/\d{2}/` + task + `$`).MatchString(relSlash(t, ws, archive)) {
		t.Errorf("archive %s, want agent-task/archive/YYYY/MM/%s", archive, task)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the task's directory is still there after archiving: %v", err)
	}
	if _, err := os.Stat(filepath.Join(archive, loop.CompleteLog)); err != nil {
		t.Errorf("the archive has no %s: %v", loop.CompleteLog, err)
	}
	if got := readFile(t, src); got != source {
		t.Errorf("%s holds %q, want what the worker wrote, %q", src, got, source)
	}
	if got := readFile(t, filepath.Join(archive, reviewFile)); got != filled+verdict {
		t.Errorf("the archived review:\n%s\nwant the worker's sections and the review's verdict:\n%s", got, filled+verdict)
	}
	log := readFile(t, filepath.Join(archive, worklog.FileName))
	for _, want := range []string{
		"| START | " + task + " | worker | 0 | e2e-pi | running |",
		"| FINISH | " + task + " | worker | 0 | e2e-pi | succeeded:0 |",
		"| FINISH | " + task + " | selfcheck | 0 | e2e-pi | succeeded:0 |",
		"| FINISH | " + task + " | review | 0 | e2e-pi-review | succeeded:0 |",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the archived work log lacks %q:\n%s", want, log)
		}
	}
	if g := guard.escapes(); len(g) > 0 {
		t.Errorf("pi asked beyond 127.0.0.1 (refused by the guard): %q", g)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// relSlash is path relative to base, with slashes.
func relSlash(t *testing.T, base, path string) string {
	t.Helper()
	rel, err := filepath.Rel(base, path)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.ToSlash(rel)
}
