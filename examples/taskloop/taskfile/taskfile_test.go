package taskfile_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
	"github.com/pilotworkers/pilot/schedule"
)

// The seed's TaskStageTest and the task-file parts of its WriteSetTest,
// each named as the seed names it.

var seed = taskfile.DefaultSeed()

func write(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// makeTask is the seed's make_task: a local G05 plan with a header and a
// review holding reviewText.
func makeTask(t *testing.T, reviewText string) taskfile.Task {
	t.Helper()
	root := t.TempDir()
	return taskfile.Task{
		Name:   "test",
		Dir:    root,
		Plan:   write(t, filepath.Join(root, "PLAN-local-G05.md"), "<!-- task=test plan=0 tag=TEST -->\n"),
		Review: write(t, filepath.Join(root, "CODE_REVIEW-local-G05.md"), reviewText),
		Lane:   "local",
		Grade:  5,
	}
}

const blockingUserReview = "# User Review Required - test\n\n" +
	"## 상태\n\nUSER_REVIEW\n\n" +
	"## 사유\n\n" +
	"- 유형: milestone-lock\n" +
	"- 연결 대상: agent-roadmap/phase/p/milestones/m.md\n\n" +
	"## 차단 근거\n\n" +
	"- 차단 판단 근거: API ownership decision blocks implementation.\n\n" +
	"## 연결 결정 필요\n\n" +
	"- [ ] API ownership 선택\n\n" +
	"## 재개 조건\n\n" +
	"- Milestone 결정 반영 후 재개\n"

func stage(t *testing.T, task taskfile.Task, p taskfile.Progress) string {
	t.Helper()
	s, err := seed.Stage(task, p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDefaultOrArbitraryStatusTextDoesNotStartReview(t *testing.T) {
	task := makeTask(t, "## 사용자 리뷰 요청\n- 상태: 없음\n## unrelated\n- 상태: 확인 필요\n")
	if got := stage(t, task, taskfile.Progress{}); got != taskfile.StageWorker {
		t.Errorf("stage %q, want worker", got)
	}
}

func TestVerdictTextOutsideOfficialSectionDoesNotStartReview(t *testing.T) {
	task := makeTask(t, "## 검증 결과\n명령 출력 예시: 종합 판정: PASS\n")
	if got := stage(t, task, taskfile.Progress{}); got != taskfile.StageWorker {
		t.Errorf("stage %q, want worker", got)
	}
}

func TestExactOfficialVerdictSectionStartsReviewRecovery(t *testing.T) {
	task := makeTask(t, "## 코드리뷰 결과\n- **종합 판정**: WARN\n")
	if got := stage(t, task, taskfile.Progress{}); got != taskfile.StageReview {
		t.Errorf("stage %q, want review", got)
	}
}

// userReviewOnly is a task with only a USER_REVIEW.md of text, recovering.
func userReviewOnly(t *testing.T, text string) taskfile.Task {
	task := makeTask(t, "- 상태: 없음\n")
	task.UserReview = write(t, filepath.Join(task.Dir, "USER_REVIEW.md"), text)
	task.Plan, task.Review, task.Recovery = "", "", true
	return task
}

func TestOnlyExplicitUserReviewFileStopsTheLoop(t *testing.T) {
	if got := stage(t, userReviewOnly(t, blockingUserReview), taskfile.Progress{}); got != taskfile.StageUserReview {
		t.Errorf("stage %q, want user-review", got)
	}
}

func TestUserReviewWithoutBlockingContractIsStateBlocked(t *testing.T) {
	if got := stage(t, userReviewOnly(t, "## 상태\n\nUSER_REVIEW\n"), taskfile.Progress{}); got != taskfile.StageBlocked {
		t.Errorf("stage %q, want blocked", got)
	}
}

func TestUserReviewWithActivePairIsStateBlocked(t *testing.T) {
	task := makeTask(t, "")
	task.UserReview = write(t, filepath.Join(task.Dir, "USER_REVIEW.md"), blockingUserReview)
	if got := stage(t, task, taskfile.Progress{}); got != taskfile.StageBlocked {
		t.Errorf("stage %q, want blocked", got)
	}
}

func TestUserReviewOnlyDirectoryWithoutLogsIsReadable(t *testing.T) {
	ws := t.TempDir()
	dir := filepath.Join(ws, "agent-task", "group", "01_gate")
	write(t, filepath.Join(dir, "USER_REVIEW.md"), blockingUserReview)
	task, ok, err := seed.Read(ws, dir)
	if err != nil || !ok {
		t.Fatalf("Read: %v %v", ok, err)
	}
	if task.Name != "group/01_gate" || task.Index != 1 {
		t.Errorf("task %+v", task)
	}
	if got := stage(t, task, taskfile.Progress{}); got != taskfile.StageUserReview {
		t.Errorf("stage %q, want user-review", got)
	}
}

func TestUserReviewNoneValuesDoNotFormAValidStop(t *testing.T) {
	text := "## 상태\n\nUSER_REVIEW\n\n## 사유\n\n- 유형: milestone-lock\n- 연결 대상: 없음\n\n" +
		"## 차단 근거\n\n- 차단 판단 근거: 없음\n\n## 연결 결정 필요\n\n- [ ] 없음\n\n## 재개 조건\n\n- 없음\n"
	if got := stage(t, userReviewOnly(t, text), taskfile.Progress{}); got != taskfile.StageBlocked {
		t.Errorf("stage %q, want blocked", got)
	}
}

func TestCompletedImplementationChecklistStartsReview(t *testing.T) {
	task := makeTask(t, "- [x] CODE_REVIEW-*-G??.md의 구현 에이전트 소유 섹션을 채운다.\n")
	if got := stage(t, task, taskfile.Progress{}); got != taskfile.StageReview {
		t.Errorf("stage %q, want review", got)
	}
}

func TestPiWorkerSuccessRequiresSelfcheckBeforeReview(t *testing.T) {
	task := makeTask(t, "")
	if got := stage(t, task, taskfile.Progress{WorkerDone: true}); got != taskfile.StageSelfcheck {
		t.Errorf("after the worker: %q, want selfcheck", got)
	}
	if got := stage(t, task, taskfile.Progress{WorkerDone: true, SelfcheckDone: true}); got != taskfile.StageReview {
		t.Errorf("after the selfcheck: %q, want review", got)
	}
}

func TestLocalRouteGradeBoundaries(t *testing.T) {
	want := map[int]taskfile.Route{
		5:  {CLI: "pi", Model: "ornith-fast", LocalPi: true},
		6:  {CLI: "pi", Model: "ornith-fast", LocalPi: true},
		7:  {CLI: "pi", Model: "laguna-s:2.1", LocalPi: true},
		8:  {CLI: "pi", Model: "laguna-s:2.1", LocalPi: true},
		9:  {CLI: "claude", Model: "claude-opus-4-8"},
		10: {CLI: "claude", Model: "claude-opus-4-8"},
	}
	for grade, w := range want {
		r, ok := seed.Route(grade)
		if !ok || r.CLI != w.CLI || r.Model != w.Model || r.LocalPi != w.LocalPi {
			t.Errorf("grade %d: %+v, want %+v", grade, r, w)
		}
	}
}

func TestSelfcheckRequiresAllImplementationReviewFields(t *testing.T) {
	review := "## 구현 항목별 완료 여부\n\n| 항목 | 완료 여부 |\n|---|---|\n| TEST-1 | [ ] |\n\n" +
		"## 구현 체크리스트\n\n- [ ] TEST-1\n- [ ] CODE_REVIEW-*-G??.md의 구현 에이전트 소유 섹션을 채운다.\n\n" +
		"## 계획 대비 변경 사항\n\n_미작성_\n\n## 주요 설계 결정\n\n_미작성_\n\n## 검증 결과\n\n결과:\n_미실행_\n"
	want := []string{"구현 체크리스트 미완료", "구현 항목 완료 여부 미작성", "계획 대비 변경 사항 미작성",
		"주요 설계 결정 미작성", "검증 결과 미작성", "CODE_REVIEW 동기화 체크 미완료"}
	if diff := cmp.Diff(want, seed.ImplementationReviewErrors(review)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestSelfcheckAcceptsFilledImplementationReviewFields(t *testing.T) {
	review := "## 구현 항목별 완료 여부\n\n| 항목 | 완료 여부 |\n|---|---|\n| TEST-1 | [x] |\n\n" +
		"## 구현 체크리스트\n\n- [x] TEST-1\n- [x] CODE_REVIEW-*-G??.md의 구현 에이전트 소유 섹션을 채운다.\n\n" +
		"## 계획 대비 변경 사항\n\n계획과 동일하게 구현했다.\n\n## 주요 설계 결정\n\n상태 전이를 직렬화했다.\n\n" +
		"## 검증 결과\n\n결과: PASS (exit 0)\n"
	if errs := seed.ImplementationReviewErrors(review); len(errs) != 0 {
		t.Errorf("errors %q, want none", errs)
	}
}

const writeSetTable = "## 수정 파일 요약\n\n| 파일 | 항목 |\n|---|---|\n"

func TestNormalizesRelativeAndAbsoluteAliases(t *testing.T) {
	ws := t.TempDir()
	source := write(t, filepath.Join(ws, "src", "shared.go"), "package src\n")
	rel := seed.WriteSetPaths(writeSetTable + "| `./src/shared.go` | TEST-1 |\n")
	abs := seed.WriteSetPaths(writeSetTable + "| `" + source + "` | TEST-1 |\n")
	r, rk, _ := schedule.WriteSet(ws, rel)
	a, ak, _ := schedule.WriteSet(ws, abs)
	real, _ := filepath.EvalSymlinks(source)
	if !rk || !ak || !slices.Equal(r, a) || !slices.Equal(r, []string{real}) {
		t.Errorf("relative %q (%v), absolute %q (%v); want both [%s]", r, rk, a, ak, real)
	}
}

func TestRecoveryRestoresWriteSetFromMatchingArchivedPlan(t *testing.T) {
	ws := t.TempDir()
	dir := filepath.Join(ws, "agent-task", "recovery")
	header := "<!-- task=recovery plan=2 tag=REVIEW_TEST -->\n"
	write(t, filepath.Join(dir, "plan_local_G05_2.log"), header+writeSetTable+"| `src/recovery.go` | TEST-1 |\n")
	write(t, filepath.Join(dir, "code_review_local_G05_2.log"), header+"## 코드리뷰 결과\n- 종합 판정: WARN\n")
	write(t, filepath.Join(dir, "plan_cloud_G09_3.log"), "<!-- task=recovery plan=3 tag=OTHER -->\n"+writeSetTable+"| `src/unrelated.go` | OTHER-1 |\n")
	task, ok, err := seed.Read(ws, dir)
	if err != nil || !ok {
		t.Fatalf("Read: %v %v", ok, err)
	}
	if !task.Recovery || !task.WriteSetKnown || !slices.Equal(task.WriteSet, []string{"src/recovery.go"}) {
		t.Errorf("task %+v; want recovery with the matching plan's write set", task)
	}
}

func TestRecoveryWithoutMatchingPlanDoesNotBlockDispatch(t *testing.T) {
	ws := t.TempDir()
	dir := filepath.Join(ws, "agent-task", "recovery")
	write(t, filepath.Join(dir, "code_review_local_G05_2.log"), "<!-- task=recovery plan=2 tag=REVIEW_TEST -->\n## 코드리뷰 결과\n- 종합 판정: WARN\n")
	task, ok, err := seed.Read(ws, dir)
	if err != nil || !ok {
		t.Fatalf("Read: %v %v (a recovering task must still be read)", ok, err)
	}
	if task.WriteSetKnown || !task.Recovery {
		t.Errorf("task %+v; want recovery with an unknown write set", task)
	}
}

// Directory names give dependencies: "03+01,02_join" is index 3 on 1 and 2.
func TestDependenciesComeFromTheDirectoryName(t *testing.T) {
	ws := t.TempDir()
	dir := filepath.Join(ws, "agent-task", "sim", "03+01,02_join")
	write(t, filepath.Join(dir, "PLAN-local-G05.md"), "<!-- task=sim/03+01,02_join plan=0 tag=SIM -->\n"+writeSetTable+"| `src/join.go` | SIM-1 |\n")
	task, ok, err := seed.Read(ws, dir)
	if err != nil || !ok || task.Index != 3 || !slices.Equal(task.Deps, []int{1, 2}) || task.Header.Tag != "SIM" || task.Grade != 5 || task.Lane != "local" {
		t.Errorf("task %+v (%v, %v)", task, ok, err)
	}
}

// The embedded seed data reads; another file of its shape with an unknown
// field is refused, naming it.
func TestSeedDataIsData(t *testing.T) {
	path := write(t, filepath.Join(t.TempDir(), "seed.json"), `{"write_set_section": "Files", "bogus": 1}`)
	if _, err := taskfile.LoadSeed(path); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("LoadSeed = %v; want an error naming the unknown field", err)
	}
}

// FuzzTaskFileText: any task-file text is read without a panic by every
// reader of it; a stop needs its status line.
func FuzzTaskFileText(f *testing.F) {
	f.Add(blockingUserReview)
	f.Add("## 코드리뷰 결과\n- **종합 판정**: WARN\n")
	f.Add(writeSetTable + "| `a.go` | X |\n| `` | |\n|\n")
	f.Add("<!-- task=a plan=99999999999999999999 tag=T -->")
	f.Fuzz(func(t *testing.T, text string) {
		if seed.UserReviewStop(text) && !strings.Contains(text, "USER_REVIEW") {
			t.Errorf("a stop without the USER_REVIEW status: %q", text)
		}
		seed.OfficialVerdict(text)
		seed.ImplementationReviewErrors(text)
		for _, p := range seed.WriteSetPaths(text) {
			if p == "" {
				t.Errorf("an empty write-set path from %q", text)
			}
		}
		taskfile.ParseHeader(text)
	})
}

func TestPromptsKeepLocalWorkAndOfficialReviewRolesSeparate(t *testing.T) {
	task := makeTask(t, "")
	selfcheck := seed.Prompt(taskfile.StageSelfcheck, task)
	review := seed.Prompt(taskfile.StageReview, task)
	if strings.Contains(selfcheck, "USER_REVIEW") || strings.Contains(strings.ToLower(selfcheck), "user review") {
		t.Errorf("the selfcheck prompt speaks of user review: %s", selfcheck)
	}
	want := "Think in English. Final in Korean. Read " + task.Review + " and fill every missing implementation field. " +
		"Do not finish until all implementation fields are complete. This is a self-check of completed work, not a review. Read " +
		task.Plan + " and finish any missing work. Recheck and fix your work."
	if selfcheck != want {
		t.Errorf("selfcheck prompt\n got %s\nwant %s", selfcheck, want)
	}
	if want := "Read " + task.Review + " and start the review. Final in Korean."; review != want {
		t.Errorf("review prompt\n got %s\nwant %s", review, want)
	}
	if w := seed.Prompt(taskfile.StageWorker, task); !strings.Contains(w, task.Plan) || strings.Contains(w, "USER_REVIEW") {
		t.Errorf("worker prompt: %s", w)
	}
}

func TestLocalReviewStubHasNoUserReviewControlPlaneContent(t *testing.T) {
	stub := taskfile.ReviewStub(taskfile.Header{Task: "t", Plan: 0, Tag: "T"})
	for _, not := range []string{"USER_REVIEW", "사용자 리뷰", "user-review", "## 작업 로그 계약", "WORK_LOG.md"} {
		if strings.Contains(stub, not) {
			t.Errorf("the review stub holds %q", not)
		}
	}
	if h, ok := taskfile.ParseHeader(stub); !ok || h != (taskfile.Header{Task: "t", Plan: 0, Tag: "T"}) {
		t.Errorf("stub header %+v %v", h, ok)
	}
	if errs := seed.ImplementationReviewErrors(stub); len(errs) == 0 {
		t.Error("an unfilled stub passes the selfcheck")
	}
	if seed.OfficialVerdict(stub) {
		t.Error("an unfilled stub starts review")
	}
}

func TestRejectsBroadOrOutsideWorkspaceWriteSets(t *testing.T) {
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "src"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"| `src/` | TEST-1 |\n", "| `../outside.go` | TEST-2 |\n", "| `src/*.go` | TEST-3 |\n"} {
		paths := seed.WriteSetPaths(writeSetTable + "| `src/ok.go` | OK |\n" + row)
		set, known, why := schedule.WriteSet(ws, paths)
		if known || len(set) != 0 || why == "" {
			t.Errorf("%s: set %q known %v why %q; want unknown, empty, a reason", strings.TrimSpace(row), set, known, why)
		}
	}
}

func TestReviewProgressSignatureIgnoresDispatcherWorkLog(t *testing.T) {
	task := makeTask(t, "")
	sig := func() string {
		s, err := taskfile.Signature(task)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := sig()
	write(t, filepath.Join(task.Dir, taskfile.WorkLogName), "| FINISH | test | review |\n")
	if after := sig(); after != before {
		t.Error("the work log changed the signature")
	}
	write(t, task.Review, "## 코드리뷰 결과\n- 종합 판정: WARN\n")
	if after := sig(); after == before {
		t.Error("a changed review left the signature as it was")
	}
	write(t, filepath.Join(task.Dir, "plan_local_G05_0.log"), "old plan\n")
	if sig() == before {
		t.Error("a new file left the signature as it was")
	}
}

func TestLoadRoutes(t *testing.T) {
	dir := t.TempDir()
	good := write(t, filepath.Join(dir, "routes.json"), `{"routes":[{"min_grade":0,"max_grade":99,"provider":"glm","review_provider":"claude"}]}`)
	s, err := seed.LoadRoutes(good)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := s.Route(5); !ok || r.ProviderFor(taskfile.StageWorker) != "glm" || r.ProviderFor(taskfile.StageReview) != "claude" {
		t.Errorf("route %+v %v", r, ok)
	}
	for _, bad := range []string{`{"routes":[]}`, `{"routes":[{"min_grade":0,"max_grade":9,"provider":"glm"}]}`, `{"route":[]}`} {
		if _, err := seed.LoadRoutes(write(t, filepath.Join(dir, "bad.json"), bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestCompletedReviewChecklistDoesNotDependOnWorkerLog(t *testing.T) {
	task := makeTask(t, "- [x] CODE_REVIEW-*-G??.md의 구현 에이전트 소유 섹션을 실제 구현 내용과 검증 출력으로 채운다.\n"+
		"- [x] `WORK_LOG.md` 현재 실행 블록의 체크포인트, 예상 밖 이슈, 검증, 최종 리포트를 모두 채운다. 이 항목이 완료되기 전에는 구현이 완료된 것이 아니다.\n")
	write(t, task.Plan, "<!-- task=test plan=0 tag=TEST -->\n## 작업 로그 계약\n")
	if got := stage(t, task, taskfile.Progress{}); got != taskfile.StageReview {
		t.Errorf("stage %q, want review (no work log needed)", got)
	}
}
