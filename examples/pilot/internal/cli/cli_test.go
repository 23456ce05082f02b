package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
)

func TestMain(m *testing.M) {
	pilottest.ServeFakeAgent()
	if os.Getenv(envRunMain) != "" {
		if os.Getenv(envNoLandlock) != "" {
			if err := denyLandlock(); err != nil {
				fmt.Fprintln(os.Stderr, "denying Landlock:", err)
				os.Exit(97)
			}
		}
		os.Exit(Main(Hooks{})) // this test binary as the pilot command
	}
	// A race-detector build waits a second at exit by default; the
	// supervisor and the fake agents are this binary.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	// Keep the user's providers file and stored credentials out of the
	// tests: the config dir is an empty one of their own (tests that need
	// a config dir set their own with t.Setenv).
	config, err := os.MkdirTemp("", "pilot-cli-test-config-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("XDG_CONFIG_HOME", config)
	// Runs (the demo's too), installs and their manifest go to dirs of
	// the tests' own, never the user's.
	os.Setenv("XDG_STATE_HOME", filepath.Join(config, "state"))
	os.Setenv("XDG_DATA_HOME", filepath.Join(config, "data"))
	os.Unsetenv(envProvidersFile)
	code := m.Run()
	// End pilot's supervisor now, not when it has idled 5 s.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	if err := pilot.Shutdown(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "ending pilot's supervisor:", err)
		code = 1
	}
	cancel()
	os.RemoveAll(config)
	os.Exit(code)
}

// envRunMain makes the test binary run the pilot command's main, for tests
// that signal a real pilot process.
const envRunMain = "PILOT_TEST_RUN_MAIN"

// envNoLandlock makes that pilot command one on a kernel without Landlock
// (denyLandlock; Linux only).
const envNoLandlock = "PILOT_TEST_NO_LANDLOCK"

// fixture is a workdir, a task file and a providers file whose providers
// run this test binary as the fake agent.
type fixture struct {
	dir, workdir, taskFile, providers, runDir string
}

func newFixture(t *testing.T, scripts map[string][]string) fixture {
	t.Helper()
	dir := t.TempDir()
	f := fixture{
		dir:       dir,
		workdir:   filepath.Join(dir, "work"),
		taskFile:  filepath.Join(dir, "task.md"),
		providers: filepath.Join(dir, "providers.json"),
		runDir:    filepath.Join(dir, "runs"),
	}
	os.Mkdir(f.workdir, 0o755)
	os.WriteFile(f.taskFile, []byte("# task\nsay hello\n"), 0o644)
	provs := map[string]any{}
	for name, script := range scripts {
		provs[name] = fakeProvider(t, script...)
	}
	data, _ := json.Marshal(map[string]any{"providers": provs})
	os.WriteFile(f.providers, data, 0o644)
	return f
}

func (f fixture) args(cmd, provider string, extra ...string) []string {
	return append([]string{cmd, "--provider", provider, "--mode", "review", "--task-file", f.taskFile,
		"--workdir", f.workdir, "--providers-file", f.providers, "--run-dir", f.runDir}, extra...)
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	return runCLIWithInput("", args...)
}

func runCLIWithInput(input string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(input), &out, &errb)
	return code, out.String(), errb.String()
}

