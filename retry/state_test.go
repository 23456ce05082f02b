package retry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/retry"
)

// The state store, ported from the seed's OrchestrationPersistenceTest and
// RepetitionLimitTest.

func TestStateCorruptFailsClosedAndReleasesTheLock(t *testing.T) {
	for _, content := range []string{"{broken", `{"version": 99, "tasks": {}}`, `{"version":1,"tasks":{"a":{"recovery_failures":{"w":-1}}}}`, "{} {}"} {
		path := filepath.Join(t.TempDir(), "pilot", "state.json")
		os.MkdirAll(filepath.Dir(path), 0o700)
		os.WriteFile(path, []byte(content), 0o600)
		_, err := retry.OpenStore(path)
		var se *retry.StateError
		if !errors.As(err, &se) || !errors.Is(err, retry.ErrStateCorrupt) {
			t.Fatalf("%q: error %v, want a *StateError of ErrStateCorrupt", content, err)
		}
		if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "move it aside") {
			t.Errorf("%q: message %q does not name the file and the recovery", content, msg)
		}
		if data, _ := os.ReadFile(path); string(data) != content {
			t.Errorf("%q: the corrupt file was changed to %q", content, data)
		}
		// The lock was released: once repaired, the file opens.
		os.WriteFile(path, []byte("{}\n"), 0o600)
		s, err := retry.OpenStore(path)
		if err != nil {
			t.Fatalf("%q: reopening the repaired file: %v", content, err)
		}
		s.Close()
	}
}

func TestStateLockIsExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s := openState(t, path)
	_, err := retry.OpenStore(path)
	if !errors.Is(err, retry.ErrStateLocked) || !strings.Contains(err.Error(), path) ||
		!strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second open: %v; want ErrStateLocked naming the file and this pid", err)
	}
	// Another process is refused too, until the holder closes.
	if out := stateChild(t, "open", path); !strings.Contains(out, "locked") {
		t.Errorf("child while locked: %q", out)
	}
	s.Close()
	if out := stateChild(t, "open", path); out != "opened" {
		t.Errorf("child after close: %q", out)
	}
}

// stateChild runs this test binary as TestStateChild with args, and returns
// its stdout.
func stateChild(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStateChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envStateChild+"="+strings.Join(args, "\n"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("state child %v: %v\n%s%s", args, err, out.String(), errb.String())
	}
	s, _, _ := strings.Cut(out.String(), "PASS\n")
	return strings.TrimSpace(s)
}

const envStateChild = "PILOT_TEST_STATE_CHILD"

// TestStateChild is a child process of the state tests: "open PATH" opens
// the store and says so; "retry PATH" runs a failing task through
// retry.Dispatch with the store and prints the verdict.
func TestStateChild(t *testing.T) {
	spec := os.Getenv(envStateChild)
	if spec == "" {
		t.Skip("only a child process of the state tests")
	}
	args := strings.Split(spec, "\n")
	s, err := retry.OpenStore(args[1])
	if err != nil {
		if errors.Is(err, retry.ErrStateLocked) {
			fmt.Println("locked")
			return
		}
		fmt.Println("error:", err)
		return
	}
	defer s.Close()
	switch args[0] {
	case "open":
		fmt.Println("opened")
	case "retry":
		d := testDispatcher(t, fakeProvider(t, "fake", "err=boom", "exit=1"))
		d.RunDir = args[2]
		v, err := retry.Dispatch(context.Background(), d, task("fake"),
			retry.Key{Task: "group/01_task", Stage: "worker"},
			retry.Policy{State: s, Sleep: func(context.Context, time.Duration) error { return nil }})
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		data, _ := json.Marshal(v)
		fmt.Println(string(data))
	}
}

// A restarted process sees the budget another process left, and blocks at
// the limit.
func TestStateBudgetSurvivesAProcessRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	runs := filepath.Join(dir, "runs")
	s, err := retry.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	s.UpdateTask("group/01_task", func(ts *retry.TaskState) {
		ts.RecoveryFailures = map[string]int{"worker": retry.DefaultMaxFailures - 1}
	})
	s.Close()

	out := stateChild(t, "retry", path, runs)
	var v pilot.Verdict
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("child said %q", out)
	}
	if !v.Blocked || v.BlockedReason != "recovery failure limit exhausted: 10/10" || v.Attempts != 1 || v.FailureClass != pilot.FailGeneric {
		t.Errorf("child's verdict: blocked %v %q, %d attempts, %s", v.Blocked, v.BlockedReason, v.Attempts, v.FailureClass)
	}
	rec, err := pilot.ReadRecord(v.Record)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Attempt != 1 || rec.RetryKey != "group/01_task" || rec.Status != "error" {
		t.Errorf("record: attempt %d key %q status %s", rec.Attempt, rec.RetryKey, rec.Status)
	}

	s = openState(t, path)
	ts := s.Task("group/01_task")
	if ts.Blocked != v.BlockedReason || ts.RecoveryFailures["worker"] != 10 || ts.LastRecord != v.Record {
		t.Errorf("state after the child: %+v", ts)
	}
	// And this process, restarted once more, runs nothing.
	d := testDispatcher(t, fakeProvider(t, "fake", "out=should not run"))
	again, err := retry.Dispatch(context.Background(), d, task("fake"), retry.Key{Task: "group/01_task", Stage: "worker"}, retry.Policy{State: s})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Blocked || again.Attempts != 0 || again.RunID != "" {
		t.Errorf("blocked task ran: %+v", again)
	}
	if entries, _ := os.ReadDir(d.RunDir); len(entries) != 0 {
		t.Errorf("the blocked task made %d run directories", len(entries))
	}
}

