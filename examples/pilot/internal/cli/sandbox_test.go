package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/sandbox"
)

// Every mode parses, and the list the messages give is the modes.
func TestParseSandbox(t *testing.T) {
	for _, m := range sandboxModes {
		if got, err := parseSandbox(string(m)); err != nil || got != m {
			t.Errorf("parseSandbox(%q) = %q, %v", m, got, err)
		}
	}
	if got, err := parseSandbox(""); err != nil || got != "" {
		t.Errorf(`parseSandbox("") = %q, %v; want the zero mode (the default applies)`, got, err)
	}
	_, err := parseSandbox("jail")
	if want := `unknown mode "jail": want off, secrets, workspace or strict`; err == nil || err.Error() != want {
		t.Errorf("parseSandbox(jail): %v; want %s", err, want)
	}
}

// --sandbox is a flag of dispatch, run, fanout and schedule: its help says
// so, and a mode that is none is a one-line error naming the modes, exit 2,
// nothing run.
func TestSandboxFlagOnEveryCommand(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	graph := f.writeGraph(t, gjob("a", "ok", f))
	for _, tt := range []struct {
		cmd  string
		args []string
	}{
		{"dispatch", f.args("dispatch", "ok")},
		{"run", f.args("run", "ok")},
		{"fanout", f.fanoutArgs("--job", "ok:review:"+f.taskFile)},
		{"schedule", f.scheduleArgs(graph)},
	} {
		t.Run(tt.cmd, func(t *testing.T) {
			if _, out, _ := runCLI(tt.cmd, "--help"); !strings.Contains(out, "-sandbox mode") || !strings.Contains(out, "off, secrets, workspace or strict") {
				t.Errorf("the help does not give --sandbox and its modes:\n%s", out)
			}
			code, out, errOut := runCLI(append(tt.args, "--sandbox", "jail")...)
			want := "pilot " + tt.cmd + `: --sandbox: unknown mode "jail": want off, secrets, workspace or strict (see pilot ` + tt.cmd + " --help)\n"
			if code != exitBadInput || out != "" || errOut != want {
				t.Errorf("--sandbox jail: exit %d, stdout %q, stderr %q; want 2 and %q", code, out, errOut, want)
			}
			assertNothingRan(t, f, out)
		})
	}
}

// enforces reports whether this machine enforces mode (as doctor says).
func enforces(mode sandbox.Mode) bool {
	abi, err := landlockABI()
	return err == nil && abi >= mode.NeedsABI()
}

// sandboxOf is a verdict's (or record's) "sandbox" object.
func sandboxOf(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	sb, ok := v["sandbox"].(map[string]any)
	if !ok {
		t.Fatalf("no sandbox object in %v", v)
	}
	return sb
}

// The call's mode reaches the verdict: dispatch's, over the provider's.
func TestDispatchSandboxReachesTheVerdict(t *testing.T) {
	if !enforces(sandbox.Workspace) {
		t.Skip("this machine cannot enforce workspace (see TestSandboxRefusals)")
	}
	f := newFixture(t, nil)
	open := fakeProvider(t, "out=done")
	open["sandbox"] = "off"
	writeProviders(t, f.providers, map[string]map[string]any{"ok": fakeProvider(t, "out=done"), "open": open})
	for _, tt := range []struct {
		name, provider string
		extra          []string
		mode           string
		enforced       bool
	}{
		{"flag", "ok", []string{"--sandbox", "workspace"}, "workspace", true},
		{"flag over provider", "open", []string{"--sandbox", "workspace"}, "workspace", true},
		{"provider", "open", nil, "off", false},
		{"default", "ok", nil, "secrets", true},
		{"empty flag is the default", "ok", []string{"--sandbox", ""}, "secrets", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(f.args("dispatch", tt.provider, tt.extra...)...)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			var v map[string]any
			if code != 0 || len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &v) != nil {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			sb := sandboxOf(t, v)
			if sb["mode"] != tt.mode || sb["enforced"] != tt.enforced {
				t.Errorf("verdict sandbox %v; want mode %s, enforced %v", sb, tt.mode, tt.enforced)
			}
		})
	}
}

