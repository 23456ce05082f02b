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
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/internal/procfs"
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
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{
		"runner": "command",
		"argv":   append([]string{exe}, script...),
		"env":    map[string]string{fakeagent.EnvFakeAgent: "1", "GORACE": "atexit_sleep_ms=0"},
	}
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
	if code != 2 || !strings.Contains(errOut, "multiple code jobs share one workdir") {
		t.Errorf("exit %d, stderr %q; want 2 and the shared-workdir message", code, errOut)
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
		{"empty part", f.fanoutArgs("--job", "glm::"+task), "invalid --job spec (expected PROVIDER:MODE:TASK_FILE): glm::" + task},
		{"two parts", f.fanoutArgs("--job", "glm:review"), "invalid --job spec (expected PROVIDER:MODE:TASK_FILE): glm:review"},
		{"shorthand with --job", f.fanoutArgs("--job", "glm:review:"+task, "--mode", "review"), "--providers/--mode/--task-file are mutually exclusive with --job and --jobs-file"},
		{"shorthand incomplete", f.fanoutArgs("--providers", "glm", "--mode", "review"), "--providers requires --mode and --task-file"},
		{"shorthand without providers", f.fanoutArgs("--mode", "review", "--task-file", task), "--providers requires --mode and --task-file"},
		{"shorthand of commas", f.fanoutArgs("--providers", " , ", "--mode", "review", "--task-file", task), "at least one job is required"},
		{"jobs file empty", f.fanoutArgs("--jobs-file", writeJobsFile(t, t.TempDir(), "[]")), "at least one job is required"},
		{"jobs file missing", f.fanoutArgs("--jobs-file", "/nonexistent/jobs.json"), "cannot read jobs file"},
		{"jobs file not JSON", f.fanoutArgs("--jobs-file", writeJobsFile(t, t.TempDir(), "[{")), "cannot read jobs file"},
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
			if left := procfs.WithEnv(pilot.EnvRunID + "=" + id); len(left) > 0 {
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
		{Label: "glm:code", Started: t0, Last: now.Add(-3 * time.Second), Phase: "tool-running"},
		{Label: "kimi-k3:review", Started: t0.Add(10 * time.Second), Last: now},
		{Label: "glm:test", Started: t0, Last: t0, Ended: t0.Add(5 * time.Second), Verdict: "completed", OK: true},
		{Label: "opus:explore", Started: t0, Last: t0, Ended: t0.Add(62 * time.Second), Verdict: "error (timeout)"},
		{Label: "glm:review"},
	}
	want := `pilot fanout: 2/5 done, 2 running, 1 waiting
#  JOB             PHASE           ELAPSED    IDLE  VERDICT
1  glm:code        tool-running      1m15s      3s  -
2  kimi-k3:review  running           1m05s      0s  -
3  glm:test        done                 5s       -  completed
4  opus:explore    done              1m02s       -  error (timeout)
5  glm:review      starting              -       -  -
`
	if diff := cmp.Diff(want, renderProgress(rows, now, 100, 24, false)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}

	colored := renderProgress(rows, now, 100, 24, true)
	for _, w := range []string{sgrGreen + "completed" + sgrReset, sgrRed + "error (timeout)" + sgrReset} {
		if !strings.Contains(colored, w) {
			t.Errorf("coloured table lacks %q:\n%s", w, colored)
		}
	}
	if plain := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(colored, ""); plain != want {
		t.Errorf("coloured table without its colours (-want +got):\n%s", cmp.Diff(want, plain))
	}

	for _, l := range strings.Split(strings.TrimSuffix(renderProgress(rows, now, 30, 24, false), "\n"), "\n") {
		if n := utf8.RuneCountInString(l); n > 29 {
			t.Errorf("line of %d columns in a 30-column terminal: %q", n, l)
		}
	}

	// Too many jobs for the terminal: the running ones first.
	var many []progressRow
	for i := range 20 {
		r := progressRow{Label: fmt.Sprintf("p%d:review", i+1)}
		switch {
		case i < 10:
			r.Started, r.Ended, r.Verdict, r.OK = t0, t0, "completed", true
		case i == 15:
			r.Started, r.Last = t0, t0
		}
		many = append(many, r)
	}
	small := renderProgress(many, now, 80, 7, false)
	wantSmall := `pilot fanout: 10/20 done, 1 running, 9 waiting
 #  JOB         PHASE           ELAPSED    IDLE  VERDICT
11  p11:review  starting              -       -  -
12  p12:review  starting              -       -  -
16  p16:review  running           1m15s   1m15s  -
    … and 17 more
`
	if diff := cmp.Diff(wantSmall, small); diff != "" {
		t.Errorf("table in 7 lines (-want +got):\n%s", diff)
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
	// Only started lines and the warning.
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if !strings.HasPrefix(l, `{"type":"worker_runner.started"`) && !strings.HasPrefix(l, "note: concurrent test jobs") {
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

func TestFanoutLiveTableOnATerminal(t *testing.T) {
	t.Setenv("TERM", "xterm")
	for _, noColor := range []bool{false, true} {
		t.Run(fmt.Sprintf("NO_COLOR=%v", noColor), func(t *testing.T) {
			if noColor {
				t.Setenv("NO_COLOR", "1")
			} else {
				t.Setenv("NO_COLOR", "")
			}
			// The quick job's verdict is drawn while the slow one runs.
			f := newFixture(t, map[string][]string{"quick": {"out=done"}, "slow": {"out=working", "sleep=1s", "out=done"}})
			ptm, pts := openPTY(t, 120, 40)
			defer ptm.Close()
			var screen bytes.Buffer
			read := make(chan struct{})
			go func() {
				defer close(read)
				io.Copy(&screen, bufio.NewReader(ptm)) // until the terminal is closed
			}()
			var out bytes.Buffer
			code := run(context.Background(), f.fanoutArgs("--job", "quick:review:"+f.taskFile, "--job", "slow:review:"+f.taskFile), nil, &out, pts)
			pts.Close()
			<-read
			got := screen.String()
			if code != 0 || len(fanoutVerdicts(t, out.String())) != 2 {
				t.Fatalf("exit %d, stdout %q, terminal %q", code, out.String(), got)
			}
			for _, want := range []string{`"type":"worker_runner.started"`, "pilot fanout: 1/2 done, 1 running", "slow:review", "\x1b[1A\x1b[2K"} {
				if !strings.Contains(got, want) {
					t.Errorf("terminal output lacks %q:\n%q", want, got)
				}
			}
			if !strings.HasSuffix(got, "\x1b[1A\x1b[2K") {
				t.Errorf("the table is not cleared at the end:\n%q", got)
			}
			hasColor := regexp.MustCompile("\x1b\\[[0-9;]*m").MatchString(got)
			if hasColor == noColor {
				t.Errorf("colour codes present: %v, NO_COLOR set: %v:\n%q", hasColor, noColor, got)
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
