package cli

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
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/pilottest"
)

// The tests below port pilot-workers' tests/test_fanout.py one by one (same
// names, in Go form), then add what that suite could not check with a fake
// Popen: real parallelism, interruption and the live table.

// fanoutArgs is "pilot fanout" on f's workdir, providers and run directory.
func (f fixture) fanoutArgs(extra ...string) []string {
	return append([]string{"fanout", "--workdir", f.workdir, "--providers-file", f.providers, "--run-dir", f.runDir}, extra...)
}

// fakeProvider is a providers-file entry running this test binary as the
// fake agent with script, as newFixture makes them.
func fakeProvider(t *testing.T, script ...string) map[string]any {
	t.Helper()
	p := pilottest.FakeProvider(t, "fake", script...)
	return map[string]any{"runner": p.Runner, "argv": p.Argv, "env": p.Env}
}

func writeProviders(t *testing.T, path string, provs map[string]map[string]any) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"providers": provs})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeJobsFile(t *testing.T, dir string, jobs any) string {
	t.Helper()
	path := filepath.Join(dir, "jobs.json")
	var data []byte
	if s, ok := jobs.(string); ok {
		data = []byte(s)
	} else {
		data, _ = json.Marshal(jobs)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// fanoutVerdicts decodes stdout, which must be exactly one line holding one
// JSON array.
func fanoutVerdicts(t *testing.T, out string) []map[string]any {
	t.Helper()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("stdout is not exactly one line:\n%s", out)
	}
	var vs []map[string]any
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatalf("stdout is not one JSON array of objects: %v\n%s", err, out)
	}
	return vs
}

func jobsOf(vs []map[string]any) []string {
	var out []string
	for _, v := range vs {
		out = append(out, fmt.Sprint(v["job"]))
	}
	return out
}

// startedLines returns stderr's JSON lines.
func startedLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stderr line is not JSON: %v\n%s", err, l)
		}
		out = append(out, m)
	}
	return out
}

// assertNothingRan checks that bad input left no trace: nothing on stdout
// and no run directory.
func assertNothingRan(t *testing.T, f fixture, out string) {
	t.Helper()
	if out != "" {
		t.Errorf("stdout = %q, want nothing on bad input", out)
	}
	if ents, err := os.ReadDir(f.runDir); err == nil && len(ents) > 0 {
		t.Errorf("run directory has %d entries, want none: something was spawned", len(ents))
	}
}

// --- Grammar ---

func TestFanoutJobSpecParses(t *testing.T) {
	f := newFixture(t, map[string][]string{"glm": {"out=done"}})
	code, out, errOut := runCLI(f.fanoutArgs("--job", "glm:review:"+f.taskFile)...)
	if code != 0 {
		t.Fatalf("exit %d, want 0 (stderr %q)", code, errOut)
	}
	if diff := cmp.Diff([]string{"glm:review"}, jobsOf(fanoutVerdicts(t, out))); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
}

func TestFanoutJobSpecPathWithColonsParsesViaLeftSplit(t *testing.T) {
	f := newFixture(t, map[string][]string{"glm": {"out=done"}})
	colonPath := filepath.Join(f.dir, "a:b.md")
	os.WriteFile(colonPath, []byte("# task\n"), 0o644)
	code, out, errOut := runCLI(f.fanoutArgs("--job", "glm:review:"+colonPath)...)
	if code != 0 {
		t.Fatalf("exit %d, want 0 (stderr %q)", code, errOut)
	}
	vs := fanoutVerdicts(t, out)
	// The worker got the whole path: its record says which task file ran.
	data, err := os.ReadFile(fmt.Sprint(vs[0]["record"]))
	if err != nil {
		t.Fatal(err)
	}
	var rec pilot.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.TaskFile != colonPath {
		t.Errorf("the worker's task file is %q, want %q", rec.TaskFile, colonPath)
	}
}

func TestFanoutUnknownProviderExits2(t *testing.T) {
	f := newFixture(t, map[string][]string{"glm": {"out=done"}})
	code, out, errOut := runCLI(f.fanoutArgs("--job", "bogus:review:"+f.taskFile)...)
	if code != 2 || !strings.Contains(errOut, "unknown provider") {
		t.Errorf("exit %d, stderr %q; want 2 and \"unknown provider\"", code, errOut)
	}
	assertNothingRan(t, f, out)
}

func TestFanoutResumeModeRejected(t *testing.T) {
	f := newFixture(t, map[string][]string{"glm": {"out=done"}})
	code, out, errOut := runCLI(f.fanoutArgs("--job", "glm:resume:"+f.taskFile)...)
	if code != 2 || !strings.Contains(errOut, "resume is not supported in fanout") {
		t.Errorf("exit %d, stderr %q; want 2 and the resume message", code, errOut)
	}
	assertNothingRan(t, f, out)
}

func TestFanoutNoJobsExits2(t *testing.T) {
	f := newFixture(t, map[string][]string{"glm": {"out=done"}})
	code, out, errOut := runCLI(f.fanoutArgs()...)
	if code != 2 || !strings.Contains(errOut, "at least one job is required") {
		t.Errorf("exit %d, stderr %q; want 2 and \"at least one job is required\"", code, errOut)
	}
	assertNothingRan(t, f, out)
}

func TestFanoutProvidersShorthandExpands(t *testing.T) {
	f := newFixture(t, map[string][]string{"kimi-k3": {"out=done"}, "glm": {"out=done"}})
	code, out, errOut := runCLI(f.fanoutArgs("--providers", "kimi-k3,glm", "--mode", "review", "--task-file", f.taskFile)...)
	if code != 0 {
		t.Fatalf("exit %d, want 0 (stderr %q)", code, errOut)
	}
	if diff := cmp.Diff([]string{"kimi-k3:review", "glm:review"}, jobsOf(fanoutVerdicts(t, out))); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if n := len(startedLines(t, errOut)); n != 2 {
		t.Errorf("%d workers started, want 2", n)
	}
}

