package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/retry"
)

// fakeWaits replaces the retry clock for one test and returns the waits it
// was asked for.
func fakeWaits(t *testing.T) *[]time.Duration {
	var waits []time.Duration
	old := retrySleep
	retrySleep = func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}
	t.Cleanup(func() { retrySleep = old })
	return &waits
}

// jsonLines parses every line of out as a JSON object.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var ms []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q (%v)", l, err)
		}
		ms = append(ms, m)
	}
	return ms
}

func TestDispatchMaxFailuresRetriesThenBlocks(t *testing.T) {
	waits := fakeWaits(t)
	f := newFixture(t, map[string][]string{"broken": {"err=boom", "exit=3"}})
	state := filepath.Join(f.dir, "state")
	code, out, errOut := runCLI(f.args("dispatch", "broken", "--max-failures", "3", "--state", state)...)
	if code != exitFailed {
		t.Fatalf("exit %d, want 1 (stderr %q)", code, errOut)
	}
	// stdout keeps exactly two lines, the first attempt's started line and
	// the verdict; the later attempts' started lines go to stderr.
	lines := jsonLines(t, out)
	if len(lines) != 2 || lines[0]["type"] != "worker_runner.started" {
		t.Fatalf("%d lines, want the first started line and the verdict:\n%s", len(lines), out)
	}
	if n := strings.Count(errOut, `"type":"worker_runner.started"`); n != 2 {
		t.Errorf("%d started lines on stderr, want the 2 retries'", n)
	}
	v := lines[1]
	if v["type"] != "worker_runner.verdict" || v["verdict"] != "error" || v["failure_class"] != "generic-error" ||
		v["attempts"] != 3.0 || v["blocked"] != true || v["blocked_reason"] != "recovery failure limit exhausted: 3/3" {
		t.Errorf("verdict %v", v)
	}
	if len(*waits) != 2 || strings.Count(errOut, "retrying afresh") != 2 {
		t.Errorf("%d waits; stderr %q; want 2 retries", len(*waits), errOut)
	}
	rec, err := pilot.ReadRecord(v["record"].(string))
	if err != nil || rec.Attempt != 3 || rec.PreviousRecord == "" {
		t.Errorf("last record: attempt %d previous %q (%v)", rec.Attempt, rec.PreviousRecord, err)
	}

	// A new process (this run again) sees the block and runs nothing; the
	// two-line shape holds.
	before, _ := os.ReadDir(f.runDir)
	code, out, errOut = runCLI(f.args("dispatch", "broken", "--max-failures", "3", "--state", state)...)
	lines = jsonLines(t, out)
	if code != exitFailed || len(lines) != 2 || lines[1]["blocked"] != true || lines[1]["attempts"] != nil {
		t.Errorf("exit %d, stdout:\n%s\nstderr %q; want a blocked verdict and no attempt", code, out, errOut)
	}
	// Its started line says no worker started, and why, with no pid or
	// start time made up.
	if st := lines[0]; st["type"] != "worker_runner.started" || st["synthesized"] != true || st["pid"] != nil || st["started_at"] != nil ||
		!strings.HasPrefix(fmt.Sprint(st["reason"]), "blocked: recovery failure limit exhausted") {
		t.Errorf("started line %v; want a synthesized one saying it is blocked", st)
	}
	if after, _ := os.ReadDir(f.runDir); len(after) != len(before) {
		t.Errorf("the blocked task ran: %d run directories, were %d", len(after), len(before))
	}
}

