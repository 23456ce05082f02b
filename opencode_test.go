package pilot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/fakeagent"
)

// attemptFor builds an Attempt for a runner's Command in a fresh run dir.
func attemptFor(t *testing.T, p pilot.Provider, mode pilot.Mode, resume string) pilot.Attempt {
	t.Helper()
	dir := t.TempDir()
	return pilot.Attempt{
		Task:     pilot.Task{Provider: p.Name, Mode: mode, Prompt: "-fix the bug \"now\"", Resume: resume},
		Provider: p,
		RunID:    "r1",
		RunDir:   dir,
		TaskFile: filepath.Join(dir, "task.md"),
		Prompt:   "-fix the bug \"now\"",
		Workdir:  "/work/tree",
	}
}

func TestOpencodeCommandArgv(t *testing.T) {
	base := pilot.Provider{Name: "oc", Runner: pilot.RunnerOpencode}
	withModel := base
	withModel.Model = "zai-coding-plan/glm-4.6"
	withArgs := withModel
	withArgs.Binary = "/opt/opencode/bin/opencode"
	withArgs.Args = []string{"--variant", "high"}
	tests := []struct {
		name   string
		p      pilot.Provider
		mode   pilot.Mode
		resume string
		want   []string
	}{
		{"code", base, pilot.ModeCode, "", []string{"opencode", "run", "--format", "json"}},
		{"test", withModel, pilot.ModeTest, "", []string{"opencode", "run", "--format", "json", "--model", "zai-coding-plan/glm-4.6"}},
		{"explore runs the plan agent", withModel, pilot.ModeExplore, "",
			[]string{"opencode", "run", "--format", "json", "--agent", "plan", "--model", "zai-coding-plan/glm-4.6"}},
		{"review runs the plan agent", base, pilot.ModeReview, "", []string{"opencode", "run", "--format", "json", "--agent", "plan"}},
		{"resume", withModel, pilot.ModeResume, "ses_abc",
			[]string{"opencode", "run", "--format", "json", "--model", "zai-coding-plan/glm-4.6", "--session", "ses_abc"}},
		{"explore resuming", base, pilot.ModeExplore, "ses_abc",
			[]string{"opencode", "run", "--format", "json", "--agent", "plan", "--session", "ses_abc"}},
		{"binary and args last", withArgs, pilot.ModeCode, "",
			[]string{"/opt/opencode/bin/opencode", "run", "--format", "json", "--model", "zai-coding-plan/glm-4.6", "--variant", "high"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := attemptFor(t, tc.p, tc.mode, tc.resume)
			cmd, err := pilot.OpencodeRunner{}.Command(context.Background(), a)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cmd.Argv); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			// The prompt goes on stdin, untouched, and never into argv.
			if string(cmd.Stdin) != a.Prompt {
				t.Errorf("stdin = %q, want the prompt %q", cmd.Stdin, a.Prompt)
			}
			if got := cmd.Env["PWD"]; got != a.Workdir {
				t.Errorf("PWD = %q, want the workdir %q", got, a.Workdir)
			}
			for _, k := range []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME"} {
				if v, ok := cmd.Env[k]; ok {
					t.Errorf("%s = %q without isolation", k, v)
				}
			}
			if len(cmd.SecretEnv) != 0 {
				t.Errorf("SecretEnv = %q, want none", cmd.SecretEnv)
			}
			if _, ok := cmd.Watcher.(pilot.PhaseWatcher); !ok {
				t.Errorf("watcher %T follows no phases", cmd.Watcher)
			}
		})
	}
}