func TestFanoutJobAndJobsFileTogetherExits2(t *testing.T) {
	f := newFixture(t, map[string][]string{"glm": {"out=done"}})
	jobs := writeJobsFile(t, f.dir, "[]")
	code, out, errOut := runCLI(f.fanoutArgs("--job", "glm:review:"+f.taskFile, "--jobs-file", jobs)...)
	if code != 2 || !strings.Contains(errOut, "--job and --jobs-file are mutually exclusive") {
		t.Errorf("exit %d, stderr %q; want 2 and the conflict named", code, errOut)
	}
	assertNothingRan(t, f, out)
}

// --- Safety guards ---

func TestFanoutCredentialPreflightFailureSpawnsNothing(t *testing.T) {
	f := newFixture(t, nil)
	marker := filepath.Join(f.dir, "worker-ran")
	glm := fakeProvider(t, "session="+marker, "sess=ran", "out=done")
	glm["credential_env"] = "PILOT_TEST_FANOUT_GLM_KEY"
	writeProviders(t, f.providers, map[string]map[string]any{
		"glm":  glm,
		"kimi": fakeProvider(t, "session="+marker, "sess=ran", "out=done"),
	})
	t.Setenv("PILOT_TEST_FANOUT_GLM_KEY", "")
	code, out, errOut := runCLI(f.fanoutArgs("--job", "kimi:review:"+f.taskFile, "--job", "glm:review:"+f.taskFile)...)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	for _, want := range []string{"credential missing for glm", "pilot credentials glm"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q does not mention %q", errOut, want)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a worker ran although a credential was missing")
	}
	assertNothingRan(t, f, out)

	// pilot-workers' order: every job's provider, mode and task file
	// before the credentials, so a later job's bad task file is the error.
	code, out, errOut = runCLI(f.fanoutArgs("--job", "glm:review:"+f.taskFile, "--job", "kimi:review:/nonexistent/task.md")...)
	if code != 2 || !strings.Contains(errOut, "job 2 (kimi:review)") || !strings.Contains(errOut, "task file not found: /nonexistent/task.md") || strings.Contains(errOut, "credential") {
		t.Errorf("exit %d, stderr %q; want the second job's task file named first", code, errOut)
	}
	assertNothingRan(t, f, out)
}

func TestFanoutCodeJobsSameWorkdirWithoutWorktreeExits2(t *testing.T) {
	f := newFixture(t, map[string][]string{"glm": {"out=done"}, "kimi-k3": {"out=done"}})
	jobs := writeJobsFile(t, f.dir, []map[string]any{
		{"provider": "glm", "mode": "code", "task_file": f.taskFile},
		{"provider": "kimi-k3", "mode": "code", "task_file": f.taskFile},
	})
	code, out, errOut := runCLI(f.fanoutArgs("--jobs-file", jobs)...)
	if code != 2 || !strings.Contains(errOut, "jobs 1 (glm:code) and 2 (kimi-k3:code) both write in ") ||
		!strings.Contains(errOut, "multiple code jobs share one workdir; give each its own worktree (--job P:M:F:worktree") {
		t.Errorf("exit %d, stderr %q; want 2 and the shared-workdir message naming the jobs", code, errOut)
	}
	assertNothingRan(t, f, out)
}

func TestFanoutCodeJobsWithWorktreeProceed(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	f := newFixture(t, map[string][]string{"glm": {"out=done"}, "kimi-k3": {"out=done"}})
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", f.workdir, "-c", "user.name=pilot", "-c", "user.email=pilot@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	os.WriteFile(filepath.Join(f.workdir, "README"), []byte("hello\n"), 0o644)
	git("add", "README")
	git("commit", "-q", "-m", "init")
	jobs := writeJobsFile(t, f.dir, []map[string]any{
		{"provider": "glm", "mode": "code", "task_file": f.taskFile, "worktree": true},
		{"provider": "kimi-k3", "mode": "code", "task_file": f.taskFile, "worktree": true},
	})
	code, out, errOut := runCLI(f.fanoutArgs("--jobs-file", jobs)...)
	if code != 0 {
		t.Fatalf("exit %d, want 0 (stderr %q, stdout %s)", code, errOut, out)
	}
	vs := fanoutVerdicts(t, out)
	if diff := cmp.Diff([]string{"glm:code", "kimi-k3:code"}, jobsOf(vs)); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	for i, v := range vs {
		wt, _ := v["worktree"].(map[string]any)
		if v["verdict"] != "completed" || wt == nil {
			t.Errorf("verdict %d: %v, want completed with a worktree", i, v)
			continue
		}
		// The fake agent changes nothing: the worktree is not kept.
		if wt["kept"] != false {
			t.Errorf("verdict %d: worktree %v is kept, want it removed (the worker changed nothing)", i, wt)
		}
		if _, err := os.Stat(fmt.Sprint(wt["path"])); err == nil {
			t.Errorf("verdict %d: worktree %s is still there", i, wt["path"])
		}
	}
}

func TestFanoutTestJobsSameWorkdirWarnButProceed(t *testing.T) {
	f := newFixture(t, map[string][]string{"glm": {"out=done"}, "kimi-k3": {"out=done"}})
	jobs := writeJobsFile(t, f.dir, []map[string]any{
		{"provider": "glm", "mode": "test", "task_file": f.taskFile},
		{"provider": "kimi-k3", "mode": "test", "task_file": f.taskFile},
	})
	code, out, errOut := runCLI(f.fanoutArgs("--jobs-file", jobs)...)
	if code != 0 || !strings.Contains(errOut, "concurrent test jobs share a workdir") {
		t.Errorf("exit %d, stderr %q; want 0 and the shared-workdir note", code, errOut)
	}
	if n := len(fanoutVerdicts(t, out)); n != 2 {
		t.Errorf("%d verdicts, want 2", n)
	}
}

func TestFanoutJobsFileUnknownFieldExits2(t *testing.T) {
	f := newFixture(t, map[string][]string{"glm": {"out=done"}})
	jobs := writeJobsFile(t, f.dir, []map[string]any{
		{"provider": "glm", "mode": "review", "task_file": f.taskFile, "bogus": 1},
	})
	code, out, errOut := runCLI(f.fanoutArgs("--jobs-file", jobs)...)
	if code != 2 || !strings.Contains(errOut, "unknown jobs file fields: bogus") {
		t.Errorf("exit %d, stderr %q; want 2 and the field named", code, errOut)
	}
	assertNothingRan(t, f, out)
}