func TestDispatchPrintsStartedThenVerdict(t *testing.T) {
	f := newFixture(t, map[string][]string{
		"ok":     {"out=hello"},
		"silent": {},
		"broken": {"err=boom", "exit=3"},
	})
	for _, tt := range []struct {
		provider string
		code     int
		verdict  string
	}{
		{"ok", 0, "completed"},
		{"silent", 1, "empty"},
		{"broken", 1, "error"},
	} {
		t.Run(tt.provider, func(t *testing.T) {
			code, out, errOut := runCLI(f.args("dispatch", tt.provider)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errOut)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != 2 {
				t.Fatalf("stdout has %d lines, want exactly 2:\n%s", len(lines), out)
			}
			var started, verdict map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &started); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(lines[1]), &verdict); err != nil {
				t.Fatal(err)
			}
			got := []any{started["type"], started["provider"], verdict["type"], verdict["verdict"], started["run_id"] == verdict["run_id"]}
			want := []any{"worker_runner.started", tt.provider, "worker_runner.verdict", tt.verdict, true}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("contract fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDispatchSpawnFailureKeepsTwoLines(t *testing.T) {
	f := newFixture(t, nil)
	os.WriteFile(f.providers, []byte(`{"providers":{"gone":{"runner":"command","argv":["/nonexistent/agent-cli"]}}}`), 0o644)
	code, out, _ := runCLI(f.args("dispatch", "gone")...)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 1 || len(lines) != 2 || !strings.Contains(lines[1], `"failure_class":"spawn-failed"`) {
		t.Fatalf("exit %d, stdout:\n%s\nwant exit 1 and a started line then a spawn-failed verdict", code, out)
	}
	var started map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &started); err != nil {
		t.Fatal(err)
	}
	if started["synthesized"] != true || started["pid"] != nil || started["started_at"] != nil ||
		!strings.Contains(fmt.Sprint(started["reason"]), "spawn-failed") || started["provider"] != "gone" {
		t.Errorf("started line %v; want a synthesized one that says the spawn failed, with no pid or start time", started)
	}
}

func TestDispatchResumeFlag(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=resumed {resume}"}})
	args := func(extra ...string) []string {
		a := f.args("dispatch", "ok", extra...)
		for i := range a {
			if a[i] == "review" {
				a[i] = "resume"
			}
		}
		return a
	}
	code, _, errOut := runCLI(args()...)
	if code != 2 || !strings.Contains(errOut, "--mode resume needs --resume") || strings.Contains(errOut, "Task.Resume") {
		t.Errorf("without --resume: exit %d, stderr %q; want 2 naming the flag", code, errOut)
	}
	code, out, errOut := runCLI(args("--resume", "sess-123")...)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("with --resume: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	var v pilot.Verdict
	if err := json.Unmarshal([]byte(lines[1]), &v); err != nil {
		t.Fatal(err)
	}
	rec, err := pilot.ReadRecord(v.Record)
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := os.ReadFile(rec.StreamLog)
	if !strings.Contains(string(stream), "resumed sess-123") {
		t.Errorf("the worker did not get the session to resume: stream %q", stream)
	}
}

// dispatch --worktree outside a git repository says what it needs, as a
// dispatch (no "job 1"), and runs nothing.
func TestDispatchWorktreeOutsideARepository(t *testing.T) {
	f := newFixture(t, map[string][]string{"writer": {"out=wrote it"}})
	code, out, errOut := runCLI(f.args("dispatch", "writer", "--worktree")...)
	want := "pilot dispatch: workdir " + f.workdir + " is not a git repository: worktree jobs need one (give a workdir inside a git repository, or run git init there)\n"
	if code != 2 || out != "" || errOut != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, out, errOut, want)
	}
}

func TestDispatchWorktree(t *testing.T) {
	f := newFixture(t, map[string][]string{"writer": {`write={workdir}/made.txt=by the worker\n`, "out=wrote it"}})
	repo := pilottest.GitRepo(t)
	args := f.args("dispatch", "writer", "--worktree")
	for i := range args {
		if args[i] == f.workdir {
			args[i] = repo
		}
	}
	code, out, errOut := runCLI(args...)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if strings.Contains(lines[0], `"job"`) {
		t.Errorf("the started line of a dispatch names a job: %s", lines[0])
	}
	var v outVerdict
	if err := json.Unmarshal([]byte(lines[1]), &v); err != nil {
		t.Fatal(err)
	}
	if v.Worktree == nil || !v.Worktree.Kept || v.Worktree.Branch == "" {
		t.Fatalf("verdict worktree %+v; want a kept worktree on a branch", v.Worktree)
	}
	if data, err := os.ReadFile(filepath.Join(v.Worktree.Path, "made.txt")); err != nil || string(data) != "by the worker\n" {
		t.Errorf("the worktree's file: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(repo, "made.txt")); !os.IsNotExist(err) {
		t.Errorf("the worker wrote into the repository itself: %v", err)
	}
	// The work is committed on the worktree's branch, beside the
	// repository (or in --worktree-dir).
	if v.Worktree.Commit == "" || gitOut(t, repo, "diff", "--name-only", v.Worktree.Base, v.Worktree.Branch) != "made.txt" {
		t.Errorf("the worker's work is not on %s: %+v", v.Worktree.Branch, v.Worktree)
	}
	top := gitOut(t, repo, "rev-parse", "--show-toplevel")
	if filepath.Dir(v.Worktree.Path) != top+".pilot-worktrees" {
		t.Errorf("worktree at %s, want it in %s.pilot-worktrees", v.Worktree.Path, top)
	}
	wtDir := filepath.Join(t.TempDir(), "trees")
	code, out, errOut = runCLI(append(args, "--worktree-dir", wtDir)...)
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &v) != nil || filepath.Dir(v.Worktree.Path) != wtDir {
		t.Errorf("--worktree-dir %s: exit %d, stdout %q, stderr %q", wtDir, code, out, errOut)
	}
	if code, _, errOut := runCLI(append(args, "--mode", "resume", "--resume", "x")...); code != 2 || !strings.Contains(errOut, "--worktree cannot resume") {
		t.Errorf("--worktree with resume: exit %d, stderr %q", code, errOut)
	}
}