func TestOpencodeCommandRefusals(t *testing.T) {
	base := pilot.Provider{Name: "oc", Runner: pilot.RunnerOpencode}
	noProvider := base
	noProvider.Model = "glm-4.6"
	baseURLNoModel := base
	baseURLNoModel.BaseURL = "http://127.0.0.1:8080/v1"
	isolated := base
	isolated.Isolated = true
	tests := []struct {
		name   string
		p      pilot.Provider
		resume string
		want   string // in the error
	}{
		{"model without provider", noProvider, "", "provider/model"},
		{"base_url without model", baseURLNoModel, "", "no model"},
		{"resume id read as a flag", base, "--help", "not a session id"},
		{"isolated resume by bare id", isolated, "ses_abc", "resume with that verdict's"},
		{"resume from a store that is gone", base, "/nonexistent/run/opencode/ses_abc", "holds no opencode session store"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mode := pilot.ModeCode
			if tc.resume != "" {
				mode = pilot.ModeResume
			}
			_, err := pilot.OpencodeRunner{}.Command(context.Background(), attemptFor(t, tc.p, mode, tc.resume))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// replayProvider is a provider of runner rn whose binary is the fake agent
// replaying the conformance case prefix and recording its call in callOut.
func replayProvider(t *testing.T, rn, prefix, callOut string) pilot.Provider {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return pilot.Provider{
		Name: rn, Runner: rn, Binary: exe,
		Env: map[string]string{
			fakeagent.EnvFakeAgent: "1", "GORACE": "atexit_sleep_ms=0",
			fakeagent.EnvReplay: abs, fakeagent.EnvReplayExit: "0", fakeagent.EnvCallOut: callOut,
		},
	}
}

// readCall reads what the fake agent recorded about its run.
func readCall(t *testing.T, path string) (fakeagent.Call, map[string]string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the worker never ran: %v", err)
	}
	var c fakeagent.Call
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return c, env
}

// secretDispatcher is testDispatcher with name holding secret.
func secretDispatcher(t *testing.T, p pilot.Provider, name, secret string) *pilot.Dispatcher {
	d := testDispatcher(t, p)
	d.Credentials = pilot.EnvCredentials{LookupEnv: func(k string) (string, bool) {
		if k == name {
			return secret, true
		}
		return "", false
	}}
	return d
}

// noSecretIn fails if any file under dir holds secret.
func noSecretIn(t *testing.T, dir, secret string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil && bytes.Contains(data, []byte(secret)) {
			t.Errorf("%s holds the secret", path)
		}
		return nil
	})
}