// --- Aggregation / verdicts ---

func TestFanoutAggregationOrderAndStartedReemission(t *testing.T) {
	// The first job is the slower one, so job order is not finishing order.
	f := newFixture(t, map[string][]string{"glm": {"sleep=300ms", "out=done"}, "kimi-k3": {"out=done"}})
	code, out, errOut := runCLI(f.fanoutArgs("--job", "glm:review:"+f.taskFile, "--job", "kimi-k3:explore:"+f.taskFile)...)
	if code != 0 {
		t.Fatalf("exit %d, want 0 (stderr %q)", code, errOut)
	}
	vs := fanoutVerdicts(t, out)
	if diff := cmp.Diff([]string{"glm:review", "kimi-k3:explore"}, jobsOf(vs)); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	for _, v := range vs {
		if v["type"] != "worker_runner.verdict" {
			t.Errorf("verdict type %v, want worker_runner.verdict", v["type"])
		}
	}
	started := startedLines(t, errOut)
	var got []string
	for _, s := range started {
		if s["type"] != "worker_runner.started" {
			t.Errorf("stderr JSON line of type %v, want only started events", s["type"])
		}
		got = append(got, fmt.Sprint(s["job"]))
	}
	if len(got) != 2 || !(got[0] == "glm:review" && got[1] == "kimi-k3:explore" || got[0] == "kimi-k3:explore" && got[1] == "glm:review") {
		t.Errorf("started lines for jobs %q, want one each for glm:review and kimi-k3:explore", got)
	}
	// Each started line is its verdict's run.
	for _, s := range started {
		for _, v := range vs {
			if v["job"] == s["job"] && v["run_id"] != s["run_id"] {
				t.Errorf("job %v: started run %v, verdict run %v", s["job"], s["run_id"], v["run_id"])
			}
		}
	}
}

// pilot-workers synthesized a verdict for a dispatch child that printed
// none. pilot's workers are supervised in-process, so a worker that dies
// without output still gets a real verdict: error, its exit code, and its
// stderr's tail. The contract kept is the same: one verdict per job, in
// order, the failure visible and the exit status 1.
func TestFanoutSilentChildGetsAVerdict(t *testing.T) {
	f := newFixture(t, map[string][]string{
		"glm":     {"out=done"},
		"kimi-k3": {"err=" + strings.Repeat("boom ", 200), "exit=2"},
	})
	code, out, errOut := runCLI(f.fanoutArgs("--job", "glm:review:"+f.taskFile, "--job", "kimi-k3:review:"+f.taskFile)...)
	if code != 1 {
		t.Errorf("exit %d, want 1 (stderr %q)", code, errOut)
	}
	vs := fanoutVerdicts(t, out)
	if len(vs) != 2 {
		t.Fatalf("%d verdicts, want 2", len(vs))
	}
	if vs[0]["job"] != "glm:review" || vs[0]["verdict"] != "completed" || vs[0]["synthesized"] != nil {
		t.Errorf("verdict 0 = %v, want glm:review completed, not synthesized", vs[0])
	}
	tail, _ := vs[1]["stderr_tail"].(string)
	if vs[1]["job"] != "kimi-k3:review" || vs[1]["verdict"] != "error" || vs[1]["exit_code"] != 2.0 {
		t.Errorf("verdict 1 = %v, want kimi-k3:review error with exit code 2", vs[1])
	}
	if n := utf8.RuneCountInString(tail); n > 500 || !strings.Contains(tail, "boom") {
		t.Errorf("stderr_tail has %d characters: %q; want at most 500 with the worker's stderr", n, tail)
	}
}

func TestFanoutExitCodeFromVerdicts(t *testing.T) {
	// step_capped_partial (also exit 0) cannot be produced here: the
	// command runner judges by exit status alone, and a step cap is a
	// native-session outcome of agent runners such as pi.
	f := newFixture(t, map[string][]string{
		"ok":     {"out=done"},
		"silent": {},
		"broken": {"err=boom", "exit=3"},
	})
	for _, tt := range []struct {
		provider, verdict string
		code              int
	}{
		{"ok", "completed", 0},
		{"broken", "error", 1},
		{"silent", "empty", 1},
	} {
		t.Run(tt.verdict, func(t *testing.T) {
			code, out, errOut := runCLI(f.fanoutArgs("--job", tt.provider+":review:"+f.taskFile)...)
			vs := fanoutVerdicts(t, out)
			if code != tt.code || len(vs) != 1 || vs[0]["verdict"] != tt.verdict {
				t.Errorf("exit %d, verdicts %v (stderr %q); want exit %d and %s", code, vs, errOut, tt.code, tt.verdict)
			}
		})
	}
}

// --- Beyond the Python suite ---

