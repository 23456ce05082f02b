package agents_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

func TestQwenCommandArgv(t *testing.T) {
	base := pilot.Provider{Name: "qw", Runner: agents.RunnerQwen}
	withModel := base
	withModel.Model = "qwen3-coder-plus"
	withArgs := withModel
	withArgs.Binary = "/opt/qwen/bin/qwen"
	withArgs.Args = []string{"--max-session-turns", "20"}
	tests := []struct {
		name   string
		p      pilot.Provider
		mode   pilot.Mode
		resume string
		want   []string
	}{
		{"code", base, pilot.ModeCode, "", []string{"qwen", "--output-format", "stream-json", "--approval-mode", "yolo"}},
		{"test", withModel, pilot.ModeTest, "", []string{"qwen", "--output-format", "stream-json", "--model", "qwen3-coder-plus", "--approval-mode", "yolo"}},
		{"explore is plan mode", base, pilot.ModeExplore, "", []string{"qwen", "--output-format", "stream-json", "--approval-mode", "plan"}},
		{"review is plan mode", base, pilot.ModeReview, "", []string{"qwen", "--output-format", "stream-json", "--approval-mode", "plan"}},
		{"resume by id", base, pilot.ModeResume, "5c2e1f0a-1b2c-4d3e-8f4a-5b6c7d8e9f00",
			[]string{"qwen", "--output-format", "stream-json", "--approval-mode", "yolo", "--resume", "5c2e1f0a-1b2c-4d3e-8f4a-5b6c7d8e9f00"}},
		{"binary and args last", withArgs, pilot.ModeCode, "",
			[]string{"/opt/qwen/bin/qwen", "--output-format", "stream-json", "--model", "qwen3-coder-plus", "--approval-mode", "yolo", "--max-session-turns", "20"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := agentAttempt(t, agents.RunnerQwen, tc.p, tc.mode, tc.resume, flagPrompt, "/work/tree")
			cmd := agentCommand(t, agents.QwenRunner{}, a)
			if diff := cmp.Diff(tc.want, cmd.Argv); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			if string(cmd.Stdin) != flagPrompt {
				t.Errorf("stdin = %q, want the prompt", cmd.Stdin)
			}
			want := map[string]string{"QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"}
			if diff := cmp.Diff(want, cmd.Env); diff != "" {
				t.Errorf("env of a provider without isolation (-want +got):\n%s", diff)
			}
			if _, err := os.Stat(filepath.Join(a.RunDir, "qwen-home")); err == nil {
				t.Error("a provider without isolation got a qwen home")
			}
		})
	}
}

func TestQwenCommandRefusals(t *testing.T) {
	base := pilot.Provider{Name: "qw", Runner: agents.RunnerQwen}
	isolated := base
	isolated.Isolated = true
	noModel := base
	noModel.BaseURL = "http://127.0.0.1:9/v1"
	tests := []struct {
		name   string
		p      pilot.Provider
		resume string
		prompt string
		want   string
	}{
		{"empty prompt", base, "", " \n", "task text is empty"},
		{"base_url without a model", noModel, "", "", `set "model"`},
		{"resume id read as a flag", base, "-h", "", "not a session id"},
		{"isolated resume by bare id", isolated, "5c2e1f0a", "", "cannot find session"},
		{"transcript into a user's own qwen", base, "/runs/r/qwen-home/projects/-w/chats/5c2e1f0a.jsonl", "", "isolated worker's QWEN_HOME"},
		{"not a transcript", isolated, "/runs/r/qwen-home/5c2e1f0a", "", "does not name a qwen session transcript"},
		{"transcript gone", isolated, "/nonexistent/qwen-home/projects/-w/chats/5c2e1f0a.jsonl", "", "reading the transcript"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mode := pilot.ModeCode
			if tc.resume != "" {
				mode = pilot.ModeResume
			}
			prompt := flagPrompt
			if tc.prompt != "" {
				prompt = tc.prompt
			}
			wantRefusal(t, agents.QwenRunner{}, agentAttempt(t, agents.RunnerQwen, tc.p, mode, tc.resume, prompt, ""), tc.want)
		})
	}
}