// A BaseURL provider gets an isolated XDG tree, an opencode config that
// names the key's variable (never the key), and a resume value that finds
// the session store again.
func TestOpencodeBaseURLIsolationAndResume(t *testing.T) {
	const secret = "sk-opencode-test-secret-1234"
	callOut := filepath.Join(t.TempDir(), "call.json")
	p := replayProvider(t, pilot.RunnerOpencode, "testdata/opencode/stream/success", callOut)
	p.BaseURL = "http://127.0.0.1:9/v1"
	p.Model = "glm-4.6"
	p.CredentialEnv = "GLM_API_KEY"
	d := secretDispatcher(t, p, "GLM_API_KEY", secret)

	v, err := d.Dispatch(context.Background(), pilot.Task{Provider: p.Name, Mode: pilot.ModeCode, Prompt: "add a flag"})
	if err != nil {
		t.Fatal(err)
	}
	if v.Verdict != pilot.Completed {
		t.Fatalf("verdict %s (%s)", v.Verdict, v.FailureClass)
	}
	runDir := filepath.Dir(v.Record)
	store := filepath.Join(runDir, "opencode")
	call, env := readCall(t, callOut)
	if !subsequence(call.Argv, []string{"--model", "pilot/glm-4.6"}) {
		t.Errorf("argv %q has no --model pilot/glm-4.6", call.Argv)
	}
	if call.Stdin != "add a flag" {
		t.Errorf("stdin = %q, want the prompt", call.Stdin)
	}
	for k, sub := range map[string]string{"XDG_CONFIG_HOME": "config", "XDG_DATA_HOME": "data", "XDG_CACHE_HOME": "cache", "XDG_STATE_HOME": "state"} {
		want := filepath.Join(store, sub)
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
		if st, err := os.Stat(want); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, mode %v; want a 0700 dir", want, err, st.Mode().Perm())
		}
	}
	if env["GLM_API_KEY"] != secret {
		t.Errorf("the worker's GLM_API_KEY is not the secret")
	}

	cfgPath := filepath.Join(store, "config", "opencode", "opencode.json")
	st, err := os.Stat(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("config mode %v, want 0600", st.Mode().Perm())
	}
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Model    string `json:"model"`
		Provider map[string]struct {
			NPM     string            `json:"npm"`
			Options map[string]string `json:"options"`
			Models  map[string]any    `json:"models"`
		} `json:"provider"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("config: %v\n%s", err, data)
	}
	pp, ok := cfg.Provider["pilot"]
	if !ok || cfg.Model != "pilot/glm-4.6" || pp.NPM != "@ai-sdk/openai-compatible" ||
		pp.Options["baseURL"] != p.BaseURL || pp.Options["apiKey"] != "{env:GLM_API_KEY}" || pp.Models["glm-4.6"] == nil {
		t.Errorf("config does not define provider pilot for %s with {env:GLM_API_KEY}:\n%s", p.BaseURL, data)
	}
	noSecretIn(t, runDir, secret)

	// The verdict's resume value names the store and the session.
	const sid = "ses_1a2b3c4d5e6fPilotOcAbCdEf"
	if v.SessionID != sid || v.Resume != filepath.Join(store, sid) {
		t.Fatalf("session %q resume %q; want %q and %q", v.SessionID, v.Resume, sid, filepath.Join(store, sid))
	}
	v2, err := d.Dispatch(context.Background(), pilot.Task{Provider: p.Name, Mode: pilot.ModeResume, Prompt: "go on", Resume: v.Resume})
	if err != nil {
		t.Fatal(err)
	}
	call, env = readCall(t, callOut)
	if !subsequence(call.Argv, []string{"--session", sid}) {
		t.Errorf("resume argv %q has no --session %s", call.Argv, sid)
	}
	if env["XDG_DATA_HOME"] != filepath.Join(store, "data") {
		t.Errorf("resumed XDG_DATA_HOME = %q, want the first run's %q", env["XDG_DATA_HOME"], filepath.Join(store, "data"))
	}
	if newStore := filepath.Join(filepath.Dir(v2.Record), "opencode", "config"); env["XDG_CONFIG_HOME"] != newStore {
		t.Errorf("resumed XDG_CONFIG_HOME = %q, want its own %q", env["XDG_CONFIG_HOME"], newStore)
	}
	if v2.Resume != v.Resume {
		t.Errorf("resumed verdict's resume %q, want %q again", v2.Resume, v.Resume)
	}
}

// Phases and usage of a stream fed line by line, including lines the
// watcher must skip.
func TestOpencodeWatcherPhases(t *testing.T) {
	cmd, err := pilot.OpencodeRunner{}.Command(context.Background(), attemptFor(t, pilot.Provider{Name: "oc", Runner: pilot.RunnerOpencode}, pilot.ModeCode, ""))
	if err != nil {
		t.Fatal(err)
	}
	w := cmd.Watcher.(pilot.PhaseWatcher)
	if _, _, ok := w.StreamState(); ok {
		t.Fatal("a phase before any line")
	}
	type step struct {
		line      string
		stream    pilot.Stream
		truncated bool
		phase     pilot.SessionPhase
		reason    string
	}
	steps := []step{
		{`{"type":"step_start","timestamp":1,"sessionID":"ses_A","part":{"type":"step-start"}}`, pilot.Stdout, false, pilot.PhaseUnknown, "stream:opencode-step"},
		{`{"type":"step_finish","timestamp":2,"sessionID":"ses_A","part":{"reason":"stop","tokens":{"input":999,"output":1,"cache":{"read":0,"write":0}},"cost":1}}`, pilot.Stdout, true, pilot.PhaseUnknown, "stream:opencode-step"},
		{`{"type":"step_finish","timestamp":2,"sessionID":"ses_A","part":{"reason":"stop"}}`, pilot.Stderr, false, pilot.PhaseUnknown, "stream:opencode-step"},
		{`! permission requested: bash (rm -rf *); auto-rejecting`, pilot.Stdout, false, pilot.PhaseUnknown, "stream:opencode-step"},
		{`{"type":"tool_use","timestamp":3,"sessionID":"ses_A","part":{"type":"tool","tool":"bash","callID":"c1","state":{"status":"completed"}}}`, pilot.Stdout, false, pilot.PhaseUnknown, "stream:opencode-step"},
		{`{"type":"step_finish","timestamp":4,"sessionID":"ses_A","part":{"reason":"tool-calls","tokens":{"input":10,"output":2,"cache":{"read":100,"write":5}},"cost":0.5}}`, pilot.Stdout, false, pilot.PhaseAwaitingModel, "stream:step_finish"},
		{`{"type":"step_start","timestamp":5,"sessionID":"ses_A","part":{"type":"step-start"}}`, pilot.Stdout, false, pilot.PhaseUnknown, "stream:opencode-step"},
		{`{"type":"some_future_event","timestamp":6,"sessionID":"ses_A"}`, pilot.Stdout, false, pilot.PhaseUnknown, "stream:opencode-step"},
		{`{"type":"step_finish","timestamp":7,"sessionID":"ses_A","part":{"reason":"stop","tokens":{"input":20,"output":3,"cache":{"read":200,"write":0}},"cost":0.25}}`, pilot.Stdout, false, pilot.PhaseFinished, "stream:step_finish"},
		{`{"type":"done","timestamp":8,"sessionID":"ses_A","reason":"idle","rejected":[]}`, pilot.Stdout, false, pilot.PhaseFinished, "stream:done"},
	}
	for i, s := range steps {
		w.Line(pilot.Line{Stream: s.stream, Data: []byte(s.line), Size: int64(len(s.line)), Truncated: s.truncated})
		st, quiet, ok := w.StreamState()
		if !ok || st.Phase != s.phase || st.Reason != s.reason || !quiet.IsZero() {
			t.Errorf("after line %d: %s %q (quiet %v, ok %v); want %s %q", i, st.Phase, st.Reason, quiet, ok, s.phase, s.reason)
		}
	}
	res := w.Finish(pilot.Exit{Runner: pilot.RunnerOpencode, Started: true})
	cost := 0.75
	want := pilot.Result{Outcome: pilot.Empty, SessionID: "ses_A",
		Usage: &pilot.Usage{InputTokens: 30, OutputTokens: 5, CacheReadTokens: 300, CacheWriteTokens: 5, CostUSD: &cost}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

// Finish on the exits the stream alone cannot judge.
func TestOpencodeWatcherFinish(t *testing.T) {
	const (
		start = `{"type":"step_start","sessionID":"ses_A","part":{}}`
		text  = `{"type":"text","sessionID":"ses_A","part":{"text":"ok"}}`
		stop  = `{"type":"step_finish","sessionID":"ses_A","part":{"reason":"stop"}}`
		tools = `{"type":"step_finish","sessionID":"ses_A","part":{"reason":"tool-calls"}}`
		done  = `{"type":"done","sessionID":"ses_A","reason":"idle"}`
		errEv = `{"type":"error","sessionID":"ses_A","error":{"name":"UnknownError","data":{"message":"boom"}}}`
	)
	tests := []struct {
		name  string
		lines []string
		exit  pilot.Exit
		want  pilot.Outcome
		class pilot.FailureClass
	}{
		{"done after tool-calls ends the run", []string{start, text, tools, done}, pilot.Exit{Started: true}, pilot.Completed, ""},
		{"stop without done (older builds)", []string{start, text, stop}, pilot.Exit{Started: true}, pilot.Completed, ""},
		{"an error event wins over done", []string{start, text, errEv, done}, pilot.Exit{Started: true, Code: 1}, pilot.Failed, pilot.FailGeneric},
		{"an error event even with exit 0", []string{start, errEv}, pilot.Exit{Started: true}, pilot.Failed, pilot.FailGeneric},
		{"exit 1 without events", nil, pilot.Exit{Started: true, Code: 1}, pilot.Failed, pilot.FailGeneric},
		{"a final step then exit 1", []string{start, text, stop}, pilot.Exit{Started: true, Code: 1}, pilot.Failed, pilot.FailGeneric},
		{"killed by a signal after done", []string{start, text, stop, done}, pilot.Exit{Started: true, Code: -1, Signal: 9}, pilot.Failed, pilot.FailProcessTerminated},
		{"ended by pilot", []string{start}, pilot.Exit{Started: true, Code: -1, Signal: 15, Terminated: true, Reason: pilot.FailSessionStall}, pilot.Failed, pilot.FailSessionStall},
		{"never started", nil, pilot.Exit{}, pilot.Failed, pilot.FailSpawn},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd, err := pilot.OpencodeRunner{}.Command(context.Background(), attemptFor(t, pilot.Provider{Name: "oc", Runner: pilot.RunnerOpencode}, pilot.ModeCode, ""))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range tc.lines {
				cmd.Watcher.Line(pilot.Line{Stream: pilot.Stdout, Data: []byte(l), Size: int64(len(l))})
			}
			tc.exit.Runner = pilot.RunnerOpencode
			res := cmd.Watcher.Finish(tc.exit)
			if res.Outcome != tc.want || res.FailureClass != tc.class {
				t.Errorf("Finish = %s %s, want %s %s (%+v)", res.Outcome, res.FailureClass, tc.want, tc.class, res)
			}
		})
	}
}

func FuzzOpencodeWatcher(f *testing.F) {
	for _, name := range []string{"success", "tool-use-research-capture", "provider-auth", "length-capped"} {
		data, err := os.ReadFile(filepath.Join("testdata", "opencode", "stream", name+".stdout"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, 0)
	}
	f.Add([]byte(`{"type":"step_finish","part":{"tokens":{"input":1e308,"output":-5},"cost":"x"}}`), 1)
	f.Add([]byte("{\"type\":\"error\"}\n\xff\xfe{"), 143)
	f.Fuzz(func(t *testing.T, data []byte, code int) {
		checkFuzzedWatcher(t, pilot.OpencodeRunner{}, data, code)
	})
}

// checkFuzzedWatcher feeds data's lines to a fresh watcher of rn and checks
// that Finish returns a valid outcome.
func checkFuzzedWatcher(t *testing.T, rn pilot.Runner, data []byte, code int) {
	dir := t.TempDir()
	cmd, err := rn.Command(context.Background(), pilot.Attempt{
		Task: pilot.Task{Mode: pilot.ModeCode}, Provider: pilot.Provider{Name: "f", Runner: rn.Name()},
		RunDir: dir, Prompt: "p", Workdir: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	pw := cmd.Watcher.(pilot.PhaseWatcher)
	for i, l := range bytes.Split(data, []byte("\n")) {
		stream := pilot.Stdout
		if i%5 == 4 {
			stream = pilot.Stderr
		}
		pw.Line(pilot.Line{Stream: stream, Data: l, Size: int64(len(l)), Truncated: i%7 == 6})
		pw.StreamState()
	}
	code %= 256
	if code < 0 {
		code = -code
	}
	res := pw.Finish(pilot.Exit{Runner: rn.Name(), Started: true, Code: code})
	switch res.Outcome {
	case pilot.Completed, pilot.Empty, pilot.StepCappedPartial:
		if res.FailureClass != "" {
			t.Errorf("%s with failure class %s", res.Outcome, res.FailureClass)
		}
	case pilot.Failed:
		if res.FailureClass == "" {
			t.Errorf("failed without a class")
		}
	default:
		t.Errorf("outcome %q (exit %s)", res.Outcome, strconv.Itoa(code))
	}
}

func ExampleOpencodeRunner() {
	dir, _ := os.MkdirTemp("", "pilot-example")
	defer os.RemoveAll(dir)
	cmd, err := pilot.OpencodeRunner{}.Command(context.Background(), pilot.Attempt{
		Task:     pilot.Task{Mode: pilot.ModeReview},
		Provider: pilot.Provider{Name: "glm", Runner: pilot.RunnerOpencode, Model: "zai-coding-plan/glm-4.6"},
		RunDir:   dir,
		Prompt:   "Review the last commit.",
		Workdir:  dir,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Join(cmd.Argv, " "))
	fmt.Printf("stdin: %s\n", cmd.Stdin)
	// Output:
	// opencode run --format json --agent plan --model zai-coding-plan/glm-4.6
	// stdin: Review the last commit.
}
