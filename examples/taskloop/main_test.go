package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot/examples/taskloop/loop"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/schedule"
)

// ownerEnv makes the test binary another task loop's process owning one
// task (see holdTask): its value is the schedule store's path, a space,
// and the task's name.
const ownerEnv = "TASKLOOP_TEST_OWNER"

func TestMain(m *testing.M) {
	if v := os.Getenv(ownerEnv); v != "" {
		path, task, _ := strings.Cut(v, " ")
		os.Exit(holdTask(path, task))
	}
	pilottest.Main(m)
}

// holdTask claims task in the store at path, as a task loop does before it
// runs a task, says "ready" on stdout, and holds the task until its stdin
// closes.
func holdTask(path, task string) int {
	store, err := schedule.OpenStore(path, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "owner:", err)
		return 1
	}
	claimed, holder, err := store.Claim(task, time.Now())
	if err != nil || !claimed {
		fmt.Fprintf(os.Stderr, "owner: claiming %s: %v %s\n", task, err, holder)
		return 1
	}
	os.Stdout.WriteString("ready\n")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// repoWithTask is a git repository with one task, agent-task/task/.
func repoWithTask(t *testing.T) string {
	t.Helper()
	ws := pilottest.GitRepo(t)
	header := "<!-- task=task plan=0 tag=TEST -->\n"
	writeFile(t, filepath.Join(ws, "agent-task", "task", "PLAN-local-G05.md"), header+"## 수정 파일 요약\n\n| 파일 | 항목 |\n|---|---|\n| `src/task.go` | TEST-1 |\n")
	writeFile(t, filepath.Join(ws, "agent-task", "task", "CODE_REVIEW-local-G05.md"), header)
	return ws
}

func TestDryRunDoesNotCreatePersistentOrchestrationState(t *testing.T) {
	ws := repoWithTask(t)
	code, stdout, stderr := runCmd(t, "--workspace", ws, "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "task") || !strings.Contains(stdout, "ready") || !strings.Contains(stdout, "worker") {
		t.Errorf("the plan does not say the task is ready at its worker:\n%s", stdout)
	}
	dir, err := loop.DefaultStateDir(context.Background(), ws, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dry run made %s: %v", dir, err)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dry run made %s: %v", filepath.Dir(dir), err)
	}
}

