package loop_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/taskloop/loop"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/schedule"
)

// The seed's OrchestrationPersistenceTest (its liveness tests are the
// schedule package's TestOwnerLiveness).

// attemptDir writes a run directory of pilot's with a record of task's.
func attemptDir(t *testing.T, runs, name, task string) string {
	t.Helper()
	dir := filepath.Join(runs, name)
	data, err := json.Marshal(pilot.Record{RunID: name, Status: "completed", RetryKey: task})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "record.json"), string(data))
	for _, f := range []string{"stream.log", "events.log"} {
		write(t, filepath.Join(dir, f), "evidence\n")
	}
	return dir
}

func TestCompleteArchiveRemovesOnlyItsTaskAttemptLogs(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	done := attemptDir(t, runs, "completed-attempt", "group/01_done")
	other := attemptDir(t, runs, "other-attempt", "group/02_open")
	write(t, filepath.Join(runs, "not-a-run", "notes.txt"), "keep\n")
	n, err := loop.CleanupTaskRecords(runs, "group/01_done")
	if err != nil || n != 1 {
		t.Fatalf("CleanupTaskRecords = %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(done); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the completed task's run is still there: %v", err)
	}
	for _, keep := range []string{filepath.Join(other, "stream.log"), filepath.Join(runs, "not-a-run", "notes.txt")} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s: %v", keep, err)
		}
	}
}

func TestMarkCompleteRemovesTaskAttemptLogs(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, "group/01_done", "src/a.go")
	runs := filepath.Join(t.TempDir(), "runs")
	mine := attemptDir(t, runs, "attempt", "group/01_done")
	other := attemptDir(t, runs, "other", "group/02_other")
	l := newLoop(t, ws, newFake(t, nil), nil)
	l.RunDir = runs
	if rep := run(t, l, "group"); rep.Status != "complete" {
		t.Fatalf("report %+v", rep)
	}
	if _, err := os.Stat(mine); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the completed task's attempt is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another task's attempt: %v", err)
	}
}