func TestBadInputExits2WithAMessageThatNamesTheProblem(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=hi"}})
	badProviders := filepath.Join(f.dir, "bad.json")
	os.WriteFile(badProviders, []byte(`{"providers":{"ok":{"runner":"command","argv":["x"],"bogus":1}}}`), 0o644)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no command", nil, []string{"usage: pilot"}},
		{"unknown command", []string{"frobnicate"}, []string{`unknown command "frobnicate"`}},
		{"missing provider", []string{"dispatch", "--mode", "code"}, []string{"--provider is required"}},
		{"unknown mode", f.args("dispatch", "ok", "--mode", "write"), []string{"--mode", `"write"`}},
		{"unknown provider", f.args("dispatch", "nope"), []string{"unknown provider: nope"}},
		{"task file missing", append(f.args("dispatch", "ok"), "--task-file", "/nonexistent/task.md"), []string{"--task-file", "not found"}},
		{"workdir missing", append(f.args("dispatch", "ok"), "--workdir", "/nonexistent/dir"), []string{"--workdir"}},
		{"bad timeout", f.args("dispatch", "ok", "--timeout", "soon"), []string{"-timeout", "want a positive duration"}},
		{"unknown field in providers file", append(f.args("run", "ok"), "--providers-file", badProviders), []string{`"bogus"`, badProviders}},
		{"stray argument", append(f.args("dispatch", "ok"), "extra"), []string{`unexpected argument "extra"`}},
		{"credentials without provider", []string{"credentials"}, []string{"provider name is required"}},
		{"credentials of an unknown provider", []string{"credentials", "nope"}, []string{"unknown provider: nope", "glm"}},
		{"template without mode", []string{"template"}, []string{"a mode is required"}},
		{"template of an unknown mode", []string{"template", "write"}, []string{`"write"`, "code, explore, test, review"}},
		{"providers file missing", []string{"providers", "--providers-file", "/nonexistent/p.json"}, []string{"/nonexistent/p.json", "does not exist"}},
		{"providers file invalid", []string{"providers", "--providers-file", badProviders}, []string{`"bogus"`, badProviders}},
		{"negative timeout", f.args("dispatch", "ok", "--timeout", "-5"), []string{`pilot dispatch: --timeout: want a positive duration (30s, 5m, or seconds), got "-5" (see pilot dispatch --help)`}},
		{"unknown flag", f.args("dispatch", "ok", "--bogus"), []string{"pilot dispatch: unknown flag --bogus (see pilot dispatch --help)"}},
		{"flag without a value", []string{"dispatch", "--provider"}, []string{"pilot dispatch: --provider: needs a value"}},
		{"classify with an unknown runner", []string{"classify", "--runner", "bogus"}, []string{`--runner: unknown runner "bogus": want one of command, pi, codex, claude, opencode, gemini`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing on bad input", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q does not mention %q", errOut, w)
				}
			}
			// One line, never the whole usage, never "pilot X: pilot: ".
			if strings.Count(errOut, "\n") > 1 && !strings.HasPrefix(errOut, "usage:") && tt.name != "unknown command" {
				t.Errorf("stderr is %d lines, want one:\n%s", strings.Count(errOut, "\n"), errOut)
			}
			if strings.Contains(errOut, ": pilot: ") {
				t.Errorf("stderr has a doubled prefix: %q", errOut)
			}
		})
	}
}