func TestDryRunRetryBlockedDoesNotClearPersistentLimits(t *testing.T) {
	ws := repoWithTask(t)
	dir, err := loop.DefaultStateDir(context.Background(), ws, "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := loop.OpenState(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	blocked := func(ts *retry.TaskState) {
		ts.Blocked = "recovery failure limit exhausted: 10/10"
		ts.Counters = map[string]int{"review_no_progress": 10, "selfcheck_incomplete": 10}
		ts.RecoveryFailures = map[string]int{"review": 10}
	}
	if err := st.Retry.UpdateTask("task", blocked); err != nil {
		t.Fatal(err)
	}
	st.Close()
	code, stdout, stderr := runCmd(t, "--workspace", ws, "--dry-run", "--retry-blocked")
	if code != 2 {
		t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	st, err = loop.OpenState(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts := st.Retry.Task("task")
	if ts.Blocked != "recovery failure limit exhausted: 10/10" || ts.Counters["review_no_progress"] != 10 || ts.Counters["selfcheck_incomplete"] != 10 || ts.RecoveryFailures["review"] != 10 {
		t.Errorf("a dry run changed the state: %+v", ts)
	}
}

// The seed's test_external_active_task_returns_non_terminal_exit_three:
// the group's one task is owned by another live task loop, a process of
// its own recorded as the task's owner in the state's schedule store. The
// loop never runs the task (it writes no work log row, starts no worker)
// and exits 3: the group goes on in the other loop.
func TestExternalActiveTaskReturnsNonTerminalExitThree(t *testing.T) {
	ws := pilottest.GitRepo(t)
	header := "<!-- task=01_active plan=0 tag=TEST -->\n"
	task := filepath.Join(ws, "agent-task", "m-test", "01_active")
	writeFile(t, filepath.Join(task, "PLAN-local-G05.md"), header+"## 수정 파일 요약\n\n| 파일 | 항목 |\n|---|---|\n| `src/active.go` | TEST-1 |\n")
	writeFile(t, filepath.Join(task, "CODE_REVIEW-local-G05.md"), header)
	dir, err := loop.DefaultStateDir(context.Background(), ws, "m-test")
	if err != nil {
		t.Fatal(err)
	}

	owner := exec.Command(os.Args[0], "-test.run=^$")
	owner.Env = append(os.Environ(), ownerEnv+"="+filepath.Join(dir, schedule.StoreFileName)+" m-test/01_active")
	hold, err := owner.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	ready, err := owner.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var ownerErr strings.Builder
	owner.Stderr = &ownerErr
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		hold.Close() // lets the owner go
		if err := owner.Wait(); err != nil {
			t.Errorf("owner: %v\n%s", err, ownerErr.String())
		}
	}()
	if line, err := bufio.NewReader(ready).ReadString('\n'); line != "ready\n" {
		t.Fatalf("owner said %q, %v; want ready\n%s", line, err, ownerErr.String())
	}

	runs := filepath.Join(t.TempDir(), "runs")
	code, stdout, stderr := runCmd(t, "--workspace", ws, "--task-group", "m-test", "--run-dir", runs, "--json")
	if code != 3 {
		t.Fatalf("exit %d, want 3\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var rep struct {
		Status string `json:"status"`
		Tasks  []struct {
			Name, Status, Reason string
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	pid := fmt.Sprintf("pid %d", owner.Process.Pid)
	if rep.Status != "non-terminal" || len(rep.Tasks) != 1 || rep.Tasks[0].Name != "m-test/01_active" ||
		rep.Tasks[0].Status != "external-active" || !strings.Contains(rep.Tasks[0].Reason, pid) {
		t.Errorf("report %+v; want m-test/01_active external-active, naming the owner's %s, and the group non-terminal", rep, pid)
	}
	if _, err := os.Stat(filepath.Join(task, "WORK_LOG.md")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the task has a work log (%v): an attempt began", err)
	}
	if entries, err := os.ReadDir(runs); len(entries) != 0 {
		t.Errorf("run records %v (%v): a worker was dispatched", entries, err)
	}
}

// The demo's text ends saying that its exit 2 is what it means to end
// with: a reader should not take it for a failure.
func TestDemoSaysItsExitIsExpected(t *testing.T) {
	code, stdout, stderr := runCmd(t, "demo", "--dir", filepath.Join(t.TempDir(), "demo"))
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != 2 || !strings.HasPrefix(lines[len(lines)-1], "exit 2 is the demo's expected end: 04_gate holds a user-review stop") {
		t.Errorf("exit %d, last line %q; want 2 and the line saying it is expected\nstderr:\n%s", code, lines[len(lines)-1], stderr)
	}
}

func TestDemoRunsTheFourTaskGroup(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	code, stdout, stderr := runCmd(t, "demo", "--dir", dir, "--json")
	if code != 2 {
		t.Fatalf("exit %d, want 2 (the user review stop)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var rep struct {
		Status string `json:"status"`
		Tasks  []struct {
			Name    string `json:"name"`
			Status  string `json:"status"`
			Reason  string `json:"reason"`
			Archive string `json:"archive"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	want := map[string]string{"demo/01_alpha": "complete", "demo/02_conflict": "complete", "demo/03+01,02_join": "complete", "demo/04_gate": "blocked"}
	if rep.Status != "blocked" || len(rep.Tasks) != 4 {
		t.Fatalf("report %+v", rep)
	}
	for _, tr := range rep.Tasks {
		if tr.Status != want[tr.Name] {
			t.Errorf("%s: %s, want %s", tr.Name, tr.Status, want[tr.Name])
		}
		if tr.Status == "complete" {
			if _, err := os.Stat(filepath.Join(tr.Archive, loop.CompleteLog)); err != nil {
				t.Errorf("%s: %v", tr.Name, err)
			}
		}
	}
	alpha := filepath.Join(rep.Tasks[0].Archive)
	for _, f := range []string{"plan_local_G05_0.log", "code_review_local_G05_0.log", "PLAN-local-G07.md", "WORK_LOG.md"} {
		if _, err := os.Stat(filepath.Join(alpha, f)); err != nil {
			t.Errorf("alpha's archive: %v", err)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "src", "alpha.go")); err != nil || !strings.Contains(string(data), "02_conflict") {
		t.Errorf("src/alpha.go = %q, %v; the conflict, which ran after alpha, wrote it last", data, err)
	}
	// The gate's user review is where it was: the stop is the file.
	if _, err := os.Stat(filepath.Join(dir, "agent-task", "demo", "04_gate", "USER_REVIEW.md")); err != nil {
		t.Error(err)
	}
}

func TestFlagErrorsSayWhatIsWrong(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--routes", "/nonexistent/routes.json"}, "--routes:"},
		{[]string{"--max-parallel", "x"}, "invalid value"},
	} {
		code, _, stderr := runCmd(t, tt.args...)
		if code != 1 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want 1 and %q", tt.args, code, stderr, tt.want)
		}
	}
}