// A BaseURL provider gets its own QWEN_HOME with pilot's settings, the
// endpoint, model and key under the names qwen reads; its resume value is
// the transcript, which a later worker finds in its own home.
func TestQwenBaseURLIsolationAndResume(t *testing.T) {
	const secret = "sk-qwen-test-secret-2468"
	p := replayProvider(t, agents.RunnerQwen, "../testdata/qwen/stream/e2e-one-tool")
	p.BaseURL = "http://127.0.0.1:9/v1"
	p.Model = "fake-model"
	p.CredentialEnv = "GW_KEY"
	d := secretDispatcher(t, p, secret)
	workdir := t.TempDir()

	v := dispatchCompleted(t, d, pilot.Task{Provider: p.Name, Mode: pilot.ModeCode, Prompt: "add a flag", Workdir: workdir})
	runDir := filepath.Dir(v.Record)
	home := filepath.Join(runDir, "qwen-home")
	_, env := readCall(t, p)
	for k, want := range map[string]string{
		"QWEN_HOME":        home,
		"QWEN_RUNTIME_DIR": home,
		"OPENAI_BASE_URL":  p.BaseURL,
		"OPENAI_MODEL":     "fake-model",
		"OPENAI_API_KEY":   secret,
		"GW_KEY":           secret,
	} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	var set struct {
		Memory struct {
			EnableManagedAutoMemory *bool
		}
		Privacy struct{ UsageStatisticsEnabled *bool }
	}
	settings := readPrivateFile(t, filepath.Join(home, "settings.json"))
	if err := json.Unmarshal(settings, &set); err != nil || set.Memory.EnableManagedAutoMemory == nil || *set.Memory.EnableManagedAutoMemory ||
		set.Privacy.UsageStatisticsEnabled == nil || *set.Privacy.UsageStatisticsEnabled {
		t.Errorf("settings.json %s (%v): want the memory agent and usage statistics off", settings, err)
	}
	noSecretIn(t, runDir, secret)
	// A transcript as qwen writes it, in the home of an earlier worker.
	const sid = "44d7eb8d-9caa-4c34-b025-f3a8a1f4fe00"
	transcript := filepath.Join(home, "projects", "-work-tree", "chats", sid+".jsonl")
	if err := os.MkdirAll(filepath.Dir(transcript), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(transcript, []byte(`{"uuid":"u1","sessionId":"`+sid+`","type":"user"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	v2 := mustDispatch(t, d, pilot.Task{Provider: p.Name, Mode: pilot.ModeResume, Prompt: "go on", Resume: transcript, Workdir: workdir})
	call, env := readCall(t, p)
	if !subsequence(call.Argv, []string{"--resume", sid}) {
		t.Errorf("resume argv %q has no --resume %s", call.Argv, sid)
	}
	home2 := filepath.Join(filepath.Dir(v2.Record), "qwen-home")
	if env["QWEN_HOME"] != home2 {
		t.Errorf("resumed QWEN_HOME = %q, want its own %q", env["QWEN_HOME"], home2)
	}
	copied := filepath.Join(home2, "projects", "-work-tree", "chats", sid+".jsonl")
	if got := readPrivateFile(t, copied); !strings.Contains(string(got), sid) {
		t.Errorf("the copied transcript holds %q", got)
	}
}

// A provider whose key is already OPENAI_API_KEY needs no second name.
func TestQwenSecretEnv(t *testing.T) {
	for cred, want := range map[string][]string{"": nil, "OPENAI_API_KEY": nil, "DASHSCOPE_API_KEY": {"OPENAI_API_KEY"}} {
		p := pilot.Provider{Name: "qw", Runner: agents.RunnerQwen, CredentialEnv: cred}
		cmd := agentCommand(t, agents.QwenRunner{}, agentAttempt(t, agents.RunnerQwen, p, pilot.ModeCode, "", flagPrompt, ""))
		if diff := cmp.Diff(want, cmd.SecretEnv); diff != "" {
			t.Errorf("credential %q: SecretEnv (-want +got):\n%s", cred, diff)
		}
	}
}

func qwenWatcher(t *testing.T) pilot.PhaseWatcher {
	t.Helper()
	return agentWatcher(t, agents.QwenRunner{}, agentAttempt(t, agents.RunnerQwen, pilot.Provider{Name: "qw"}, pilot.ModeCode, "", flagPrompt, ""))
}

// A scheduled retry is a retry loop named by its stderr notice, quiet for
// the announced delay; the model's next answer ends the loop.
func TestQwenWatcherRetryNotices(t *testing.T) {
	w := qwenWatcher(t)
	rl := w.(interface {
		RetryLoop() (pilot.RetryLoop, bool)
	})
	feed(w, `{"type":"system","subtype":"init","session_id":"s1"}`)
	before := time.Now()
	w.Line(goneErr("Retrying in 60s (attempt 1/10): [API Error: 429 Rate limit reached (fakellm)]"))
	feed(w, `{"type":"system","subtype":"retry","session_id":"s1","data":{"reason":"retry","attempt":1,"maxRetries":10,"delayMs":60000}}`)
	loop, on := rl.RetryLoop()
	if !on || loop.Retries != 1 || loop.Diagnostic.Class != pilot.FailProviderRateLimit || loop.Diagnostic.Source != "qwen:stderr" {
		t.Fatalf("retry loop %+v (%v), want one rate-limit retry from qwen:stderr", loop, on)
	}
	st, quiet, _ := w.StreamState()
	if st.Phase != pilot.PhaseAwaitingModel || quiet.Before(before.Add(59*time.Second)) {
		t.Errorf("phase %s quiet until %v; want awaiting-model, quiet for the minute announced", st.Phase, quiet)
	}
	// The delayed attempt starts: no second retry.
	w.Line(goneErr("Retrying provider attempt (0 buffered tool call(s) discarded)."))
	feed(w, `{"type":"system","subtype":"retry","session_id":"s1","data":{"reason":"retry"}}`)
	if loop, _ := rl.RetryLoop(); loop.Retries != 1 {
		t.Errorf("%d retries after the attempt started, want 1", loop.Retries)
	}
	if _, quiet, _ := w.StreamState(); !quiet.IsZero() {
		t.Errorf("quiet until %v once the attempt started", quiet)
	}
	feed(w, `{"type":"assistant","session_id":"s1","message":{"id":"m1","model":"fake-model","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":5,"output_tokens":1}}}`)
	if _, on := rl.RetryLoop(); on {
		t.Error("the retry loop goes on after the model answered")
	}

	// A cut stream asked for again is a retry too, of no named cause.
	w = qwenWatcher(t)
	rl = w.(interface {
		RetryLoop() (pilot.RetryLoop, bool)
	})
	w.Line(goneErr("Retrying provider attempt (0 buffered tool call(s) discarded; preserving delivered text)."))
	if loop, on := rl.RetryLoop(); !on || loop.Retries != 1 || loop.Diagnostic.Class != pilot.FailGeneric {
		t.Errorf("retry loop %+v (%v) after a stream retry", loop, on)
	}
}

// qwen's "[API Error: …]" assistant text is not an answer: a run that
// ends with an error result fails with the class the result's error
// proves, and a result with no text after it is not completed.
func TestQwenWatcherFinish(t *testing.T) {
	const (
		apiErr   = `{"type":"assistant","session_id":"s1","message":{"id":"e1","model":"fake-model","content":[{"type":"text","text":"[API Error: 401 Invalid API key]"}],"usage":{"input_tokens":0,"output_tokens":0}}}`
		errRes   = `{"type":"result","subtype":"error_during_execution","session_id":"s1","is_error":true,"error":{"message":"[API Error: 401 Invalid API key]"}}`
		answer   = `{"type":"assistant","session_id":"s1","message":{"id":"m1","model":"fake-model","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":5,"output_tokens":1}}}`
		okResult = `{"type":"result","subtype":"success","session_id":"s1","is_error":false,"result":"done","usage":{"input_tokens":5,"output_tokens":1}}`
		noText   = `{"type":"result","subtype":"success","session_id":"s1","is_error":false,"result":""}`
	)
	tests := []struct {
		name  string
		lines []string
		exit  int
		want  pilot.Outcome
		class pilot.FailureClass
	}{
		{"completed", []string{answer, okResult}, 0, pilot.Completed, ""},
		{"api error", []string{apiErr, errRes}, 1, pilot.Failed, pilot.FailProviderAuth},
		{"api error text alone is no answer", []string{apiErr, noText}, 0, pilot.Empty, ""},
		{"no result", []string{answer}, 0, pilot.Failed, pilot.FailIncomplete},
		{"turn limit", []string{answer}, 53, pilot.StepCappedPartial, ""},
		{"wall time or tool-call limit", []string{answer}, 55, pilot.StepCappedPartial, ""},
		{"auth exit", nil, 41, pilot.Failed, pilot.FailProviderAuth},
		{"config exit", nil, 52, pilot.Failed, pilot.FailSpawn},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := qwenWatcher(t)
			feed(w, tc.lines...)
			r := w.Finish(pilot.Exit{Runner: agents.RunnerQwen, Started: true, Code: tc.exit})
			if r.Outcome != tc.want || r.Classification.Class != tc.class {
				t.Errorf("outcome %s class %q (%q), want %s %q", r.Outcome, r.Classification.Class, r.Classification.Evidence, tc.want, tc.class)
			}
		})
	}
}

// Diagnose reads qwen's error result, its API error text, and its stderr
// retry notices; a tool's output that quotes an API error is no evidence.
func TestQwenDiagnose(t *testing.T) {
	diagnose, err := agents.Classifier(agents.QwenRunner{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		stream pilot.Stream
		line   string
		class  pilot.FailureClass // "" for no evidence
	}{
		{pilot.Stdout, `{"type":"result","subtype":"error_during_execution","is_error":true,"error":{"message":"[API Error: 429 Rate limit reached]"}}`, pilot.FailProviderRateLimit},
		{pilot.Stdout, `{"type":"result","subtype":"error_during_execution","is_error":true,"error":{"message":"[API Error: 500 boom]"}}`, pilot.FailProviderServerError},
		{pilot.Stdout, `{"type":"result","subtype":"error_during_execution","is_error":true,"error":{"message":"[API Error: terminated (cause: UND_ERR_SOCKET: other side closed)]"}}`, pilot.FailProviderStreamDisconnect},
		{pilot.Stdout, `{"type":"result","subtype":"error_during_execution","is_error":true,"error":{"message":"No auth type is selected. Please configure an auth type"}}`, pilot.FailProviderAuth},
		{pilot.Stdout, `{"type":"assistant","message":{"content":[{"type":"text","text":"[API Error: 400 This model's maximum context length is 128000 tokens. However, your messages resulted in 200000 tokens.]"}]}}`, pilot.FailContextLimit},
		{pilot.Stdout, `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"c1","content":"[API Error: 401 Invalid API key]"}]}}`, ""},
		{pilot.Stdout, `{"type":"result","subtype":"success","is_error":false,"result":"[API Error: 401] is what the log said"}`, ""},
		{pilot.Stderr, "Retrying in 2s (attempt 1/3): [API Error: 429 Rate limit reached]", pilot.FailProviderRateLimit},
		{pilot.Stderr, "Ripgrep not available: spawn rg EACCES. Falling back to built-in grep.", ""},
	}
	for _, tc := range tests {
		c, ok := diagnose(tc.stream, tc.line)
		if got := map[bool]pilot.FailureClass{true: c.Class}[ok]; got != tc.class {
			t.Errorf("%s %s: class %q (evidence %q), want %q", tc.stream, tc.line, got, c.Evidence, tc.class)
		}
	}
}

// A phase shorter than a heartbeat is still told: a tool that ran between
// two looks at the stream.
func TestQwenWatcherPassedPhases(t *testing.T) {
	w := qwenWatcher(t)
	feed(w,
		`{"type":"system","subtype":"init","session_id":"s1"}`,
		`{"type":"assistant","session_id":"s1","message":{"id":"m1","content":[{"type":"tool_use","id":"call_1_0","name":"run_shell_command","input":{}}]}}`,
		`{"type":"user","session_id":"s1","message":{"content":[{"type":"tool_result","tool_use_id":"call_1_0","content":"ok"}]}}`,
	)
	p := w.(interface{ PassedStates() []pilot.SessionState })
	var got []pilot.SessionPhase
	for _, s := range p.PassedStates() {
		got = append(got, s.Phase)
	}
	if diff := cmp.Diff([]pilot.SessionPhase{pilot.PhaseAwaitingModel, pilot.PhaseToolRunning}, got); diff != "" {
		t.Errorf("passed phases (-want +got):\n%s", diff)
	}
}

func FuzzQwenWatcher(f *testing.F) {
	for _, name := range []string{"e2e-two-tools", "e2e-rate-limit", "auth-401", "sigterm-group"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "qwen", "stream", name+".stdout"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, 0)
	}
	f.Fuzz(func(t *testing.T, data []byte, code int) {
		checkFuzzedWatcher(t, agents.QwenRunner{}, data, code)
	})
}

// The runner's sandbox needs: a user's ~/.qwen (or the QWEN_HOME the
// provider names), nothing of HOME for an isolated worker, and the
// endpoint the provider's env gives.
func TestQwenSandboxNeeds(t *testing.T) {
	n := agents.QwenRunner{}.SandboxNeeds(pilot.Provider{Runner: agents.RunnerQwen}, "/home/u")
	if diff := cmp.Diff([]string{"/home/u/.qwen"}, n.Own); diff != "" {
		t.Errorf("own (-want +got):\n%s", diff)
	}
	p := pilot.Provider{Runner: agents.RunnerQwen, Env: map[string]string{"QWEN_HOME": "/srv/qwen", "OPENAI_BASE_URL": "http://10.0.0.5:8000/v1"}}
	n = agents.QwenRunner{}.SandboxNeeds(p, "/home/u")
	if diff := cmp.Diff([]string{"/srv/qwen"}, n.Write); diff != "" {
		t.Errorf("write with QWEN_HOME (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"10.0.0.5:8000"}, n.Connect); diff != "" {
		t.Errorf("connect (-want +got):\n%s", diff)
	}
	n = agents.QwenRunner{}.SandboxNeeds(pilot.Provider{Runner: agents.RunnerQwen, BaseURL: "http://127.0.0.1:9/v1", Model: "m"}, "/home/u")
	if len(n.Own) != 0 || len(n.Write) != 0 {
		t.Errorf("an isolated worker needs %v %v of HOME", n.Own, n.Write)
	}
}
