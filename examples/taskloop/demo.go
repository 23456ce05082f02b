package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
	"github.com/pilotworkers/pilot/pilottest"
)

// The demo group: four tasks with scripted workers (this program as
// pilottest's fake agent), each task at a grade of its own so that the
// routes send it to its own scripted providers.
//
//   - 01_alpha writes src/alpha.go; its first review asks for a follow-up
//     plan (re-graded G07), whose review passes.
//   - 02_conflict writes ./src/alpha.go too: it waits until alpha is done.
//   - 03+01,02_join depends on both.
//   - 04_gate holds a user review: it stops, and holds nothing else.
const demoGroup = "demo"

// demoTask is one task of the demo: its directory, grade, the file it
// writes, and whether its first review writes a follow-up.
type demoTask struct {
	dir      string
	grade    int
	writes   string
	followUp bool
}

var demoTasks = []demoTask{
	{dir: "01_alpha", grade: 5, writes: "src/alpha.go", followUp: true},
	{dir: "02_conflict", grade: 6, writes: "./src/alpha.go"},
	{dir: "03+01,02_join", grade: 4, writes: "src/join.go"},
}

const demoUserReview = "# User Review Required - 04_gate\n\n" +
	"## 상태\n\nUSER_REVIEW\n\n" +
	"## 사유\n\n- 유형: api-decision\n- 연결 대상: docs/api.md\n\n" +
	"## 차단 근거\n\n- 차단 판단 근거: the public API's owner must choose between two shapes.\n\n" +
	"## 연결 결정 필요\n\n- [ ] pick the API shape\n\n" +
	"## 재개 조건\n\n- remove this file once docs/api.md records the decision\n"

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("taskloop demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "make the demo workspace in `directory` (default: a new temporary directory, kept)")
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout")
	if err := fs.Parse(args); err != nil {
		return exitError
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "taskloop-demo-")
		if err != nil {
			return fail(stderr, "demo: %v", err)
		}
		*dir = d
	}
	ws, err := filepath.Abs(*dir)
	if err != nil {
		return fail(stderr, "demo: %v", err)
	}
	seed, providers, err := writeDemo(ws)
	if err != nil {
		return fail(stderr, "demo: %v", err)
	}
	reg, err := pilot.NewRegistry(providers...)
	if err != nil {
		return fail(stderr, "demo: %v", err)
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "taskloop demo: 4 tasks in %s/agent-task/%s, scripted workers (this program as a fake agent)\n\n", ws, demoGroup)
	}
	o := options{
		workspace: ws, group: demoGroup, seed: seed, registry: reg, asJSON: *asJSON,
		stateDir: filepath.Join(ws, ".taskloop", "state"), runDir: filepath.Join(ws, ".taskloop", "runs"),
		grace: 500 * time.Millisecond, timeout: time.Minute, keepRecords: true,
	}
	if !*asJSON {
		o.progress = stdout
	}
	code := execute(ctx, o, stdout, stderr)
	if !*asJSON {
		fmt.Fprintf(stdout, "\nread: the archives in %s/agent-task/archive/, each with its WORK_LOG.md and complete.log;\n"+
			"      the user review in %s/agent-task/%s/04_gate/USER_REVIEW.md;\n"+
			"      the loop's state in %s/.taskloop/state/ (progress.json, state.json), pilot's run records in %s/.taskloop/runs/\n", ws, ws, demoGroup, ws, ws)
		if code == exitBlocked {
			fmt.Fprintf(stdout, "\nexit 2 is the demo's expected end: 04_gate holds a user-review stop, as a group waiting on a person does\n")
		}
	}
	return code
}

// body is text as a fake agent's write= step takes it (a Go string body).
func body(text string) string {
	q := strconv.Quote(text)
	return q[1 : len(q)-1]
}