func TestRetryBlockedOnlyClearsSelectedTaskGroup(t *testing.T) {
	st := openState(t, filepath.Join(t.TempDir(), "state"))
	for _, name := range []string{"alpha/01_task", "beta/01_task"} {
		if err := st.Retry.UpdateTask(name, func(ts *retry.TaskState) {
			ts.Blocked = "recovery failure limit exhausted: 10/10"
			ts.Counters = map[string]int{"review_no_progress": 10, "selfcheck_incomplete": 10}
			ts.RecoveryFailures = map[string]int{"worker": 10}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.ClearBlocked("alpha"); err != nil {
		t.Fatal(err)
	}
	a, b := st.Retry.Task("alpha/01_task"), st.Retry.Task("beta/01_task")
	if a.Blocked != "" || a.Counters["review_no_progress"] != 0 || a.Counters["selfcheck_incomplete"] != 0 || a.RecoveryFailures["worker"] != 0 {
		t.Errorf("alpha after clearing: %+v", a)
	}
	if b.Blocked == "" || b.Counters["review_no_progress"] != 10 || b.Counters["selfcheck_incomplete"] != 10 || b.RecoveryFailures["worker"] != 10 {
		t.Errorf("beta, another group: %+v", b)
	}
	// Every group, when none is named.
	if _, err := st.ClearBlocked(""); err != nil {
		t.Fatal(err)
	}
	if b := st.Retry.Task("beta/01_task"); b.Blocked != "" {
		t.Errorf("beta after clearing every group: %+v", b)
	}
}

func TestCorruptPersistentStateFailsClosedAndReleasesLock(t *testing.T) {
	for _, file := range []string{retry.StateFileName, schedule.StoreFileName, "progress.json"} {
		t.Run(file, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			path := write(t, filepath.Join(dir, file), "{broken")
			st, err := loop.OpenState(dir, false)
			if err == nil {
				st.Close()
				t.Fatal("a corrupt state opened")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it aside") {
				t.Errorf("error %q does not name the file and the fix", err)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			// Nothing was left locked: the state opens and changes.
			st = openState(t, dir)
			if err := st.Prepare("", workspace(t), nil, time.Now()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Task loops share a state directory: opening it takes no lock, and each
// change of the progress file is made on the file as it is then, so that
// neither State loses the other's; the retry store inside is shared too
// (pilot state may clear a block meanwhile).
func TestTwoStatesShareOneDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	first, second := openState(t, dir), openState(t, dir)
	ws := workspace(t)
	addTask(t, ws, "g/01_a", "src/a.go")
	addTask(t, ws, "g/02_b", "src/b.go")
	tasks, err := loop.Scan(testSeed(), ws, "g")
	if err != nil || len(tasks) != 2 {
		t.Fatalf("scan: %v, %v", tasks, err)
	}
	if err := first.Prepare("g", ws, tasks[:1], time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := second.Prepare("g", ws, tasks[1:], time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*loop.State{first, second} {
		o := st.Orchestration()
		if o == nil || o.Tasks["g/01_a"] == nil || o.Tasks["g/02_b"] == nil {
			t.Errorf("orchestration %+v; want both loops' tasks", o)
		}
	}
	shared, err := retry.OpenStore(filepath.Join(dir, retry.StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	if err := shared.UpdateTask("g/01_a", func(ts *retry.TaskState) { ts.Blocked = "x" }); err != nil {
		t.Fatal(err)
	}
	if got := first.Retry.Task("g/01_a").Blocked; got != "x" {
		t.Errorf("the loop sees the block as %q", got)
	}
}

func TestDryRunStateWritesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	st, err := loop.OpenState(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ws := workspace(t)
	addTask(t, ws, "g/01_task", "src/a.go")
	tasks, err := loop.Scan(testSeed(), ws, "g")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Prepare("g", ws, tasks, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dry-run state made %s: %v", dir, err)
	}
}

// prepared is a workspace with one task, whose orchestration a first
// dispatcher prepared and then left (the seed's child restart).
func prepared(t *testing.T) (ws, stateDir, taskDir string) {
	t.Helper()
	ws = workspace(t)
	taskDir = addTask(t, ws, "task", "src/task.go")
	stateDir = filepath.Join(t.TempDir(), "state")
	first, err := loop.OpenState(stateDir, false)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := loop.Scan(testSeed(), ws, "")
	if err != nil || len(tasks) != 1 {
		t.Fatalf("scan: %v, %v", tasks, err)
	}
	if err := first.Prepare("", ws, tasks, time.Now()); err != nil {
		t.Fatal(err)
	}
	first.Close()
	return ws, stateDir, taskDir
}

func reconcile(t *testing.T, ws, stateDir string) (map[string]string, map[string]string) {
	t.Helper()
	st := openState(t, stateDir)
	defer st.Close()
	if err := st.Prepare("", ws, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	completed, errs, err := st.Reconcile(ws, map[string]bool{})
	if err != nil {
		t.Fatal(err)
	}
	return completed, errs
}

func TestChildRestartDetectsTaskThatDisappearedWithoutCompleteLog(t *testing.T) {
	ws, stateDir, dir := prepared(t)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	completed, errs := reconcile(t, ws, stateDir)
	if len(completed) != 0 || !strings.Contains(errs["task"], "without a new archive holding a complete.log") {
		t.Errorf("completed %v errors %v; want the task's disappearance as an error", completed, errs)
	}
	// The failure stays until a person clears it.
	st := openState(t, stateDir)
	if o := st.Orchestration(); o.Tasks["task"] == nil || o.Tasks["task"].Status != "failed" {
		t.Errorf("recorded %+v, want the task failed", o.Tasks["task"])
	}
	if _, err := st.ClearBlocked(""); err != nil {
		t.Fatal(err)
	}
	if o := st.Orchestration(); o.Tasks["task"] != nil {
		t.Errorf("after --retry-blocked the task is still recorded: %+v", o.Tasks["task"])
	}
}

func TestChildRestartRecoversNewCompleteArchiveNotBaselineArchive(t *testing.T) {
	ws := workspace(t)
	old := filepath.Join(ws, "agent-task", "archive", "2026", "06", "task")
	write(t, filepath.Join(old, loop.CompleteLog), "old\n")
	dir := addTask(t, ws, "task", "src/task.go")
	stateDir := filepath.Join(t.TempDir(), "state")
	first := openState(t, stateDir)
	tasks, _ := loop.Scan(testSeed(), ws, "")
	if err := first.Prepare("", ws, tasks, time.Now()); err != nil {
		t.Fatal(err)
	}
	first.Close()
	fresh := filepath.Join(ws, "agent-task", "archive", "2026", "07", "task_1")
	write(t, filepath.Join(dir, loop.CompleteLog), "new\n")
	if err := os.MkdirAll(filepath.Dir(fresh), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, fresh); err != nil {
		t.Fatal(err)
	}
	completed, errs := reconcile(t, ws, stateDir)
	if len(errs) != 0 || completed["task"] != fresh {
		t.Errorf("completed %v errors %v; want task complete in %s", completed, errs, fresh)
	}
}

func TestPreexistingIncompleteArchiveCannotBecomeFalseNewCompletion(t *testing.T) {
	ws := workspace(t)
	incomplete := filepath.Join(ws, "agent-task", "archive", "2026", "06", "task")
	if err := os.MkdirAll(incomplete, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := addTask(t, ws, "task", "src/task.go")
	stateDir := filepath.Join(t.TempDir(), "state")
	first := openState(t, stateDir)
	tasks, _ := loop.Scan(testSeed(), ws, "")
	if err := first.Prepare("", ws, tasks, time.Now()); err != nil {
		t.Fatal(err)
	}
	first.Close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(incomplete, loop.CompleteLog), "late unrelated completion\n")
	completed, errs := reconcile(t, ws, stateDir)
	if len(completed) != 0 || errs["task"] == "" {
		t.Errorf("completed %v errors %v; want no completion and an error", completed, errs)
	}
}
