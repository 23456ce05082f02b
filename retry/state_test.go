package retry_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
		// Nothing stays locked: once repaired, the file opens.
		os.WriteFile(path, []byte("{}\n"), 0o600)
		s, err := retry.OpenStore(path)
		if err != nil {
			t.Fatalf("%q: reopening the repaired file: %v", content, err)
		}
		s.Close()
	}
}

// Two Stores on one file in one process both work and see each other's
// changes, and so does a Store in another process: nothing holds the file
// between operations.
func TestStateTwoStoresShareOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	a, b := openState(t, path), openState(t, path)
	if _, _, err := a.Bump("g/01", "n", 0, ""); err != nil {
		t.Fatal(err)
	}
	if got := b.Task("g/01").Counters["n"]; got != 1 {
		t.Errorf("b sees a's counter at %d, want 1", got)
	}
	if err := b.SetGroupStatus("g", "running"); err != nil {
		t.Fatal(err)
	}
	if got := a.Group("g").Status; got != "running" {
		t.Errorf("a sees b's group status %q", got)
	}
	if _, _, err := b.Bump("g/01", "n", 0, ""); err != nil {
		t.Fatal(err)
	}
	if got := a.Task("g/01").Counters["n"]; got != 2 {
		t.Errorf("a sees the counter at %d after b's bump, want 2", got)
	}
	// Goroutines changing the file through both lose nothing.
	const goroutines, bumps = 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for i := range goroutines {
		s := []*retry.Store{a, b}[i%2]
		wg.Go(func() {
			for range bumps {
				if _, _, err := s.Bump("g/01", "n", 0, ""); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, want := a.Task("g/01").Counters["n"], 2+goroutines*bumps; got != want {
		t.Errorf("after concurrent bumps through two stores: %d, want %d", got, want)
	}
	// A child process opens and changes the file while both are open.
	if out := stateChild(t, "bump", path, "child", "1"); out != "ready\ndone" {
		t.Errorf("child: %q", out)
	}
	if got := b.Task("own/child").Counters["n"]; got != 1 {
		t.Errorf("b sees the child's counter at %d, want 1", got)
	}
	// A closed store changes nothing.
	a.Close()
	if err := a.SetGroupStatus("g", "x"); err == nil {
		t.Error("a closed store wrote")
	}
	if got := b.Group("g").Status; got != "running" {
		t.Errorf("group status %q after a closed store's change", got)
	}
}

// Many pilots (processes) change one store at once, and no update is lost:
// 8 children, started together, each bump a shared counter and their own
// 500 times.
func TestStateManyProcessesLoseNoUpdate(t *testing.T) {
	const procs, updates = 8, 500
	path := filepath.Join(t.TempDir(), "state.json")
	type child struct {
		cmd    *exec.Cmd
		start  io.WriteCloser
		out    *bufio.Reader
		stderr bytes.Buffer
	}
	children := make([]*child, procs)
	for i := range children {
		c := &child{cmd: stateChildCmd("bump", path, strconv.Itoa(i), strconv.Itoa(updates))}
		c.cmd.Stderr = &c.stderr
		var err error
		if c.start, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		stdout, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.out = bufio.NewReader(stdout)
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if c.cmd.ProcessState == nil {
				c.cmd.Process.Kill()
				c.cmd.Wait()
			}
		})
		children[i] = c
	}
	// Each child says it is ready, then waits for its stdin to close: they
	// all start at once.
	for i, c := range children {
		if line, err := c.out.ReadString('\n'); line != "ready\n" {
			t.Fatalf("child %d: %q, %v\n%s", i, line, err, c.stderr.String())
		}
	}
	for _, c := range children {
		c.start.Close()
	}
	for i, c := range children {
		rest, _ := io.ReadAll(c.out)
		if err := c.cmd.Wait(); err != nil || !strings.HasPrefix(string(rest), "done\n") {
			t.Errorf("child %d: %v, said %q\n%s", i, err, rest, c.stderr.String())
		}
	}
	s := openState(t, path)
	if got := s.Task("shared").Counters["n"]; got != procs*updates {
		t.Errorf("shared counter %d, want %d", got, procs*updates)
	}
	for i := range procs {
		if got := s.Task("own/" + strconv.Itoa(i)).Counters["n"]; got != updates {
			t.Errorf("child %d's counter %d, want %d", i, got, updates)
		}
	}
}

// A pilot killed (SIGKILL) while it writes leaves the state before or
// after its change, never a torn file. A child changes a large state in a
// loop, reporting each change; after its k-th report (k random) it is
// killed at a random moment within the time of one change. Each time, over
// several rounds, the file reads back whole, with a counter the child
// wrote, at least the last one it reported; and the next OpenStore removes
// the temporary file of a write cut short.
func TestStateKillDuringAWriteLeavesAWholeState(t *testing.T) {
	const rounds, tasks = 8, 200
	path := filepath.Join(t.TempDir(), "state.json")
	// Filler tasks make each write long enough to be cut short.
	s := openState(t, path)
	for i := range tasks {
		if err := s.UpdateTask(fmt.Sprintf("filler/%03d", i), func(ts *retry.TaskState) {
			ts.LastRecord = strings.Repeat("r", 1000)
		}); err != nil {
			t.Fatal(err)
		}
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	cut := 0
	for round := range rounds {
		k := 2 + rng.IntN(20)
		cmd := stateChildCmd("write", path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		out := bufio.NewReader(stdout)
		reported := 0
		var first time.Time
		for i := range k {
			line, err := out.ReadString('\n')
			if reported, err = strconv.Atoi(strings.TrimSpace(line)); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("round %d: the child said %q\n%s", round, line, stderr.String())
			}
			if i == 0 {
				first = time.Now()
			}
		}
		// Not a wait for the child: it is running its next change now,
		// and this picks a random moment of it.
		perChange := time.Since(first) / time.Duration(k-1)
		time.Sleep(time.Duration(rng.Int64N(int64(perChange) + 1)))
		cmd.Process.Kill()
		io.Copy(io.Discard, out)
		if err := cmd.Wait(); err == nil {
			t.Fatalf("round %d: the child ended by itself", round)
		}

		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Version int                        `json:"version"`
			Tasks   map[string]retry.TaskState `json:"tasks"`
		}
		if err := json.Unmarshal(data, &doc); err != nil || doc.Version != retry.StateVersion || len(doc.Tasks) != tasks+1 {
			t.Fatalf("round %d: killed after change %d, the file is not a whole state (%v, %d tasks):\n%.300s", round, reported, err, len(doc.Tasks), data)
		}
		w := doc.Tasks["w"]
		n := w.Counters["n"]
		if n < reported || w.Counters["m"] != n || w.LastRecord != "change "+strconv.Itoa(n) {
			t.Fatalf("round %d: killed after change %d, the file holds %+v", round, reported, w)
		}
		temps := func() []string {
			m, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".state.json.tmp-*"))
			return m
		}
		cut += len(temps())
		if _, err := retry.OpenStore(path); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if left := temps(); len(left) != 0 {
			t.Errorf("round %d: OpenStore left %v", round, left)
		}
	}
	t.Logf("%d of %d kills cut a write short", cut, rounds)
}