// writeDemo lays out the demo's tasks under ws and returns the seed with
// its routes and the scripted providers they name.
func writeDemo(ws string) (taskfile.Seed, []pilot.Provider, error) {
	seed := taskfile.DefaultSeed()
	seed.Routes = nil
	var providers []pilot.Provider
	add := func(name string, script ...string) error {
		p, err := pilottest.FakeAgent(name, script...)
		providers = append(providers, p)
		return err
	}
	group := filepath.Join(ws, "agent-task", demoGroup)
	if _, err := os.Stat(group); err == nil {
		return seed, nil, fmt.Errorf("%s exists already: give the demo a new --dir", group)
	}
	for _, t := range demoTasks {
		dir := filepath.Join(group, t.dir)
		name := strings.SplitN(t.dir, "_", 2)[1]
		h := taskfile.Header{Task: t.dir, Plan: 0, Tag: strings.ToUpper(name)}
		if err := writePlan(dir, t.grade, h, t.writes); err != nil {
			return seed, nil, err
		}
		pname := "demo-" + name // a provider name of its own
		route := taskfile.Route{MinGrade: t.grade, MaxGrade: t.grade, CLI: "fake", Provider: pname, ReviewProvider: pname + "-review"}
		seed.Routes = append(seed.Routes, route)
		if err := add(pname, implement(dir, t.grade, h, t.writes, ws)...); err != nil {
			return seed, nil, err
		}
		review := pass(dir, t.grade)
		if t.followUp {
			// The follow-up is re-graded G07: its own route and
			// providers, whose review passes.
			next := taskfile.Header{Task: h.Task, Plan: 1, Tag: h.Tag}
			review = followUp(dir, t.grade, 7, next, t.writes)
			seed.Routes = append(seed.Routes, taskfile.Route{MinGrade: 7, MaxGrade: 7, CLI: "fake", Provider: pname + "-2", ReviewProvider: pname + "-2-review"})
			if err := add(pname+"-2", implement(dir, 7, next, t.writes, ws)...); err != nil {
				return seed, nil, err
			}
			if err := add(pname+"-2-review", pass(dir, 7)...); err != nil {
				return seed, nil, err
			}
		}
		if err := add(pname+"-review", review...); err != nil {
			return seed, nil, err
		}
	}
	gate := filepath.Join(group, "04_gate", "USER_REVIEW.md")
	if err := os.MkdirAll(filepath.Dir(gate), 0o755); err != nil {
		return seed, nil, err
	}
	return seed, providers, os.WriteFile(gate, []byte(demoUserReview), 0o644)
}

func planName(grade int) string   { return fmt.Sprintf("PLAN-local-G%02d.md", grade) }
func reviewName(grade int) string { return fmt.Sprintf("CODE_REVIEW-local-G%02d.md", grade) }

func headerLine(h taskfile.Header) string {
	return fmt.Sprintf("<!-- task=%s plan=%d tag=%s -->\n", h.Task, h.Plan, h.Tag)
}

func planText(h taskfile.Header, writes, what string) string {
	return headerLine(h) + "# Plan - " + h.Task + "\n\n" + what + "\n\n## 수정 파일 요약\n\n| 파일 | 항목 |\n|---|---|\n| `" + writes + "` | " + h.Tag + "-1 |\n"
}

func writePlan(dir string, grade int, h taskfile.Header, writes string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, planName(grade)), []byte(planText(h, writes, "Write "+writes+".")), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, reviewName(grade)), []byte(taskfile.ReviewStub(h)), 0o644)
}

// implement is a worker's script: it works a little, writes the file its
// plan names, and fills the review's implementation sections.
func implement(dir string, grade int, h taskfile.Header, writes, ws string) []string {
	filled := headerLine(h) + "# Code Review - " + h.Task + "\n\n" +
		"## 구현 항목별 완료 여부\n\n| 항목 | 완료 여부 |\n|---|---|\n| " + h.Tag + "-1 | [x] |\n\n" +
		"## 구현 체크리스트\n\n- [x] " + h.Tag + "-1\n- [x] CODE_REVIEW-*-G??.md의 구현 에이전트 소유 섹션을 채운다.\n\n" +
		"## 계획 대비 변경 사항\n\n계획대로 구현했다.\n\n## 주요 설계 결정\n\n파일 하나만 바꿨다.\n\n" +
		"## 검증 결과\n\n결과: PASS (go vet, exit 0)\n"
	return []string{
		"tick=3/150ms",
		"write=" + filepath.Join(ws, filepath.FromSlash(strings.TrimPrefix(writes, "./"))) + "=" + body("package src // "+h.Task+" plan "+strconv.Itoa(h.Plan)+"\n"),
		"write=" + filepath.Join(dir, reviewName(grade)) + "=" + body(filled),
		"out=implemented " + h.Task,
	}
}

// pass is a review's script that passes the task.
func pass(dir string, grade int) []string {
	return []string{
		"tick=2/150ms",
		"append=" + filepath.Join(dir, reviewName(grade)) + "=" + body("\n## 코드리뷰 결과\n\n- 종합 판정: PASS\n"),
		"out=review: PASS",
	}
}

// followUp is a review's script that asks for more: the plan and review
// go to their logs, a follow-up plan (re-graded) and its review stub take
// their place.
func followUp(dir string, grade, nextGrade int, next taskfile.Header, writes string) []string {
	return []string{
		"tick=2/150ms",
		"append=" + filepath.Join(dir, reviewName(grade)) + "=" + body("\n## 코드리뷰 결과\n\n- 종합 판정: WARN\n- 후속: error paths are untested; follow-up plan 1\n"),
		"move=" + filepath.Join(dir, planName(grade)) + "=" + filepath.Join(dir, fmt.Sprintf("plan_local_G%02d_0.log", grade)),
		"move=" + filepath.Join(dir, reviewName(grade)) + "=" + filepath.Join(dir, fmt.Sprintf("code_review_local_G%02d_0.log", grade)),
		"write=" + filepath.Join(dir, planName(nextGrade)) + "=" + body(planText(next, writes, "Test the error paths of "+writes+".")),
		"write=" + filepath.Join(dir, reviewName(nextGrade)) + "=" + body(taskfile.ReviewStub(next)),
		"out=review: WARN, follow-up plan 1",
	}
}