func TestStateClearBlockedOnlyClearsItsGroup(t *testing.T) {
	s := openState(t, filepath.Join(t.TempDir(), "state.json"))
	for _, name := range []string{"alpha/01_task", "alpha/02_task", "beta/01_task"} {
		if err := s.UpdateTask(name, func(ts *retry.TaskState) {
			ts.Blocked = "recovery failure limit exhausted: 10/10"
			ts.Counters = map[string]int{"review_no_progress": 10, "selfcheck_incomplete": 10}
			ts.RecoveryFailures = map[string]int{"worker": 10}
		}); err != nil {
			t.Fatal(err)
		}
	}
	cleared, err := s.ClearBlocked("alpha")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"alpha/01_task", "alpha/02_task"}, cleared); diff != "" {
		t.Errorf("cleared (-want +got):\n%s", diff)
	}
	for _, name := range cleared {
		ts := s.Task(name)
		if ts.Blocked != "" || ts.Counters["review_no_progress"] != 0 || ts.Counters["selfcheck_incomplete"] != 0 || len(ts.RecoveryFailures) != 0 {
			t.Errorf("%s not cleared: %+v", name, ts)
		}
	}
	beta := s.Task("beta/01_task")
	if beta.Blocked == "" || beta.Counters["review_no_progress"] != 10 || beta.Counters["selfcheck_incomplete"] != 10 || beta.RecoveryFailures["worker"] != 10 {
		t.Errorf("beta changed: %+v", beta)
	}
	// And so it is on disk.
	path := s.Path()
	s.Close()
	s = openState(t, path)
	if s.Task("alpha/01_task").Blocked != "" || s.Task("beta/01_task").Blocked == "" {
		t.Errorf("on disk: alpha %+v beta %+v", s.Task("alpha/01_task"), s.Task("beta/01_task"))
	}
}

func TestStateDryRunWritesNothing(t *testing.T) {
	// No state yet: a dry run creates neither the file nor its directory.
	dir := t.TempDir()
	path := filepath.Join(dir, ".git", "pilot", "state.json")
	s, err := retry.OpenStoreDryRun(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateTask("a/1", func(ts *retry.TaskState) { ts.Blocked = "x" }); err != nil {
		t.Fatal(err)
	}
	if err := s.SetGroupStatus("a", "running"); err != nil {
		t.Fatal(err)
	}
	if s.Task("a/1").Blocked != "x" {
		t.Error("a dry run does not see its own change")
	}
	s.Close()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a dry run created %v", entries)
	}

	// Existing state: a dry run's clear-blocked leaves the file as it was.
	real := openState(t, path)
	real.UpdateTask("a/1", func(ts *retry.TaskState) {
		ts.Blocked = "recovery failure limit exhausted: 10/10"
		ts.Counters = map[string]int{"review_no_progress": 10}
		ts.RecoveryFailures = map[string]int{"review": 10}
	})
	real.Close()
	before, _ := os.ReadFile(path)
	entriesBefore, _ := os.ReadDir(filepath.Dir(path))
	dry, err := retry.OpenStoreDryRun(path)
	if err != nil {
		t.Fatal(err)
	}
	if cleared, err := dry.ClearBlocked("a"); err != nil || len(cleared) != 1 {
		t.Fatalf("dry clear: %v %v", cleared, err)
	}
	// A retry over a dry-run store keeps its budget in memory only.
	f := newFake(t, fail(pilot.FailGeneric))
	v, _ := runRetry(t, f, retry.Policy{MaxFailures: 1, State: dry}, retry.Key{Task: "a/2"})
	if !v.Blocked || dry.Task("a/2").Blocked == "" {
		t.Errorf("dry-run retry: blocked %v, state %+v", v.Blocked, dry.Task("a/2"))
	}
	dry.Close()
	after, _ := os.ReadFile(path)
	entriesAfter, _ := os.ReadDir(filepath.Dir(path))
	if !bytes.Equal(before, after) || len(entriesBefore) != len(entriesAfter) {
		t.Errorf("a dry run changed the state:\n%s\n%s", before, after)
	}
	reopened := openState(t, path)
	ts := reopened.Task("a/1")
	if ts.Blocked != "recovery failure limit exhausted: 10/10" || ts.Counters["review_no_progress"] != 10 || ts.RecoveryFailures["review"] != 10 {
		t.Errorf("after the dry run: %+v", ts)
	}
}