// run's summary says the mode, as its record does.
func TestRunSandboxReachesTheSummary(t *testing.T) {
	if !enforces(sandbox.Workspace) {
		t.Skip("this machine cannot enforce workspace (see TestSandboxRefusals)")
	}
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	code, out, errOut := runCLI(f.args("run", "ok", "--sandbox", "workspace")...)
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	summary := lines[len(lines)-1]
	if code != 0 || !strings.Contains(summary, ", sandbox workspace; record ") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want a summary that says sandbox workspace", code, out, errOut)
	}
	rec, err := pilot.ReadRecord(summary[strings.LastIndex(summary, "; record ")+len("; record "):])
	if err != nil {
		t.Fatal(err)
	}
	if rec.Sandbox == nil || rec.Sandbox.Mode != sandbox.Workspace || !rec.Sandbox.Enforced {
		t.Errorf("record sandbox %+v; want workspace, enforced", rec.Sandbox)
	}
}

// fanout's --sandbox is every job's mode but a jobs file job's own.
func TestFanoutSandboxReachesTheVerdicts(t *testing.T) {
	if !enforces(sandbox.Workspace) {
		t.Skip("this machine cannot enforce workspace (see TestSandboxRefusals)")
	}
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	code, out, errOut := runCLI(f.fanoutArgs("--job", "ok:review:"+f.taskFile, "--job", "ok:explore:"+f.taskFile, "--sandbox", "workspace")...)
	if code != 0 {
		t.Fatalf("--job: exit %d, stderr %q", code, errOut)
	}
	var got []any
	for _, v := range fanoutVerdicts(t, out) {
		got = append(got, sandboxOf(t, v)["mode"])
	}
	jobs := writeJobsFile(t, f.dir, []map[string]any{
		{"provider": "ok", "mode": "review", "task_file": f.taskFile},
		{"provider": "ok", "mode": "review", "task_file": f.taskFile, "sandbox": "off", "name": "open"},
	})
	code, out, errOut = runCLI(f.fanoutArgs("--jobs-file", jobs, "--sandbox", "workspace")...)
	if code != 0 {
		t.Fatalf("--jobs-file: exit %d, stderr %q", code, errOut)
	}
	for _, v := range fanoutVerdicts(t, out) {
		got = append(got, sandboxOf(t, v)["mode"])
	}
	if diff := cmp.Diff([]any{"workspace", "workspace", "workspace", "off"}, got); diff != "" {
		t.Errorf("the verdicts' modes (-want +got):\n%s", diff)
	}
}

// schedule's --sandbox is every job's mode but a graph job's own.
func TestScheduleSandboxReachesTheVerdicts(t *testing.T) {
	if !enforces(sandbox.Workspace) {
		t.Skip("this machine cannot enforce workspace (see TestSandboxRefusals)")
	}
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	b := gjob("b", "ok", f)
	b["sandbox"] = "off"
	graph := f.writeGraph(t, gjob("a", "ok", f), b)
	code, out, errOut := runCLI(f.scheduleArgs(graph, "--sandbox", "workspace", "--dry-run")...)
	if code != 0 || !strings.Contains(out, `"id":"a"`) || strings.Count(out, `"sandbox":"workspace"`) != 1 || strings.Count(out, `"sandbox":"off"`) != 1 {
		t.Errorf("--dry-run: exit %d, stdout %s, stderr %q; want a's plan to say workspace, b's off", code, out, errOut)
	}
	code, out, errOut = runCLI(f.scheduleArgs(graph, "--sandbox", "workspace")...)
	var vs []map[string]any
	if err := json.Unmarshal([]byte(out), &vs); err != nil || code != 0 || len(vs) != 2 {
		t.Fatalf("exit %d, %v\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	got := []any{vs[0]["id"], sandboxOf(t, vs[0])["mode"], vs[1]["id"], sandboxOf(t, vs[1])["mode"]}
	if diff := cmp.Diff([]any{"a", "workspace", "b", "off"}, got); diff != "" {
		t.Errorf("the jobs' modes (-want +got):\n%s", diff)
	}
}

// A jobs file's or a graph's mode that is none is bad input that names the
// job.
func TestJobSandboxFieldsAreChecked(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	jobs := func(s string) []string { return f.fanoutArgs("--jobs-file", writeJobsFile(t, t.TempDir(), s)) }
	graph := func(mode any) []string {
		j := gjob("build", "ok", f)
		j["sandbox"] = mode
		return f.scheduleArgs(f.writeGraph(t, gjob("a", "ok", f), j))
	}
	for _, tt := range []struct {
		name string
		args func() []string
		want string
	}{
		{"jobs file mode", func() []string {
			return jobs(`[{"provider":"ok","mode":"review","task_file":"x"},{"provider":"ok","mode":"review","task_file":"x","sandbox":"jail"}]`)
		}, `pilot fanout: error: jobs file field sandbox: unknown mode "jail": want off, secrets, workspace or strict (entry 2)`},
		{"jobs file type", func() []string { return jobs(`[{"provider":"ok","mode":"review","task_file":"x","sandbox":4}]`) },
			"jobs file field sandbox must be a string (entry 1)"},
		{"graph mode", func() []string { return graph("jail") },
			`graph.json: job build: sandbox: unknown mode "jail": want off, secrets, workspace or strict`},
		{"graph type", func() []string { return graph(true) }, "graphJob.jobs.sandbox of type string"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(tt.args()...)
			if code != exitBadInput || !strings.Contains(errOut, tt.want) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want 2 and one line saying %q", code, errOut, tt.want)
			}
			assertNothingRan(t, f, out)
		})
	}
}