func TestDispatchMaxFailuresSucceedsOnRetry(t *testing.T) {
	waits := fakeWaits(t)
	f := newFixture(t, nil)
	// Fails until the marker exists; the first attempt makes it.
	marker := filepath.Join(f.dir, "marker")
	writeProviders(t, f.providers, map[string]map[string]any{"flaky": {
		"runner": "command",
		"argv":   []string{"sh", "-c", "if [ -e " + marker + " ]; then echo done; else touch " + marker + "; echo boom >&2; exit 3; fi"},
	}})
	state := filepath.Join(f.dir, "state")
	code, out, errOut := runCLI(f.args("dispatch", "flaky", "--max-failures", "2", "--state", state)...)
	lines := jsonLines(t, out)
	if code != exitOK || len(lines) != 2 {
		t.Fatalf("exit %d, stdout:\n%s\nstderr %q", code, out, errOut)
	}
	if v := lines[1]; v["verdict"] != "completed" || v["attempts"] != 2.0 || v["blocked"] != nil {
		t.Errorf("verdict %v", v)
	}
	if len(*waits) != 1 {
		t.Errorf("waits %v", *waits)
	}
	s, err := retry.OpenStore(filepath.Join(state, retry.StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, name := range s.Tasks() {
		if ts := s.Task(name); len(ts.RecoveryFailures) != 0 || ts.Blocked != "" {
			t.Errorf("after the success: %+v", ts)
		}
	}
}

// Pilots share a state directory: a dispatch, then pilot state
// --clear-blocked, run while another pilot has the store open, and each
// sees the other's changes.
func TestDispatchSharesTheStateWithAnotherPilot(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=hi"}})
	state := filepath.Join(f.dir, "state")
	other, err := retry.OpenStore(filepath.Join(state, retry.StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	const blocked = "other/01_task"
	if err := other.UpdateTask(blocked, func(ts *retry.TaskState) { ts.Blocked = "recovery failure limit exhausted: 2/2" }); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(f.args("dispatch", "ok", "--max-failures", "2", "--state", state)...)
	if code != exitOK {
		t.Fatalf("dispatch beside another pilot: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	names := other.Tasks()
	if len(names) != 2 {
		t.Fatalf("the other pilot sees tasks %v, want its own and the dispatch's", names)
	}
	for _, name := range names {
		if ts := other.Task(name); name != blocked && (ts.LastRecord == "" || ts.Blocked != "") {
			t.Errorf("the other pilot sees the dispatch's task %s as %+v", name, ts)
		}
	}
	if other.Task(blocked).Blocked == "" {
		t.Error("the dispatch lost the other pilot's block")
	}

	code, out, errOut = runCLI("state", "--state", state, "--clear-blocked", "other")
	if code != exitOK || !strings.Contains(out, blocked) {
		t.Fatalf("pilot state --clear-blocked beside another pilot: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if ts := other.Task(blocked); ts.Blocked != "" {
		t.Errorf("the other pilot still sees the block: %+v", ts)
	}
}

func TestDispatchDefaultIsOneAttemptWithoutRetryFields(t *testing.T) {
	waits := fakeWaits(t)
	f := newFixture(t, map[string][]string{"broken": {"err=boom", "exit=3"}})
	code, out, _ := runCLI(f.args("dispatch", "broken")...)
	lines := jsonLines(t, out)
	if code != exitFailed || len(lines) != 2 {
		t.Fatalf("exit %d, stdout:\n%s", code, out)
	}
	for _, k := range []string{"attempts", "blocked", "blocked_reason", "resumed_from"} {
		if _, ok := lines[1][k]; ok {
			t.Errorf("the verdict has %q without --max-failures: %v", k, lines[1])
		}
	}
	if len(*waits) != 0 {
		t.Errorf("%d waits", len(*waits))
	}
	if _, err := os.Stat(filepath.Join(f.workdir, ".git")); err == nil {
		t.Error("a .git appeared")
	}
}

func TestDispatchStateInTheRepositoryByDefault(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	fakeWaits(t)
	f := newFixture(t, map[string][]string{"broken": {"err=boom", "exit=3"}})
	if out, err := exec.Command("git", "init", "-q", f.workdir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	code, _, errOut := runCLI(f.args("dispatch", "broken", "--max-failures", "2")...)
	if code != exitFailed {
		t.Fatalf("exit %d (%s)", code, errOut)
	}
	s, err := retry.OpenStore(filepath.Join(f.workdir, ".git", "pilot", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if tasks := s.Tasks(); len(tasks) != 1 || s.Task(tasks[0]).Blocked != "recovery failure limit exhausted: 2/2" {
		t.Errorf("state: %v", tasks)
	}
}

func TestDispatchStateProblemsAreBadInput(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=hi"}})
	state := filepath.Join(f.dir, "state")
	os.MkdirAll(state, 0o700)
	path := filepath.Join(state, retry.StateFileName)

	os.WriteFile(path, []byte("{broken"), 0o600)
	code, out, errOut := runCLI(f.args("dispatch", "ok", "--state", state)...)
	if code != exitBadInput || out != "" || !strings.Contains(errOut, path) || !strings.Contains(errOut, "move it aside") {
		t.Errorf("corrupt state: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	for _, bad := range []string{"0", "-1", "x"} {
		code, _, errOut := runCLI(f.args("dispatch", "ok", "--max-failures", bad)...)
		if code != exitBadInput || !strings.Contains(errOut, "positive number of failures") {
			t.Errorf("--max-failures %s: exit %d, stderr %q", bad, code, errOut)
		}
	}
}

func TestFanoutMaxFailures(t *testing.T) {
	waits := fakeWaits(t)
	f := newFixture(t, map[string][]string{"broken": {"err=boom", "exit=3"}, "ok": {"out=hi"}})
	state := filepath.Join(f.dir, "state")
	code, out, errOut := runCLI(f.fanoutArgs("--providers", "broken,ok", "--mode", "review", "--task-file", f.taskFile,
		"--max-failures", "2", "--state", state, "--max-parallel", "1")...)
	if code != exitFailed {
		t.Fatalf("exit %d (%s)", code, errOut)
	}
	vs := fanoutVerdicts(t, out)
	if len(vs) != 2 || vs[0]["blocked"] != true || vs[0]["attempts"] != 2.0 || vs[1]["verdict"] != "completed" || vs[1]["attempts"] != 1.0 {
		t.Errorf("verdicts %v", vs)
	}
	if len(*waits) != 1 || !strings.Contains(errOut, "pilot fanout: broken:review: attempt 1 failed (generic-error, 1/2)") {
		t.Errorf("%d waits; stderr:\n%s", len(*waits), errOut)
	}
	s, err := retry.OpenStore(filepath.Join(state, retry.StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := len(s.Tasks()); n != 2 {
		t.Errorf("%d tasks in the state, want 2", n)
	}
}

// The seed's dry-run retry-blocked: a dry run says what it would clear and
// changes nothing; the real one unblocks only its group.
func TestStateClearBlocked(t *testing.T) {
	fakeWaits(t)
	f := newFixture(t, map[string][]string{"broken": {"err=boom", "exit=3"}})
	state := filepath.Join(f.dir, "state")
	path := filepath.Join(state, retry.StateFileName)

	// Reading a state that does not exist creates nothing.
	code, out, errOut := runCLI("state", "--state", state)
	if code != exitOK || !strings.Contains(out, `"tasks":{}`) {
		t.Errorf("empty state: exit %d, %q %q", code, out, errOut)
	}
	if _, err := os.Stat(state); err == nil {
		t.Error("reading the state created its directory")
	}

	for _, label := range []string{"alpha/01", "beta/01"} {
		if code, _, errOut := runCLI(f.args("dispatch", "broken", "--label", label, "--state", state)...); code != exitFailed {
			t.Fatalf("%s: exit %d (%s)", label, code, errOut)
		}
	}
	before, _ := os.ReadFile(path)

	code, out, errOut = runCLI("state", "--state", state, "--clear-blocked", "alpha", "--dry-run")
	if code != exitOK || !strings.Contains(out, `"cleared":["alpha/01"]`) || !strings.Contains(out, `"dry_run":true`) {
		t.Errorf("dry run: exit %d, %q %q", code, out, errOut)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("the dry run changed the state:\n%s\n%s", before, after)
	}
	if code, _, _ := runCLI(f.args("dispatch", "broken", "--label", "alpha/01", "--state", state)...); code != exitFailed {
		t.Errorf("exit %d", code)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("a blocked job changed the state")
	}

	// A group the state does not hold is an error that lists the groups.
	code, out, errOut = runCLI("state", "--state", state, "--clear-blocked", "gamma")
	if code != exitBadInput || out != "" || !strings.Contains(errOut, `no group "gamma"`) || !strings.Contains(errOut, "alpha, beta") {
		t.Errorf("an unknown group: exit %d, %q %q; want 2 and the groups there are", code, out, errOut)
	}

	code, out, errOut = runCLI("state", "--state", state, "--clear-blocked", "alpha")
	if code != exitOK || !strings.Contains(out, `"cleared":["alpha/01"]`) {
		t.Errorf("clear: exit %d, %q %q", code, out, errOut)
	}
	code, out, _ = runCLI("state", "--state", state)
	var doc struct {
		Tasks map[string]retry.TaskState `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitOK {
		t.Fatalf("state: %v %q", err, out)
	}
	if doc.Tasks["alpha/01"].Blocked != "" || doc.Tasks["beta/01"].Blocked != "recovery failure limit exhausted: 1/1" {
		t.Errorf("after clearing alpha: %+v", doc.Tasks)
	}

	for _, bad := range [][]string{{"state"}, {"state", "--state", state, "--dry-run"}} {
		if code, _, errOut := runCLI(bad...); code != exitBadInput || errOut == "" {
			t.Errorf("%v: exit %d %q", bad, code, errOut)
		}
	}
}

// Budgets survive a restart of the pilot process: two real "pilot
// dispatch" processes (this test binary running main), a budget of 2. The
// first fails once (one failure left), the second fails again and is
// blocked, a third runs nothing.
func TestDispatchBudgetAcrossProcesses(t *testing.T) {
	f := newFixture(t, nil)
	// One process, one attempt: the second attempt of a process would
	// wait for real, so each attempt fails with a class that is not
	// retried but still counts.
	writeProviders(t, f.providers, map[string]map[string]any{"denied": {
		"runner": "command",
		"argv":   []string{"sh", "-c", "echo 'Error: 401 Unauthorized: invalid x-api-key from provider' >&2; exit 1"},
	}})
	state := filepath.Join(f.dir, "state")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pilotProcess := func() (int, []map[string]any) {
		cmd := exec.Command(exe, f.args("dispatch", "denied", "--max-failures", "2", "--state", state)...)
		cmd.Env = append(os.Environ(), envRunMain+"=1")
		out, _ := cmd.Output()
		return cmd.ProcessState.ExitCode(), jsonLines(t, string(out))
	}
	for i, want := range []struct {
		blocked  bool
		attempts any
	}{{false, 1.0}, {true, 1.0}, {true, nil}} {
		code, lines := pilotProcess()
		if code != exitFailed || len(lines) != 2 {
			t.Fatalf("process %d: exit %d, %v", i+1, code, lines)
		}
		v := lines[1]
		if (v["blocked"] == true) != want.blocked || v["attempts"] != want.attempts || v["failure_class"] != "provider-auth" {
			t.Errorf("process %d: verdict %v; want blocked %v after %v attempts", i+1, v, want.blocked, want.attempts)
		}
	}
	if runs, _ := os.ReadDir(f.runDir); len(runs) != 2 {
		t.Errorf("%d run directories, want 2: the blocked third process ran something", len(runs))
	}
}

// A fanout job that waits for its retry shows as waiting in the live
// table, not done: why, and when it runs again; its JSON counts both
// attempts.
func TestFanoutRetryWaitOnATerminal(t *testing.T) {
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "1")
	release := make(chan struct{})
	old := retrySleep
	retrySleep = func(ctx context.Context, _ time.Duration) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	t.Cleanup(func() { retrySleep = old })
	f := newFixture(t, nil)
	// Fails until the marker exists; the first attempt makes it.
	marker := filepath.Join(f.dir, "marker")
	writeProviders(t, f.providers, map[string]map[string]any{"flaky": {
		"runner": "command",
		"argv":   []string{"sh", "-c", "if [ -e " + marker + " ]; then echo done; else touch " + marker + "; echo boom >&2; exit 3; fi"},
	}})
	ptm, pts := openPTY(t, 150, 40)
	defer ptm.Close()
	term := readTerminal(ptm)
	var out bytes.Buffer
	code, ended := make(chan int, 1), make(chan struct{})
	args := f.fanoutArgs("--job", "flaky:review:"+f.taskFile, "--max-failures", "2", "--state", filepath.Join(f.dir, "state"))
	go func() {
		defer close(ended)
		code <- run(context.Background(), args, nil, &out, pts)
	}()
	closed := false
	defer func() {
		if !closed {
			close(release)
		}
		<-ended
		pts.Close()
	}()
	term.waitFor(t, regexp.MustCompile(`pilot fanout: 0/1 done, 0 running, 1 waiting\r\n.*\r\n1 +flaky:review +flaky:review +waiting +- +- +generic-error: retry at \d\d:\d\d:\d\d\r\n`), ended)
	close(release)
	closed = true
	if c := <-code; c != exitOK {
		t.Errorf("exit %d, want 0", c)
	}
	vs := fanoutVerdicts(t, out.String())
	if len(vs) != 1 || vs[0]["verdict"] != "completed" || vs[0]["attempts"] != 2.0 {
		t.Errorf("verdicts %v", vs)
	}
}