// The seed's repetition limits: caller-defined counters with a limit.
func TestStateRepetitionLimits(t *testing.T) {
	s := openState(t, filepath.Join(t.TempDir(), "state.json"))
	const limit = 10

	// An exhausted budget: CheckLimit blocks and nothing is invoked.
	s.UpdateTask("g/exhausted", func(ts *retry.TaskState) { ts.Counters = map[string]int{"selfcheck_incomplete": limit} })
	ok, err := s.CheckLimit("g/exhausted", "selfcheck_incomplete", limit, "selfcheck")
	if err != nil || ok {
		t.Fatalf("CheckLimit = %v, %v; want false: the caller invokes nothing", ok, err)
	}
	if got := s.Task("g/exhausted").Blocked; got != "selfcheck limit already exhausted: 10/10" {
		t.Errorf("blocked %q", got)
	}

	// The tenth pass without progress blocks.
	s.UpdateTask("g/review", func(ts *retry.TaskState) { ts.Counters = map[string]int{"review_no_progress": limit - 1} })
	if ok, err := s.CheckLimit("g/review", "review_no_progress", limit, "review"); err != nil || !ok {
		t.Fatalf("CheckLimit below the limit = %v, %v", ok, err)
	}
	n, blocked, err := s.Bump("g/review", "review_no_progress", limit, "review made no progress")
	if err != nil || n != limit || !blocked {
		t.Fatalf("Bump = %d, %v, %v", n, blocked, err)
	}
	if got := s.Task("g/review").Blocked; got != "review made no progress: 10/10" {
		t.Errorf("blocked %q", got)
	}
	// Progress resets a counter.
	s.UpdateTask("g/progress", func(ts *retry.TaskState) { ts.Counters = map[string]int{"review_no_progress": 3} })
	if err := s.ResetCounter("g/progress", "review_no_progress"); err != nil || s.Task("g/progress").Counters["review_no_progress"] != 0 {
		t.Errorf("reset: %v %+v", err, s.Task("g/progress"))
	}
}

func TestStateGroupStatusPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s := openState(t, path)
	if err := s.SetGroupStatus("alpha", "running"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openState(t, path)
	if g := s.Group("alpha"); g.Status != "running" || g.UpdatedAt.IsZero() {
		t.Errorf("group %+v", g)
	}
	if g := s.Group("beta"); g.Status != "" {
		t.Errorf("unknown group %+v", g)
	}
	var doc map[string]any
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &doc); err != nil || doc["version"] != float64(retry.StateVersion) {
		t.Errorf("file %s: %v", data, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want 0600", st.Mode().Perm())
	}
}

func TestDefaultStatePath(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	repo := t.TempDir()
	git := exec.Command("git", "init", "-q", repo)
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	sub := filepath.Join(repo, "a", "b")
	os.MkdirAll(sub, 0o755)
	got, err := retry.DefaultStorePath(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(repo, ".git", "pilot", "state.json")
	if real, err := filepath.EvalSymlinks(repo); err == nil {
		want = filepath.Join(real, ".git", "pilot", "state.json")
	}
	if got != want {
		t.Errorf("DefaultStatePath = %s, want %s", got, want)
	}
	if _, err := retry.DefaultStorePath(context.Background(), t.TempDir()); err == nil {
		t.Error("a directory outside any repository has a default state path")
	}
}

// Whatever a state file holds, opening it either fails closed with a
// *StateError or gives a state that writes back and reads back the same.
func FuzzStateFile(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{broken`))
	f.Add([]byte(`{"version":1,"tasks":{"alpha/01":{"group":"alpha","recovery_failures":{"worker":9},"counters":{"review_no_progress":2},"blocked":"x","updated_at":"2026-01-02T03:04:05Z"}},"groups":{"alpha":{"status":"running","updated_at":"2026-01-02T03:04:05Z"}}}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":1,"tasks":{"a":{"recovery_failures":{"w":-3}}}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "state.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := retry.OpenStore(path)
		if err != nil {
			var se *retry.StateError
			if !errors.As(err, &se) || se.Path != path {
				t.Fatalf("error %v is not a *StateError naming the file", err)
			}
			return
		}
		tasks := map[string]retry.TaskState{}
		for _, n := range s.Tasks() {
			tasks[n] = s.Task(n)
		}
		if err := s.SetGroupStatus("fuzz", "checked"); err != nil {
			t.Fatal(err)
		}
		s.Close()
		again, err := retry.OpenStore(path)
		if err != nil {
			t.Fatalf("the state pilot wrote does not read back: %v", err)
		}
		defer again.Close()
		got := map[string]retry.TaskState{}
		for _, n := range again.Tasks() {
			got[n] = again.Task(n)
		}
		if diff := cmp.Diff(tasks, got); diff != "" {
			t.Errorf("tasks changed by a write (-before +after):\n%s", diff)
		}
	})
}