// pilotWithoutLandlock runs the pilot command in a process of its own on a
// machine without Landlock: this one when it has none, else one that
// denyLandlock makes. On macOS the process runs beneath a sandbox of its
// own, inside which sandbox-exec cannot confine its workers either.
func pilotWithoutLandlock(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	if _, err := os.Stat("/usr/bin/sandbox-exec"); err == nil && runtime.GOOS == "darwin" {
		cmd = exec.Command("/usr/bin/sandbox-exec", append([]string{"-p",
			`(version 1)(allow default)(deny file-write* (literal "/pilot-test-no-sandbox"))`, "--", exe}, args...)...)
	}
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	if _, err := sandbox.LandlockABI(); err == nil {
		cmd.Env = append(cmd.Env, envNoLandlock+"=1")
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 97:
		t.Skipf("cannot make a pilot without Landlock here: %s", errb.String())
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// doctor's own probe says why a machine has no Landlock.
func TestDoctorOnAMachineWithoutLandlock(t *testing.T) {
	f := doctorFixture(t)
	code, out, errOut := pilotWithoutLandlock(t, "doctor", "--json", "--providers-file", f.providers, "--run-dir", f.runDir)
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s%s", err, out, errOut)
	}
	want := "function not implemented: this kernel is built without Landlock"
	if runtime.GOOS != "linux" {
		want = "pilot enforces sandboxes with Landlock, which " + runtime.GOOS + " does not have"
	}
	if code != exitFailed || rep.Sandbox.ABI != 0 || rep.Sandbox.Error != want {
		t.Errorf("exit %d, sandbox %+v; want 1 and the error %q", code, rep.Sandbox, want)
	}
}

// A mode asked for that the machine cannot enforce runs nothing: each
// command says why on stderr, in one line, and exits 2, as for any task
// pilot cannot run (dispatch --worktree too, without fanout's "job 1"). The
// default mode runs unconfined, and its verdict says so.
func TestSandboxRefusals(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	const hint = "; ask for a mode this machine enforces with --sandbox (pilot doctor lists them), or run unconfined with --sandbox off\n"
	repo := pilottest.GitRepo(t)
	jobs := writeJobsFile(t, t.TempDir(), []map[string]any{
		{"provider": "ok", "mode": "review", "task_file": f.taskFile, "sandbox": "off"},
		{"provider": "ok", "mode": "explore", "task_file": f.taskFile},
	})
	b := gjob("b", "ok", f)
	b["sandbox"] = "strict"
	graph := f.writeGraph(t, gjob("a", "ok", f), b)
	for _, tt := range []struct {
		name, want string
		args       []string
	}{
		{"dispatch", "pilot dispatch: sandbox workspace cannot be enforced here: ", f.args("dispatch", "ok", "--sandbox", "workspace")},
		{"run", "pilot run: sandbox strict cannot be enforced here: ", f.args("run", "ok", "--sandbox", "strict")},
		{"dispatch --worktree", "pilot dispatch: sandbox secrets cannot be enforced here: ",
			append(f.args("dispatch", "ok", "--sandbox", "secrets", "--worktree"), "--workdir", repo)},
		{"fanout", "pilot fanout: error: job 2 (ok:explore): sandbox workspace cannot be enforced here: ",
			f.fanoutArgs("--jobs-file", jobs, "--sandbox", "workspace")},
		{"schedule", "pilot schedule: job b: sandbox strict cannot be enforced here: ", f.scheduleArgs(graph, "--sandbox", "off")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := pilotWithoutLandlock(t, tt.args...)
			if code != exitBadInput {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.HasPrefix(errOut, tt.want) || !strings.HasSuffix(errOut, hint) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("stderr %q; want one line %q...%q", errOut, tt.want, hint)
			}
			assertNothingRan(t, f, out)
		})
	}
	t.Run("default", func(t *testing.T) {
		code, out, errOut := pilotWithoutLandlock(t, f.args("dispatch", "ok")...)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		var v map[string]any
		if code != 0 || len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &v) != nil {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		if sb := sandboxOf(t, v); sb["mode"] != "secrets" || sb["enforced"] != false || sb["reason"] == nil {
			t.Errorf("verdict sandbox %v; want secrets, not enforced, and why", sb)
		}
	})
}