// stateChildCmd is the command that runs this test binary as
// TestStateChild with args.
func stateChildCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestStateChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envStateChild+"="+strings.Join(args, "\n"))
	return cmd
}

// stateChild runs this test binary as TestStateChild with args, and returns
// its stdout.
func stateChild(t *testing.T, args ...string) string {
	t.Helper()
	cmd := stateChildCmd(args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("state child %v: %v\n%s%s", args, err, out.String(), errb.String())
	}
	s, _, _ := strings.Cut(out.String(), "PASS\n")
	return strings.TrimSpace(s)
}

const envStateChild = "PILOT_TEST_STATE_CHILD"

// TestStateChild is a child process of the state tests. It opens the store
// at PATH, then:
//
//   - "open PATH" says "opened";
//   - "retry PATH RUNDIR" runs a failing task through retry.Dispatch with
//     the store and prints the verdict;
//   - "bump PATH ID N" says "ready", waits for its stdin to close, bumps
//     counter "n" of task "shared" and of task "own/ID" N times, and says
//     "done";
//   - "write PATH" changes task "w" until it is killed (counters "n" and
//     "m" one more, its LastRecord "change <n>"), printing each n written.
func TestStateChild(t *testing.T) {
	spec := os.Getenv(envStateChild)
	if spec == "" {
		t.Skip("only a child process of the state tests")
	}
	args := strings.Split(spec, "\n")
	s, err := retry.OpenStore(args[1])
	if err != nil {
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
	case "bump":
		n, _ := strconv.Atoi(args[3])
		if len(args) > 4 || n <= 0 {
			fmt.Println("error: want bump PATH ID N")
			return
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		for range n {
			for _, name := range []string{"shared", "own/" + args[2]} {
				if _, _, err := s.Bump(name, "n", 0, ""); err != nil {
					fmt.Println("error:", err)
					return
				}
			}
		}
		fmt.Println("done")
	case "write":
		for {
			n := 0
			if err := s.UpdateTask("w", func(ts *retry.TaskState) {
				n = ts.Counters["n"] + 1
				ts.Counters = map[string]int{"n": n, "m": n}
				ts.LastRecord = "change " + strconv.Itoa(n)
			}); err != nil {
				fmt.Println("error:", err)
				return
			}
			fmt.Println(n)
		}
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
	var v retry.Result
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