func TestDurationsTakeUnitsOrSeconds(t *testing.T) {
	for in, want := range map[string]time.Duration{"30s": 30 * time.Second, "5m": 5 * time.Minute, "90": 90 * time.Second, "1.5": 1500 * time.Millisecond, "1h30m": 90 * time.Minute} {
		var d time.Duration
		if err := (seconds{&d}).Set(in); err != nil || d != want {
			t.Errorf("%q: %v, %v; want %v", in, d, err, want)
		}
	}
	for _, bad := range []string{"-5", "0", "0s", "soon", "-1m"} {
		var d time.Duration
		if err := (seconds{&d}).Set(bad); err == nil {
			t.Errorf("%q: accepted as %v", bad, d)
		}
	}
}

func TestRunSummarySaysWhyASpawnFailed(t *testing.T) {
	f := newFixture(t, nil)
	os.WriteFile(f.providers, []byte(`{"providers":{"gone":{"runner":"command","argv":["/nonexistent/agent-cli"]}}}`), 0o644)
	code, _, errOut := runCLI(f.args("run", "gone")...)
	if code != 1 || !strings.Contains(errOut, "pilot: error (spawn-failed)") || !strings.Contains(errOut, "/nonexistent/agent-cli") {
		t.Errorf("exit %d, summary %q; want the spawn failure and its reason", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "version"} {
		code, out, errOut := runCLI(arg)
		if code != 0 || !strings.HasPrefix(out, "pilot ") || !strings.Contains(out, runtime.Version()) || errOut != "" {
			t.Errorf("pilot %s: exit %d, %q %q", arg, code, out, errOut)
		}
	}
}

func TestHelpOnEveryCommand(t *testing.T) {
	// A help asked for goes to stdout and exits 0 (pilot-workers' contract).
	for _, cmd := range []string{"dispatch", "run", "fanout", "schedule", "state", "demo", "providers", "template", "credentials", "classify", "phase", "worktrees"} {
		for _, h := range []string{"--help", "-h"} {
			code, out, errOut := runCLI(cmd, h)
			if code != 0 || !strings.Contains(out, "usage: pilot "+cmd) || errOut != "" {
				t.Errorf("pilot %s %s: exit %d, stdout %q, stderr %q; want 0 and the usage on stdout", cmd, h, code, out, errOut)
			}
		}
	}
	// A flag error still goes to stderr, exit 2.
	if code, out, errOut := runCLI("dispatch", "--nonsense"); code != 2 || out != "" || !strings.Contains(errOut, "nonsense") {
		t.Errorf("a bad flag: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestRunStreamsOutputAndEndsWithASummaryOnStderr(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=line one", "err=a warning", "out=line two"}})
	code, out, errOut := runCLI(f.args("run", "ok")...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	// stdout is the worker's own output, nothing of pilot's in it: a
	// pipe gets what the worker printed.
	if out != "line one\nline two\n" {
		t.Errorf("stdout:\n%s\nwant the worker's two lines alone", out)
	}
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if len(lines) != 2 || lines[0] != "a warning" || !strings.HasPrefix(lines[1], "pilot: completed, exit 0") {
		t.Errorf("stderr = %q, want the worker's stderr, then pilot's summary", errOut)
	}
}

func TestDemoShowsEachOutcomeAndLeavesNothingRunning(t *testing.T) {
	code, out, errOut := runCLI("demo")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	// The runs it points at are kept, to read.
	if entries, err := os.ReadDir(demoRunDir()); err != nil || len(entries) < len(demoJobs) || !strings.Contains(out, demoRunDir()) {
		t.Errorf("the demo's runs in %s: %d entries, %v; output names it: %v", demoRunDir(), len(entries), err, strings.Contains(out, demoRunDir()))
	}
	for _, want := range []string{"completed", "empty", "provider-server-error", "process-terminated", "timeout", "SIGKILL", "still alive: 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI("demo", "--json")
	var vs []map[string]any
	if err := json.Unmarshal([]byte(out), &vs); code != 0 || err != nil || len(vs) != len(demoJobs) {
		t.Fatalf("demo --json: exit %d, %v, %d verdicts:\n%s", code, err, len(vs), out)
	}
	var got []string
	for _, v := range vs {
		fc, _ := v["failure_class"].(string)
		got = append(got, v["verdict"].(string)+"/"+fc)
	}
	want := []string{"completed/", "empty/", "error/provider-server-error", "error/process-terminated", "error/timeout", "error/timeout"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("demo verdicts in job order (-want +got):\n%s", diff)
	}
}

// TestCredentialsStatus is what 'pilot credentials PROVIDER' did before it
// stored secrets, now under --status.
func TestCredentialsStatus(t *testing.T) {
	f := newFixture(t, nil)
	os.WriteFile(f.providers, []byte(`{"providers":{"glm":{"runner":"command","argv":["x"],"credential_env":"PILOT_TEST_GLM_KEY"}}}`), 0o644)
	t.Setenv("PILOT_TEST_GLM_KEY", "")
	code, out, errOut := runCLI("credentials", "glm", "--status", "--providers-file", f.providers)
	if code != 1 || !strings.Contains(out, `"configured":false`) || !strings.Contains(errOut, "PILOT_TEST_GLM_KEY") {
		t.Errorf("missing key: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	t.Setenv("PILOT_TEST_GLM_KEY", "secret-value-123")
	code, out, _ = runCLI("credentials", "glm", "--status", "--providers-file", f.providers)
	if code != 0 || !strings.Contains(out, `"configured":true`) || strings.Contains(out, "secret-value-123") {
		t.Errorf("set key: exit %d, stdout %q", code, out)
	}
}

func TestClassify(t *testing.T) {
	const line = "provider_tunnel_error: dial tcp 192.0.2.1:8001: connect: connection refused"
	file := filepath.Join(t.TempDir(), "stderr.txt")
	os.WriteFile(file, []byte("unrelated warning\n"+line+"\n"), 0o644)
	tests := []struct {
		name  string
		input string
		args  []string
		want  string
	}{
		{"file", "", []string{"classify", file},
			`{"failure_class":"provider-connection","evidence":"` + line + `","evidence_source":"command:stderr","provider_transport_failure_confirmed":true}`},
		{"stdin", "curl error: failure when receiving data from the peer\n", []string{"classify", "-"},
			`{"failure_class":"generic-error","evidence":null,"evidence_source":null,"provider_transport_failure_confirmed":false}`},
		{"pi stdout is not a diagnostic", line + "\n", []string{"classify", "--runner", "pi", "--stream", "stdout"},
			`{"failure_class":"generic-error","evidence":null,"evidence_source":null,"provider_transport_failure_confirmed":false}`},
		{"pi stderr is", line + "\n", []string{"classify", "--runner", "pi"},
			`{"failure_class":"provider-connection","evidence":"` + line + `","evidence_source":"pi:stderr","provider_transport_failure_confirmed":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLIWithInput(tt.input, tt.args...)
			if code != 0 || strings.TrimSpace(out) != tt.want {
				t.Errorf("exit %d, stdout %s (stderr %q)\nwant %s", code, out, errOut, tt.want)
			}
		})
	}
	if code, _, errOut := runCLI("classify", "/nonexistent/file"); code != 2 || !strings.Contains(errOut, "/nonexistent/file") {
		t.Errorf("missing file: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCLI("classify", "--stream", "stdin"); code != 2 || !strings.Contains(errOut, "--stream") {
		t.Errorf("bad --stream: exit %d, stderr %q", code, errOut)
	}
}

// pilot classify reads a run of pilot's own, by its id or its stream.log
// (whose lines say their stream), as the run's runner, and gives the
// verdict's class and evidence.
func TestClassifyARun(t *testing.T) {
	const line = "Error: 429 Too Many Requests: rate limit exceeded"
	f := newFixture(t, map[string][]string{"rl": {"out=working", "err=" + line, "exit=1"}})
	code, out, errOut := runCLI(f.args("dispatch", "rl")...)
	if code != 1 {
		t.Fatalf("dispatch: exit %d, stderr %q", code, errOut)
	}
	var v pilot.Verdict
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &v); err != nil {
		t.Fatalf("the verdict %q: %v", out, err)
	}
	if v.FailureClass != pilot.FailProviderRateLimit || v.EvidenceExcerpt != line {
		t.Fatalf("the run's verdict: %s %q; want a rate limit with its line as evidence", v.FailureClass, v.EvidenceExcerpt)
	}
	want := fmt.Sprintf(`{"failure_class":"provider-rate-limit","evidence":%q,"evidence_source":%q,"provider_transport_failure_confirmed":%v}`,
		line, v.EvidenceSource, v.TransportConfirmed)
	for _, args := range [][]string{
		{"classify", "--run-dir", f.runDir, v.RunID},
		{"classify", "--run-dir", f.runDir, v.RunID[:len(v.RunID)-4]},
		{"classify", filepath.Join(filepath.Dir(v.Record), "stream.log")},
	} {
		code, out, errOut := runCLI(args...)
		if code != 0 || strings.TrimSpace(out) != want {
			t.Errorf("pilot %v: exit %d, stdout %s (stderr %q)\nwant %s", args, code, out, errOut, want)
		}
	}
	if code, _, errOut := runCLI("classify", "--run-dir", f.runDir, "no-such-run"); code != 2 || !strings.Contains(errOut, "no-such-run is no file, and no run") {
		t.Errorf("an unknown run: exit %d, stderr %q", code, errOut)
	}
}

func TestPhase(t *testing.T) {
	session := `{"type":"session","version":3,"id":"s","timestamp":"2026-07-25T00:00:00.000Z","cwd":"/tmp"}
{"type":"message","id":"u1","parentId":null,"timestamp":"2026-07-25T00:00:01.000Z","message":{"role":"user","content":"go"}}
{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-07-25T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"call-1","name":"bash","arguments":{}}],"stopReason":"toolUse"}}
`
	file := filepath.Join(t.TempDir(), "session.jsonl")
	os.WriteFile(file, []byte(session), 0o644)
	want := `{"phase":"tool-running","reason":"tool-results-pending","expected_tool_call_ids":["call-1"],"completed_tool_call_ids":[],"pending_tool_call_ids":["call-1"],"version":3,"leaf_id":"a1","stop_reason":"toolUse","error_message":""}`
	for _, args := range [][]string{{"phase", file}} {
		code, out, errOut := runCLI(args...)
		if code != 0 || strings.TrimSpace(out) != want {
			t.Errorf("pilot %v: exit %d, stdout %s (stderr %q)\nwant %s", args, code, out, errOut, want)
		}
	}
	code, out, _ := runCLIWithInput(session, "phase", "-")
	if code != 0 || strings.TrimSpace(out) != want {
		t.Errorf("pilot phase -: exit %d, stdout %s", code, out)
	}
	code, out, _ = runCLIWithInput("", "phase")
	if code != 0 || !strings.Contains(out, `"phase":"starting"`) {
		t.Errorf("pilot phase on empty stdin: exit %d, stdout %s", code, out)
	}
	if code, _, errOut := runCLI("phase", "/nonexistent/session.jsonl"); code != 2 || !strings.Contains(errOut, "/nonexistent/session.jsonl") {
		t.Errorf("missing file: exit %d, stderr %q", code, errOut)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// --log json writes every event of the demo's dispatches to stderr as
// slog JSON records, a failed verdict at WARN; a bad value is a one-line
// error.
func TestLogFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	run(context.Background(), []string{"demo", "--json", "--log", "json", "--run-dir", t.TempDir()}, nil, &stdout, &stderr)
	verdicts := 0
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var rec struct{ Level, Msg, Provider string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			continue // the demo's own lines
		}
		if rec.Msg == "worker_runner.verdict" {
			verdicts++
			if rec.Provider == "fails" && rec.Level != "WARN" {
				t.Errorf("the failed job's verdict is logged at %s, want WARN", rec.Level)
			}
		}
	}
	if verdicts != len(demoJobs) {
		t.Errorf("%d verdict records on stderr, want one per demo job (%d):\n%s", verdicts, len(demoJobs), stderr.String())
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"demo", "--log", "xml"}, nil, &stdout, &stderr); code != exitBadInput {
		t.Errorf("--log xml: exit %d, want %d", code, exitBadInput)
	}
	if got := strings.TrimSpace(stderr.String()); strings.Count(got, "\n") != 0 || !strings.Contains(got, "--log") {
		t.Errorf("--log xml: want a one-line error naming the flag, got %q", got)
	}
}