func TestFanoutBadInput(t *testing.T) {
	f := newFixture(t, map[string][]string{"glm": {"out=done"}})
	task := f.taskFile
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no workdir", []string{"fanout", "--job", "glm:review:" + task}, "--workdir is required"},
		{"empty part", f.fanoutArgs("--job", "glm::"+task), "invalid --job spec (expected PROVIDER:MODE:TASK_FILE, optionally NAME= before and :worktree after): glm::" + task},
		{"two parts", f.fanoutArgs("--job", "glm:review"), "invalid --job spec (expected PROVIDER:MODE:TASK_FILE, optionally NAME= before and :worktree after): glm:review"},
		{"worktree but no task file", f.fanoutArgs("--job", "glm:code:worktree"), "invalid --job spec (expected PROVIDER:MODE:TASK_FILE, optionally NAME= before and :worktree after): glm:code:worktree"},
		{"empty name", f.fanoutArgs("--job", "=glm:review:"+task), "the job's name is empty"},
		{"name with a newline", f.fanoutArgs("--job", "a\nb=glm:review:"+task), "control character"},
		{"name too long", f.fanoutArgs("--job", strings.Repeat("n", 65)+"=glm:review:"+task), "longer than 64 characters"},
		{"name twice", f.fanoutArgs("--job", "x=glm:review:"+task, "--job", "y=glm:review:"+task, "--job", "x=glm:review:"+task), `jobs 1 and 3 are both named "x"`},
		{"jobs file name type", f.fanoutArgs("--jobs-file", writeJobsFile(t, t.TempDir(), `[{"provider":"glm","mode":"review","task_file":"x","name":1}]`)), "jobs file field name must be a string"},
		{"jobs file name empty", f.fanoutArgs("--jobs-file", writeJobsFile(t, t.TempDir(), `[{"provider":"glm","mode":"review","task_file":"x","name":""}]`)), "jobs file field name: the job's name is empty (entry 1)"},
		{"shorthand with --job", f.fanoutArgs("--job", "glm:review:"+task, "--mode", "review"), "--providers/--mode/--task-file are mutually exclusive with --job and --jobs-file"},
		{"shorthand incomplete", f.fanoutArgs("--providers", "glm", "--mode", "review"), "--providers requires --mode and --task-file"},
		{"shorthand without providers", f.fanoutArgs("--mode", "review", "--task-file", task), "--providers requires --mode and --task-file"},
		{"shorthand of commas", f.fanoutArgs("--providers", " , ", "--mode", "review", "--task-file", task), "at least one job is required"},
		{"jobs file empty", f.fanoutArgs("--jobs-file", writeJobsFile(t, t.TempDir(), "[]")), "at least one job is required"},
		{"jobs file missing", f.fanoutArgs("--jobs-file", "/nonexistent/jobs.json"), "cannot read jobs file"},
		{"jobs file not JSON", f.fanoutArgs("--jobs-file", writeJobsFile(t, t.TempDir(), "[{")), "cannot read jobs file"},
		{"jobs file with a comma too many", f.fanoutArgs("--jobs-file", writeJobsFile(t, t.TempDir(), "[\n  {\"provider\": \"glm\",}\n]")), "line 2, column 22: invalid character '}'"},
		{"jobs file not an array", f.fanoutArgs("--jobs-file", writeJobsFile(t, t.TempDir(), `{"provider":"glm"}`)), "jobs file must be a JSON array of job objects"},
		{"jobs file entry not an object", f.fanoutArgs("--jobs-file", writeJobsFile(t, t.TempDir(), `["glm:review:x"]`)), "jobs file entries must be objects"},
		{"jobs file unknown fields", f.fanoutArgs("--jobs-file", writeJobsFile(t, t.TempDir(), `[{"provider":"glm","mode":"review","task_file":"x","zeta":1,"alpha":2}]`)), "unknown jobs file fields: alpha, zeta"},
		{"jobs file missing fields", f.fanoutArgs("--jobs-file", writeJobsFile(t, t.TempDir(), `[{"provider":"glm"}]`)), "jobs file entry missing fields: mode, task_file"},
		{"jobs file field type", f.fanoutArgs("--jobs-file", writeJobsFile(t, t.TempDir(), `[{"provider":"glm","mode":"review","task_file":null}]`)), "task_file must be a string"},
		{"jobs file worktree type", f.fanoutArgs("--jobs-file", writeJobsFile(t, t.TempDir(), `[{"provider":"glm","mode":"review","task_file":"x","worktree":"yes"}]`)), "worktree must be true or false"},
		{"unknown mode", f.fanoutArgs("--job", "glm:write:"+task), "unknown mode"},
		{"task file not found", f.fanoutArgs("--job", "glm:review:/nonexistent/task.md"), "task file not found: /nonexistent/task.md"},
		{"workdir missing", append(f.fanoutArgs("--job", "glm:review:"+task), "--workdir", "/nonexistent/dir"), "/nonexistent/dir"},
		{"providers file missing", append(f.fanoutArgs("--job", "glm:review:"+task), "--providers-file", "/nonexistent/p.json"), "/nonexistent/p.json"},
		{"max-parallel negative", f.fanoutArgs("--job", "glm:review:"+task, "--max-parallel", "-1"), "0 for all of them"},
		{"bad timeout", f.fanoutArgs("--job", "glm:review:"+task, "--timeout", "soon"), "want a positive duration"},
		{"bad memory budget", f.fanoutArgs("--job", "glm:review:"+task, "--memory-budget", "lots"), `--memory-budget: size "lots": want a number of bytes, or a number and a unit`},
		{"stray argument", f.fanoutArgs("--job", "glm:review:"+task, "extra"), `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(tt.args...)
			if code != 2 || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tt.want)
			}
			assertNothingRan(t, f, out)
		})
	}
}

func TestFanoutHelp(t *testing.T) {
	code, out, errOut := runCLI("fanout", "--help")
	if code != 0 || errOut != "" || !strings.Contains(out, "usage: pilot fanout") || !strings.Contains(out, "-fail-fast") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, out, _ := runCLI("help"); !strings.Contains(out, "fanout") {
		t.Errorf("pilot help does not list fanout:\n%s", out)
	}
}

func TestFanoutMaxParallelBoundsConcurrentWorkers(t *testing.T) {
	f := newFixture(t, nil)
	log := filepath.Join(f.dir, "overlap.log")
	script := fmt.Sprintf("echo start $$ >> '%s'; sleep 0.05; echo end $$ >> '%s'; echo done", log, log)
	writeProviders(t, f.providers, map[string]map[string]any{
		"sh": {"runner": "command", "argv": []string{"/bin/sh", "-c", script}},
	})
	const jobs, limit = 50, 4
	providers := strings.TrimSuffix(strings.Repeat("sh,", jobs), ",")
	code, out, errOut := runCLI(f.fanoutArgs("--providers", providers, "--mode", "review", "--task-file", f.taskFile,
		"--max-parallel", fmt.Sprint(limit))...)
	if code != 0 {
		t.Fatalf("exit %d, want 0 (stderr %q)", code, errOut)
	}
	if n := len(fanoutVerdicts(t, out)); n != jobs {
		t.Errorf("%d verdicts, want %d", n, jobs)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	running, most, lines := 0, 0, 0
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		lines++
		switch strings.Fields(l)[0] {
		case "start":
			running++
			most = max(most, running)
		case "end":
			running--
		}
	}
	if lines != 2*jobs || most > limit || most < 2 {
		t.Errorf("%d log lines, at most %d workers at once; want %d lines and 2..%d at once", lines, most, 2*jobs, limit)
	}
}

// A memory budget smaller than any job's expected peak runs one job at a
// time (one always runs), and every other job says it waits for memory.
func TestFanoutMemoryBudgetRunsOneAtATime(t *testing.T) {
	f := newFixture(t, nil)
	log := filepath.Join(f.dir, "overlap.log")
	script := fmt.Sprintf("echo start $$ >> '%s'; sleep 0.02; echo end $$ >> '%s'; echo done", log, log)
	writeProviders(t, f.providers, map[string]map[string]any{
		"sh": {"runner": "command", "argv": []string{"/bin/sh", "-c", script}},
	})
	const jobs = 4
	providers := strings.TrimSuffix(strings.Repeat("sh,", jobs), ",")
	code, out, errOut := runCLI(f.fanoutArgs("--providers", providers, "--mode", "review", "--task-file", f.taskFile,
		"--memory-budget", "1MiB")...)
	if code != 0 {
		t.Fatalf("exit %d, want 0 (stderr %q)", code, errOut)
	}
	if n := len(fanoutVerdicts(t, out)); n != jobs {
		t.Errorf("%d verdicts, want %d", n, jobs)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	running, most := 0, 0
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.HasPrefix(l, "start") {
			running++
		} else {
			running--
		}
		most = max(most, running)
	}
	if most != 1 {
		t.Errorf("%d workers at once under a budget none fits, want 1", most)
	}
	if n := strings.Count(errOut, ": waiting for memory: 1 running job(s) count 512MiB of the 1MiB budget, and this one expects 512MiB\n"); n != jobs-1 {
		t.Errorf("%d notes of a wait for memory, want %d:\n%s", n, jobs-1, errOut)
	}
}

// TestFanoutInterrupted is Ctrl-C: a real SIGINT to a running
// "pilot fanout" process (this test binary running main) once two jobs
// have started; the third waits for a slot and never gets one.
func TestFanoutInterrupted(t *testing.T) {
	f := newFixture(t, map[string][]string{"w": {"out=x", "block"}})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, f.fanoutArgs("--providers", "w,w,w", "--mode", "review", "--task-file", f.taskFile,
		"--max-parallel", "2", "--timeout", "120")...)
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The started events on stderr say when both running jobs are up.
	sc := bufio.NewScanner(stderr)
	started := 0
	var rest bytes.Buffer
	for started < 2 && sc.Scan() {
		if strings.Contains(sc.Text(), `"type":"worker_runner.started"`) {
			started++
		}
		rest.WriteString(sc.Text() + "\n")
	}
	if started < 2 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("saw %d started events before stderr ended:\n%s", started, rest.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	io.Copy(&rest, stderr)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("pilot fanout after SIGINT: %v, want exit status 1 (stderr %q)", err, rest.String())
	}
	vs := fanoutVerdicts(t, out.String())
	if len(vs) != 3 {
		t.Fatalf("%d verdicts, want 3", len(vs))
	}
	for i, v := range vs {
		if v["job"] != "w:review" || v["verdict"] != "error" || v["interrupted"] != true || v["failure_class"] != "cancelled" {
			t.Errorf("verdict %d = %v, want an interrupted, cancelled error", i, v)
		}
		if id, _ := v["run_id"].(string); id != "" {
			if left := pilottest.Alive(id); len(left) > 0 {
				t.Errorf("run %s: processes %v still alive", id, left)
			}
		}
	}
	if vs[2]["synthesized"] != true {
		t.Errorf("verdict 2 = %v, want a synthesized one: the job never started", vs[2])
	}
}

func TestFanoutFailFastCancelsTheOthers(t *testing.T) {
	f := newFixture(t, map[string][]string{"bad": {"err=boom", "exit=3"}, "hang": {"out=x", "block"}})
	code, out, errOut := runCLI(f.fanoutArgs("--job", "bad:review:"+f.taskFile, "--job", "hang:review:"+f.taskFile,
		"--fail-fast", "--timeout", "120")...)
	if code != 1 {
		t.Errorf("exit %d, want 1 (stderr %q)", code, errOut)
	}
	vs := fanoutVerdicts(t, out)
	if len(vs) != 2 || vs[0]["exit_code"] != 3.0 || vs[0]["interrupted"] != nil || vs[1]["interrupted"] != true {
		t.Errorf("verdicts %v; want the failure, then the other job interrupted", vs)
	}
}

// --- Progress ---

func TestRenderProgress(t *testing.T) {
	t0 := time.Date(2026, 7, 25, 12, 0, 0, 0, time.UTC)
	now := t0.Add(75 * time.Second)
	rows := []progressRow{
		{Label: "fix-login.md", Worker: "glm:code", Slot: true, Started: t0, Last: now.Add(-3 * time.Second), Phase: "tool-running"},
		{Label: "review", Worker: "kimi-k3:review", Slot: true, Started: t0.Add(10 * time.Second), Last: now},
		{Label: "task.md", Worker: "glm:test", Slot: true, Started: t0, Last: t0, Ended: t0.Add(5 * time.Second), Verdict: "completed", OK: true},
		{Label: "task.md#2", Worker: "opus:explore", Slot: true, Started: t0, Last: t0, Ended: t0.Add(62 * time.Second), Verdict: "error (timeout)"},
		{Label: "task.md#3", Worker: "glm:review", Slot: true},
		{Label: "task.md#4", Worker: "glm:review"},
	}
	want := `pilot fanout: 2/6 done, 3 running, 1 waiting
#  JOB           WORKER          PHASE           ELAPSED    IDLE  VERDICT
1  fix-login.md  glm:code        tool-running      1m15s      3s  -
2  review        kimi-k3:review  running           1m05s      0s  -
3  task.md       glm:test        done                 5s       -  completed
4  task.md#2     opus:explore    done              1m02s       -  error (timeout)
5  task.md#3     glm:review      starting              -       -  -
6  task.md#4     glm:review      waiting               -       -  -
`
	if diff := cmp.Diff(want, renderProgress("fanout", rows, now, 100, 24, false)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	// A job waiting for memory says so: in its row, and (without a
	// table) in a line of its own.
	var lines strings.Builder
	p := &progress{cmd: "fanout", w: &lines, rows: append([]progressRow(nil), rows...), runs: map[string]int{}, now: func() time.Time { return now }}
	p.event(5, pilot.Event{Type: event.FanoutJobWaiting, Message: "waiting for memory: 3 running job(s) count 11.5GiB of the 12GiB budget, and this one expects 640MiB"})
	if got := renderProgress("fanout", p.rows, now, 100, 24, false); !strings.Contains(got, "6  task.md#4     glm:review      waiting               -       -  waiting for memory: 3 running jo…\n") {
		t.Errorf("a job waiting for memory:\n%s", got)
	}
	if want := "pilot fanout: task.md#4 (glm:review): waiting for memory: 3 running job(s) count 11.5GiB of the 12GiB budget, and this one expects 640MiB\n"; lines.String() != want {
		t.Errorf("its line %q, want %q", lines.String(), want)
	}
	p.event(5, pilot.Event{Type: event.FanoutJobStarting})
	if diff := cmp.Diff(strings.NewReplacer("3 running, 1 waiting", "4 running, 0 waiting", "6  task.md#4     glm:review      waiting ", "6  task.md#4     glm:review      starting").Replace(want), renderProgress("fanout", p.rows, now, 100, 24, false)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}

	colored := renderProgress("fanout", rows, now, 100, 24, true)
	for _, w := range []string{sgrGreen + "completed" + sgrReset, sgrRed + "error (timeout)" + sgrReset} {
		if !strings.Contains(colored, w) {
			t.Errorf("coloured table lacks %q:\n%s", w, colored)
		}
	}
	if plain := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(colored, ""); plain != want {
		t.Errorf("coloured table without its colours (-want +got):\n%s", cmp.Diff(want, plain))
	}

	for _, l := range strings.Split(strings.TrimSuffix(renderProgress("fanout", rows, now, 30, 24, false), "\n"), "\n") {
		if n := utf8.RuneCountInString(l); n > 29 {
			t.Errorf("line of %d columns in a 30-column terminal: %q", n, l)
		}
	}
	// A narrow terminal narrows the label and worker columns first.
	narrow := `pilot fanout: 2/6 done, 3 running, 1 waiting
#  JOB       WORKER    PHASE           ELAPSED    IDLE  VERDICT
1  fix-log…  glm:code  tool-running      1m15s      3s  -
2  review    kimi-k3…  running           1m05s      0s  -
3  task.md   glm:test  done                 5s       -  completed
4  task.md…  opus:ex…  done              1m02s       -  error (timeout)
5  task.md…  glm:rev…  starting              -       -  -
6  task.md…  glm:rev…  waiting               -       -  -
`
	if diff := cmp.Diff(narrow, renderProgress("fanout", rows, now, 72, 24, false)); diff != "" {
		t.Errorf("table in 72 columns (-want +got):\n%s", diff)
	}

	// Too many jobs for the terminal: the running ones first.
	var many []progressRow
	for i := range 20 {
		r := progressRow{Label: fmt.Sprintf("t%d.md", i+1), Worker: "p:review"}
		switch {
		case i < 10:
			r.Slot, r.Started, r.Ended, r.Verdict, r.OK = true, t0, t0, "completed", true
		case i == 15:
			r.Slot, r.Started, r.Last = true, t0, t0
		}
		many = append(many, r)
	}
	small := renderProgress("fanout", many, now, 80, 7, false)
	wantSmall := `pilot fanout: 10/20 done, 1 running, 9 waiting
 #  JOB     WORKER    PHASE           ELAPSED    IDLE  VERDICT
11  t11.md  p:review  waiting               -       -  -
12  t12.md  p:review  waiting               -       -  -
16  t16.md  p:review  running           1m15s   1m15s  -
    … and 17 more
`
	if diff := cmp.Diff(wantSmall, small); diff != "" {
		t.Errorf("table in 7 lines (-want +got):\n%s", diff)
	}
}

func TestRenderSummary(t *testing.T) {
	rows := []progressRow{
		{Label: "fix-login.md", Worker: "glm:code"},
		{Label: "task.md", Worker: "kimi-k3:review"},
		{Label: "task.md#2", Worker: "opus:explore"},
		{Label: "review", Worker: "glm:review"},
		{Label: "task.md#3", Worker: "glm:test"},
	}
	exit1 := 1
	vs := []outVerdict{
		{Verdict: pilot.Verdict{Verdict: pilot.Completed, DurationMS: 7200}, Worktree: &pilot.WorktreeInfo{Branch: "pilot/fix-login-1a2b3c4d", Kept: true, Commit: "abc"}},
		{Verdict: pilot.Verdict{Verdict: pilot.Completed, DurationMS: 5100}, Worktree: &pilot.WorktreeInfo{Branch: "pilot/task-1a2b3c4d"}},
		{Verdict: pilot.Verdict{Verdict: pilot.Failed, DurationMS: 62000, Failure: pilot.Failure{FailureClass: pilot.FailTimeout, FailureSource: "pilot-policy"},
			StderrTail: "working\nstill working\n"}},
		{Verdict: pilot.Verdict{Verdict: pilot.Failed, DurationMS: 900, ExitCode: &exit1, Failure: pilot.Failure{FailureClass: "provider-rate-limit",
			EvidenceSource: "glm:stderr", EvidenceExcerpt: "429 Too Many\nRequests"}}},
		{Verdict: pilot.Verdict{Verdict: pilot.Failed, Failure: pilot.Failure{FailureClass: pilot.FailCancelled}}, Synthesized: true, Interrupted: true},
	}
	want := `pilot fanout: 5 job(s) in 1m05s: 2 succeeded, 2 failed, 1 interrupted
#  JOB           WORKER          VERDICT                       TIME  WORKTREE
1  fix-login.md  glm:code        completed                       7s  pilot/fix-login-1a2b3c4d
2  task.md       kimi-k3:review  completed                       5s  removed (no changes)
3  task.md#2     opus:explore    error (timeout)              1m02s  -
   ↳ stderr: still working
4  review        glm:review      error (provider-rate-limit)     0s  -
   ↳ glm:stderr: 429 Too Many Requests
5  task.md#3     glm:test        error (cancelled)                -  -
   ↳ interrupted
each branch holds its job's work: pilot worktrees diff BRANCH; git merge BRANCH
`
	if diff := cmp.Diff(want, renderSummary("fanout", rows, vs, 65*time.Second, 120, false)); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	colored := renderSummary("fanout", rows, vs, 65*time.Second, 120, true)
	for _, w := range []string{sgrGreen + "completed" + sgrReset + strings.Repeat(" ", 18) + "     7s", sgrRed + "error (timeout)" + sgrReset} {
		if !strings.Contains(colored, w) {
			t.Errorf("coloured summary lacks %q:\n%s", w, colored)
		}
	}
	if plain := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(colored, ""); plain != want {
		t.Errorf("coloured summary without its colours (-want +got):\n%s", cmp.Diff(want, plain))
	}
	for _, width := range []int{20, 40, 60} {
		for _, l := range strings.Split(strings.TrimSuffix(renderSummary("fanout", rows, vs, time.Second, width, true), "\n"), "\n") {
			plain := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(l, "")
			if n := utf8.RuneCountInString(plain); n > width-1 {
				t.Errorf("line of %d columns in a %d-column terminal: %q", n, width, l)
			}
		}
	}
}

func TestFanoutStderrNotATerminalHasNoEscapes(t *testing.T) {
	f := newFixture(t, map[string][]string{"glm": {"sleep=500ms", "out=done"}, "kimi-k3": {"out=done"}})
	errFile, err := os.Create(filepath.Join(f.dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	var out bytes.Buffer
	code := run(context.Background(), f.fanoutArgs("--job", "glm:test:"+f.taskFile, "--job", "kimi-k3:test:"+f.taskFile), nil, &out, errFile)
	data, _ := os.ReadFile(errFile.Name())
	if code != 0 || bytes.ContainsRune(data, '\x1b') {
		t.Errorf("exit %d, stderr %q; want 0 and no escape sequences", code, data)
	}
	// Only started lines, the warning and each job's end.
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if !strings.HasPrefix(l, `{"type":"worker_runner.started"`) && !strings.HasPrefix(l, "note: concurrent test jobs") &&
			!regexp.MustCompile(`^pilot fanout: (glm|kimi-k3):test: completed after \d+s$`).MatchString(l) {
			t.Errorf("unexpected stderr line %q", l)
		}
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if _, _, ok := termSize(null); ok {
		t.Errorf("%s is taken for a terminal", os.DevNull)
	}
}

// terminal is the controller side of a pseudo-terminal: it reads all the
// program writes to the terminal, and lets a test wait for some of it.
type terminal struct {
	mu   sync.Mutex
	out  bytes.Buffer
	more chan struct{} // closed and replaced on every read
	done chan struct{} // closed when the terminal is closed
}

func readTerminal(ptm *os.File) *terminal {
	term := &terminal{more: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(term.done)
		buf := make([]byte, 4096)
		for {
			n, err := ptm.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			close(term.more)
			term.more = make(chan struct{})
			term.mu.Unlock()
			if err != nil {
				return // the terminal side was closed
			}
		}
	}()
	return term
}

// waitFor waits until the terminal has shown something matching re; it
// fails the test if the program ends (ended is closed) first.
func (term *terminal) waitFor(t *testing.T, re *regexp.Regexp, ended <-chan struct{}) {
	t.Helper()
	for {
		term.mu.Lock()
		found, more := re.MatchString(term.out.String()), term.more
		term.mu.Unlock()
		if found {
			return
		}
		select {
		case <-more:
		case <-ended:
			t.Fatalf("the program ended, and the terminal never showed %s:\n%q", re, term.String())
		}
	}
}

func (term *terminal) String() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

// screenOf replays what was written to a terminal (text, carriage returns,
// line feeds, and the cursor-up and erase-line sequences of the table;
// colours are dropped) and returns the lines left on the screen, trailing
// blank lines left out. Any other control sequence fails the test.
func screenOf(t *testing.T, raw string) []string {
	t.Helper()
	lines := [][]rune{nil}
	row, col := 0, 0
	for i := 0; i < len(raw); {
		switch {
		case strings.HasPrefix(raw[i:], "\x1b["):
			j := i + 2
			for j < len(raw) && (raw[j] >= '0' && raw[j] <= '9' || raw[j] == ';') {
				j++
			}
			if j == len(raw) {
				t.Fatalf("a cut escape sequence at the end: %q", raw[i:])
			}
			switch seq := raw[i+2 : j+1]; {
			case seq == "1A":
				row = max(row-1, 0)
			case seq == "2K":
				lines[row] = nil
			case raw[j] != 'm':
				t.Fatalf("unexpected escape sequence %q", raw[i:j+1])
			}
			i = j + 1
		case raw[i] == '\r':
			col = 0
			i++
		case raw[i] == '\n':
			row++
			if row == len(lines) {
				lines = append(lines, nil)
			}
			i++
		case raw[i] < ' ':
			t.Fatalf("unexpected control character %q at %d", raw[i], i)
		default:
			r, n := utf8.DecodeRuneInString(raw[i:])
			for len(lines[row]) <= col {
				lines[row] = append(lines[row], ' ')
			}
			lines[row][col] = r
			col++
			i += n
		}
	}
	var out []string
	for _, l := range lines {
		out = append(out, strings.TrimRight(string(l), " "))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

func TestScreenOf(t *testing.T) {
	raw := "note\r\ntable 1\r\ntable 2\r\n\x1b[1A\x1b[2K\x1b[1A\x1b[2K\x1b[32msummary\x1b[0m\r\n"
	if diff := cmp.Diff([]string{"note", "summary"}, screenOf(t, raw)); diff != "" {
		t.Errorf("screen (-want +got):\n%s", diff)
	}
}

// gitWorkdir makes f's workdir a git repository with one commit (of
// README, and a .gitignore ignoring *.log), and returns git's name for it.
func gitWorkdir(t *testing.T, f fixture) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	os.WriteFile(filepath.Join(f.workdir, "README"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(f.workdir, ".gitignore"), []byte("*.log\n"), 0o644)
	gitOut(t, f.workdir, "init", "-q", "-b", "main")
	gitOut(t, f.workdir, "add", ".")
	gitOut(t, f.workdir, "commit", "-q", "-m", "init")
	return gitOut(t, f.workdir, "rev-parse", "--show-toplevel")
}

// gitOut runs git in dir as a person would, and returns its output,
// trimmed.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.invalid"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestFanoutOnATerminal runs a fanout with stderr on a pseudo-terminal: the
// live table (a job waiting for its slot says so), nothing else drawn while
// it is (no started lines), and at the end a summary that stays: label,
// worker, verdict, time and worktree per job, and the evidence of the one
// that failed. stdout stays one JSON array.
func TestFanoutOnATerminal(t *testing.T) {
	t.Setenv("TERM", "xterm")
	for _, noColor := range []bool{false, true} {
		// (No "=" in the name: the fake agent's write= step takes the
		// test's directory.)
		t.Run(map[bool]string{false: "colour", true: "NO_COLOR"}[noColor], func(t *testing.T) {
			if noColor {
				t.Setenv("NO_COLOR", "1")
			} else {
				t.Setenv("NO_COLOR", "")
			}
			f := newFixture(t, nil)
			repo := gitWorkdir(t, f)
			gate := filepath.Join(f.dir, "gate")
			writeProviders(t, f.providers, map[string]map[string]any{
				"slow":   fakeProvider(t, "out=working", "await="+gate, "out=done"),
				"quick":  fakeProvider(t, "out=done"),
				"broken": fakeProvider(t, "out=trying", "err=fatal: the model said no", "exit=3"),
				"writer": fakeProvider(t, `write={workdir}/made.txt=by the worker\n`, "out=wrote it"),
			})
			ptm, pts := openPTY(t, 150, 40)
			defer ptm.Close()
			term := readTerminal(ptm)
			// One slot: the first job holds it until the test opens
			// the gate, and the others wait.
			args := f.fanoutArgs("--max-parallel", "1", "--timeout", "120",
				"--job", "gate=slow:review:"+f.taskFile,
				"--job", "quick:review:"+f.taskFile,
				"--job", "broken:explore:"+f.taskFile,
				"--job", "changes=writer:code:"+f.taskFile+":worktree")
			var out bytes.Buffer
			code, ended := make(chan int, 1), make(chan struct{})
			go func() {
				defer close(ended)
				code <- run(context.Background(), args, nil, &out, pts)
			}()
			// (Were the table never drawn, the gate would stay shut until
			// --timeout ends the first job, and the run with it.)
			defer func() { os.WriteFile(gate, nil, 0o644); <-ended; pts.Close() }()
			term.waitFor(t, regexp.MustCompile(`broken:explore +broken:explore +waiting `), ended)
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if c := <-code; c != exitFailed {
				t.Errorf("exit %d, want 1 (one job failed)", c)
			}
			pts.Close()
			<-term.done
			raw := term.String()

			vs := fanoutVerdicts(t, out.String())
			if diff := cmp.Diff([]string{"gate", "quick:review", "broken:explore", "changes"}, jobsOf(vs)); diff != "" {
				t.Errorf("jobs (-want +got):\n%s", diff)
			}
			wt, _ := vs[3]["worktree"].(map[string]any)
			branch, _ := wt["branch"].(string)
			if !strings.HasPrefix(branch, "pilot/changes-") || wt["kept"] != true || wt["commit"] == nil {
				t.Fatalf("the worktree job: %v", vs[3])
			}
			if got := gitOut(t, repo, "diff", "--name-only", "main", branch); got != "made.txt" {
				t.Errorf("git diff --name-only main %s = %q, want made.txt", branch, got)
			}

			for _, not := range []string{"worker_runner.started", "{"} {
				if strings.Contains(raw, not) {
					t.Errorf("the terminal shows %q:\n%q", not, raw)
				}
			}
			if !strings.Contains(raw, "\x1b[1A\x1b[2K") || !strings.Contains(raw, "pilot fanout: 0/4 done, 1 running, 3 waiting") {
				t.Errorf("no live table was drawn and erased:\n%q", raw)
			}
			if hasColor := regexp.MustCompile("\x1b\\[[0-9;]*m").MatchString(raw); hasColor == noColor {
				t.Errorf("colour codes present: %v, NO_COLOR set: %v:\n%q", hasColor, noColor, raw)
			}
			// What stays on the screen: the summary, durations and the
			// branch's random part aside.
			screen := strings.Join(screenOf(t, raw), "\n")
			screen = regexp.MustCompile(`\b\d+(m\d\d)?s\b`).ReplaceAllString(screen, "Ns")
			screen = strings.ReplaceAll(screen, branch, "pilot/changes-XXXXXXXX")
			want := `pilot fanout: 4 job(s) in Ns: 3 succeeded, 1 failed
#  JOB             WORKER          VERDICT                 TIME  WORKTREE
1  gate            slow:review     completed                 Ns  -
2  quick:review    quick:review    completed                 Ns  -
3  broken:explore  broken:explore  error (generic-error)     Ns  -
   ↳ stderr: fatal: the model said no
4  changes         writer:code     completed                 Ns  pilot/changes-XXXXXXXX
each branch holds its job's work: pilot worktrees diff BRANCH; git merge BRANCH`
			if diff := cmp.Diff(want, screen); diff != "" {
				t.Errorf("the screen at the end (-want +got):\n%s\nraw: %q", diff, raw)
			}
			if os.Getenv("PILOT_SHOW_SCREEN") != "" {
				t.Logf("the screen:\n%s", strings.Join(screenOf(t, raw), "\n"))
			}
		})
	}
}

func TestWorktreesListAndPrune(t *testing.T) {
	runDir := t.TempDir()
	code, out, errOut := runCLI("worktrees", "--run-dir", runDir)
	if code != 0 || strings.TrimSpace(out) != "no worktrees" {
		t.Errorf("empty inventory: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = runCLI("worktrees", "--run-dir", runDir, "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("empty inventory as JSON: exit %d, stdout %q", code, out)
	}
	code, out, _ = runCLI("worktrees", "prune", "--run-dir", runDir)
	if code != 0 || !strings.Contains(out, "pruned 0 worktree(s)") {
		t.Errorf("prune: exit %d, stdout %q", code, out)
	}
}