// fakeLandlock makes doctor see a kernel whose Landlock probe says abi, err.
func fakeLandlock(t *testing.T, abi int, err error) {
	t.Helper()
	orig := landlockABI
	landlockABI = func() (int, error) { return abi, err }
	t.Cleanup(func() { landlockABI = orig })
}

// doctorFixture is a providers file with a provider of each sandbox, all
// of them able to run but for their sandbox, and no built-in provider
// configured.
func doctorFixture(t *testing.T) fixture {
	t.Helper()
	t.Setenv("PATH", t.TempDir())
	for _, k := range []string{"ZHIPU_API_KEY", "ANTHROPIC_API_KEY", "CODEX_API_KEY", "GEMINI_API_KEY", "MOONSHOT_API_KEY"} {
		t.Setenv(k, "")
	}
	f := newFixture(t, nil)
	provs := map[string]map[string]any{"plain": fakeProvider(t)}
	for _, m := range []string{"off", "workspace", "strict"} {
		p := fakeProvider(t)
		p["sandbox"] = m
		provs["asks-"+m] = p
	}
	writeProviders(t, f.providers, provs)
	return f
}

// doctor says what this machine's Landlock enforces, mode by mode, and
// which providers ask for more: those are problems (exit 1) like a missing
// CLI.
func TestDoctorSaysWhatTheSandboxEnforces(t *testing.T) {
	type mode struct {
		Mode        sandbox.Mode
		Enforceable bool
	}
	type provider struct {
		Name, Status, Sandbox, From string
		Enforceable                 bool
	}
	for _, tt := range []struct {
		name     string
		abi      int
		err      error
		code     int
		scoped   bool
		modes    []mode
		provs    []provider
		text     []string
		problems []string
	}{
		{
			name: "ABI 7", abi: 7, code: exitOK, scoped: true,
			modes: []mode{{"off", true}, {"secrets", true}, {"workspace", true}, {"strict", true}},
			provs: []provider{{"asks-off", "ok", "off", "provider", true}, {"asks-strict", "ok", "strict", "provider", true},
				{"asks-workspace", "ok", "workspace", "provider", true}, {"plain", "ok", "secrets", "default", true}},
			text: []string{"sandbox: Landlock ABI 7; workers cannot signal, trace or reach processes outside their own tree\n",
				"  secrets    enforceable  the default\n", "  strict     enforceable\n"},
		},
		{
			name: "ABI 3", abi: 3, code: exitFailed,
			modes: []mode{{"off", true}, {"secrets", true}, {"workspace", true}, {"strict", false}},
			provs: []provider{{"asks-off", "ok", "off", "provider", true}, {"asks-strict", "cannot run", "strict", "provider", false},
				{"asks-workspace", "ok", "workspace", "provider", true}, {"plain", "ok", "secrets", "default", true}},
			text: []string{"sandbox: Landlock ABI 3; workers can signal processes outside their own tree (scoping needs ABI 6)\n",
				"  strict     not enforceable: needs Landlock ABI 4  asked for, nothing runs\n",
				"strict (cannot be enforced)"},
			problems: []string{"asks-strict: its sandbox strict cannot be enforced here (it needs Landlock ABI 4, this kernel offers ABI 3)"},
		},
		{
			name: "no Landlock", err: errors.New("function not implemented: this kernel is built without Landlock"), code: exitFailed,
			modes: []mode{{"off", true}, {"secrets", false}, {"workspace", false}, {"strict", false}},
			provs: []provider{{"asks-off", "ok", "off", "provider", true}, {"asks-strict", "cannot run", "strict", "provider", false},
				{"asks-workspace", "cannot run", "workspace", "provider", false}, {"plain", "ok", "secrets", "default", false}},
			text: []string{"sandbox: no Landlock: function not implemented: this kernel is built without Landlock\n",
				"  off        enforceable                            nothing is confined\n",
				`  secrets    not enforceable: needs Landlock ABI 1  the default runs unconfined (its verdicts say "enforced": false); asked for, nothing runs` + "\n",
				"secrets (unconfined)"},
			problems: []string{"asks-strict: its sandbox strict cannot be enforced here (no Landlock: ",
				"asks-workspace: its sandbox workspace cannot be enforced here (no Landlock: function not implemented: this kernel is built without Landlock): " +
					`its dispatches fail unless they name another mode with --sandbox; set another "sandbox" for it in the providers file` + "\n"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := doctorFixture(t)
			fakeLandlock(t, tt.abi, tt.err)
			code, out, errOut := runCLI("doctor", "--json", "--providers-file", f.providers, "--run-dir", f.runDir)
			var rep doctorReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if code != tt.code || rep.Problems != len(tt.problems) {
				t.Errorf("exit %d, %d problems (stderr %q); want %d and %d", code, rep.Problems, errOut, tt.code, len(tt.problems))
			}
			if rep.Sandbox.Mechanism != "landlock" || rep.Sandbox.ABI != tt.abi || rep.Sandbox.Scoped != tt.scoped || (rep.Sandbox.Error != "") != (tt.err != nil) {
				t.Errorf("sandbox %+v; want landlock ABI %d, scoped %v, error %v", rep.Sandbox, tt.abi, tt.scoped, tt.err)
			}
			var modes []mode
			for _, m := range rep.Sandbox.Modes {
				modes = append(modes, mode{m.Mode, m.Enforceable})
				if m.Default != (m.Mode == sandbox.Secrets) {
					t.Errorf("mode %s: default %v", m.Mode, m.Default)
				}
			}
			if diff := cmp.Diff(tt.modes, modes); diff != "" {
				t.Errorf("modes (-want +got):\n%s", diff)
			}
			var provs []provider
			for _, c := range rep.Providers {
				if strings.HasPrefix(c.Provider, "asks-") || c.Provider == "plain" {
					provs = append(provs, provider{c.Provider, c.Status, string(c.Sandbox), c.SandboxFrom, c.SandboxEnforceable})
				}
			}
			if diff := cmp.Diff(tt.provs, provs); diff != "" {
				t.Errorf("providers (-want +got):\n%s", diff)
			}
			code, out, _ = runCLI("doctor", "--providers-file", f.providers, "--run-dir", f.runDir)
			if code != tt.code {
				t.Errorf("the table: exit %d, want %d", code, tt.code)
			}
			for _, want := range append(tt.text, tt.problems...) {
				if !strings.Contains(out, want) {
					t.Errorf("the table lacks %q:\n%s", want, out)
				}
			}
		})
	}
}
