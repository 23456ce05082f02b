package agents_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

// piPrompt is the pi tests' prompt: on pi's command line it would be lost
// or read as a file.
const piPrompt = "-- @fix the bug"

func TestPiCommandArgv(t *testing.T) {
	tests := []struct {
		name string
		mode pilot.Mode
		p    pilot.Provider
		want []string // after "pi -p --mode json --session SESSION"
	}{
		{"code", pilot.ModeCode, pilot.Provider{}, nil},
		{"test", pilot.ModeTest, pilot.Provider{}, nil},
		{"explore is read-only", pilot.ModeExplore, pilot.Provider{}, []string{"--tools", "read,grep,find,ls"}},
		{"review is read-only", pilot.ModeReview, pilot.Provider{}, []string{"--tools", "read,grep,find,ls"}},
		{"model", pilot.ModeCode, pilot.Provider{Model: "anthropic/claude-sonnet-4-5"}, []string{"--model", "anthropic/claude-sonnet-4-5"}},
		{"args last", pilot.ModeReview, pilot.Provider{Model: "m", Args: []string{"--thinking", "high"}},
			[]string{"--model", "m", "--tools", "read,grep,find,ls", "--thinking", "high"}},
		{"base url", pilot.ModeCode, pilot.Provider{Model: "qwen3-coder", BaseURL: "http://127.0.0.1:8080/v1"},
			[]string{"--provider", "pilot", "--model", "qwen3-coder"}},
		{"binary", pilot.ModeCode, pilot.Provider{Binary: "/opt/pi/bin/pi"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := agentAttempt(t, agents.RunnerPi, tt.p, tt.mode, "", piPrompt, "")
			cmd := agentCommand(t, agents.PiRunner{}, a)
			prog := "pi"
			if tt.p.Binary != "" {
				prog = tt.p.Binary
			}
			want := append([]string{prog, "-p", "--mode", "json", "--session", a.SessionPath}, tt.want...)
			if diff := cmp.Diff(want, cmd.Argv); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			// The prompt goes on stdin, untouched: on pi's command line
			// "-- @fix the bug" would be lost or read as a file.
			if string(cmd.Stdin) != a.Prompt {
				t.Errorf("stdin = %q, want the prompt %q", cmd.Stdin, a.Prompt)
			}
			if cmd.SessionPath != a.SessionPath {
				t.Errorf("SessionPath = %q, want %q", cmd.SessionPath, a.SessionPath)
			}
			if cmd.Env["PERSISTENT_STORE"] != "jsonl" || cmd.Env["PI_OFFLINE"] != "1" {
				t.Errorf("env = %v, want PERSISTENT_STORE=jsonl and PI_OFFLINE=1", cmd.Env)
			}
			_, isolated := cmd.Env["PI_CODING_AGENT_DIR"]
			if isolated != (tt.p.BaseURL != "") {
				t.Errorf("PI_CODING_AGENT_DIR set = %v, want %v", isolated, tt.p.BaseURL != "")
			}
			if _, ok := cmd.Watcher.(pilot.PhaseWatcher); !ok {
				t.Errorf("watcher %T does not follow phases", cmd.Watcher)
			}
		})
	}
}

func TestPiCommandEnv(t *testing.T) {
	// A provider that sets PI_OFFLINE keeps its value: the runner's env
	// would override it.
	a := agentAttempt(t, agents.RunnerPi, pilot.Provider{Env: map[string]string{"PI_OFFLINE": "0"}}, pilot.ModeCode, "", piPrompt, "")
	cmd := agentCommand(t, agents.PiRunner{}, a)
	if v, ok := cmd.Env["PI_OFFLINE"]; ok {
		t.Errorf("runner env sets PI_OFFLINE=%s over the provider's", v)
	}

	// Isolated: a fresh, absolute agent dir, and no models.json.
	a = agentAttempt(t, agents.RunnerPi, pilot.Provider{Isolated: true}, pilot.ModeCode, "", piPrompt, "")
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, a.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	a.RunDir = rel // a Dispatcher with a relative RunDir
	cmd = agentCommand(t, agents.PiRunner{}, a)
	dir := cmd.Env["PI_CODING_AGENT_DIR"]
	if want := filepath.Join(wd, rel, "pi-agent"); dir != want {
		t.Errorf("PI_CODING_AGENT_DIR = %q, want %q", dir, want)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("agent dir: %v, mode %v; want 0700", err, st.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(dir, "models.json")); !os.IsNotExist(err) {
		t.Errorf("models.json written without a base_url: %v", err)
	}
}

func TestPiCommandRefuses(t *testing.T) {
	sessionDir := t.TempDir()
	notSession := filepath.Join(sessionDir, "notes.jsonl")
	os.WriteFile(notSession, []byte(`{"type":"message","id":"a1"}`+"\n"), 0o600)
	empty := filepath.Join(sessionDir, "empty.jsonl")
	os.WriteFile(empty, nil, 0o600)
	tests := []struct {
		name   string
		p      pilot.Provider
		resume string
		prompt string
		want   string
	}{
		{"base url without model", pilot.Provider{BaseURL: "http://127.0.0.1:9/v1"}, "", "x", `base_url but no model`},
		{"blank prompt", pilot.Provider{}, "", " \n", "prompt is empty"},
		{"session id", pilot.Provider{}, "0195f0c2-6a1e", "x", `set Task.Resume to the earlier verdict's "resume" value, which for pi is the session file's path`},
		{"missing file", pilot.Provider{}, filepath.Join(sessionDir, "gone.jsonl"), "x", "no pi session file at"},
		{"directory", pilot.Provider{}, sessionDir, "x", "is not a file"},
		{"not a session", pilot.Provider{}, notSession, "x", "is not a pi session file"},
		{"empty file", pilot.Provider{}, empty, "x", "is not a pi session file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantRefusal(t, agents.PiRunner{}, agentAttempt(t, agents.RunnerPi, tt.p, pilot.ModeCode, tt.resume, tt.prompt, ""), tt.want)
		})
	}
}

func TestPiCommandResume(t *testing.T) {
	// Relative, as the conformance fixture gives it: from pilot's working
	// directory, made absolute for pi, which runs in the task's workdir.
	const rel = "../testdata/pi/stream/resume-earlier-session.jsonl"
	abs, err := filepath.Abs(rel)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []pilot.Mode{pilot.ModeResume, pilot.ModeExplore} {
		a := agentAttempt(t, agents.RunnerPi, pilot.Provider{}, mode, rel, piPrompt, "")
		cmd := agentCommand(t, agents.PiRunner{}, a)
		want := []string{"pi", "-p", "--mode", "json", "--session", abs}
		if mode == pilot.ModeExplore {
			want = append(want, "--tools", "read,grep,find,ls")
		}
		if diff := cmp.Diff(want, cmd.Argv); diff != "" {
			t.Errorf("%s argv (-want +got):\n%s", mode, diff)
		}
		if cmd.SessionPath != abs {
			t.Errorf("SessionPath = %q, want %q", cmd.SessionPath, abs)
		}
		feed(cmd.Watcher, `{"type":"session","version":3,"id":"0195f0c2-6a1e-7c3b-9d2e-4b8f1a7c3e0f","timestamp":"2026-03-16T09:12:03.512Z","cwd":"/home/dev/proj"}`)
		res := cmd.Watcher.Finish(pilot.Exit{Runner: "pi", Started: true})
		if res.SessionID != "0195f0c2-6a1e-7c3b-9d2e-4b8f1a7c3e0f" || res.Resume != abs {
			t.Errorf("session %q resume %q, want the header's id and %q", res.SessionID, res.Resume, abs)
		}
	}
}

// TestPiDispatchBaseURL runs a pi provider with a base_url through a real
// dispatch (the fake agent replays a recorded stream) and checks what the
// worker got: its own agent dir holding a models.json that names the
// credential variable and never holds the secret, the secret only in that
// variable, and the verdict's resume pointing at the session file.
func TestPiDispatchBaseURL(t *testing.T) {
	const secret = "sk-pilot-test-4f9c2e"
	p := replayProvider(t, agents.RunnerPi, "../testdata/pi/stream/success-gen-a")
	p.Name, p.Model, p.BaseURL, p.CredentialEnv = "local", "qwen3-coder", "http://127.0.0.1:8080/v1", "LOCAL_LLM_KEY"
	d := secretDispatcher(t, p, secret)
	v := dispatchCompleted(t, d, pilot.Task{Provider: "local", Mode: pilot.ModeCode, Prompt: "-rename the flag"})
	runDir := filepath.Dir(v.Record)
	if want := filepath.Join(runDir, "session.jsonl"); v.Resume != want {
		t.Errorf("resume = %q, want the session file %q", v.Resume, want)
	}

	call, env := readCall(t, p)
	if call.Stdin != "-rename the flag" {
		t.Errorf("stdin = %q, want the prompt", call.Stdin)
	}
	if !subsequence(call.Argv, []string{"--session", v.Resume, "--provider", "pilot", "--model", "qwen3-coder"}) {
		t.Errorf("argv %q", call.Argv)
	}
	agentDir := filepath.Join(runDir, "pi-agent")
	for k, want := range map[string]string{"PI_CODING_AGENT_DIR": agentDir, "LOCAL_LLM_KEY": secret, "PERSISTENT_STORE": "jsonl", "PI_OFFLINE": "1"} {
		if env[k] != want {
			t.Errorf("worker env %s = %q, want %q", k, env[k], want)
		}
	}

	raw := readPrivateFile(t, filepath.Join(agentDir, "models.json"))
	if strings.Contains(string(raw), secret) {
		t.Fatalf("models.json holds the secret:\n%s", raw)
	}
	var models struct {
		Providers map[string]struct {
			BaseURL string `json:"baseUrl"`
			API     string `json:"api"`
			APIKey  string `json:"apiKey"`
			Models  []struct {
				ID string `json:"id"`
			} `json:"models"`
		} `json:"providers"`
	}
	if err := json.Unmarshal(raw, &models); err != nil {
		t.Fatal(err)
	}
	got, ok := models.Providers["pilot"]
	if !ok || len(models.Providers) != 1 {
		t.Fatalf("providers = %v, want only pilot", models.Providers)
	}
	if got.BaseURL != p.BaseURL || got.API != "openai-completions" || got.APIKey != "LOCAL_LLM_KEY" ||
		len(got.Models) != 1 || got.Models[0].ID != "qwen3-coder" {
		t.Errorf("models.json provider = %+v", got)
	}
}

func TestPiModelsWithoutCredential(t *testing.T) {
	a := agentAttempt(t, agents.RunnerPi, pilot.Provider{Model: "m", BaseURL: "http://127.0.0.1:9/v1"}, pilot.ModeCode, "", piPrompt, "")
	cmd := agentCommand(t, agents.PiRunner{}, a)
	raw, err := os.ReadFile(filepath.Join(cmd.Env["PI_CODING_AGENT_DIR"], "models.json"))
	if err != nil {
		t.Fatal(err)
	}
	// pi refuses a custom model without an apiKey; a value that names no
	// variable is sent as itself.
	if !strings.Contains(string(raw), `"apiKey": "pilot-no-credential"`) {
		t.Errorf("models.json:\n%s", raw)
	}
}

func piWatcher(t *testing.T) pilot.PhaseWatcher {
	t.Helper()
	return agentWatcher(t, agents.PiRunner{}, agentAttempt(t, agents.RunnerPi, pilot.Provider{}, pilot.ModeCode, "", piPrompt, ""))
}

// Lines for the watcher tests, in pi's JSON.stringify form.
const (
	piHeader     = `{"type":"session","version":3,"id":"s-1","timestamp":"2026-03-16T09:12:03.512Z","cwd":"/p"}`
	piAgentStart = `{"type":"agent_start"}`
	piAgentEnd   = `{"type":"agent_end","messages":[]}`
	piToolsTwo   = `{"type":"message_end","message":{"role":"assistant","content":[{"type":"toolCall","id":"A","name":"read","arguments":{}},{"type":"toolCall","id":"B","name":"ls","arguments":{}}],"usage":{"input":10,"output":2,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.5}},"stopReason":"toolUse"}}`
	piStopText   = `{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"usage":{"input":20,"output":3,"cacheRead":4,"cacheWrite":1,"cost":{"total":0.25}},"stopReason":"stop"}}`
)

func piError(msg string) string {
	return `{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":` + strconv.Quote(msg) + `}}`
}

func TestPiWatcherPhases(t *testing.T) {
	w := piWatcher(t)
	if _, _, ok := w.StreamState(); ok {
		t.Fatal("a phase before any line")
	}
	steps := []struct {
		line    string
		phase   pilot.SessionPhase
		reason  string
		pending []string
	}{
		{piHeader, "", "", nil},
		{piAgentStart, pilot.PhaseAwaitingModel, "stream:agent_start", nil},
		{`{"type":"message_update","message":{"role":"assistant"},"assistantMessageEvent":{"type":"toolcall_start"}}`, pilot.PhaseAwaitingModel, "stream:message_update", nil},
		{piToolsTwo, pilot.PhaseToolRunning, "stream:message_end", []string{"A", "B"}},
		{`{"type":"tool_execution_start","toolCallId":"A","toolName":"read","args":{}}`, pilot.PhaseToolRunning, "stream:tool_execution_start", []string{"A", "B"}},
		{`{"type":"tool_execution_start","toolCallId":"B","toolName":"ls","args":{}}`, pilot.PhaseToolRunning, "stream:tool_execution_start", []string{"A", "B"}},
		{`{"type":"tool_execution_end","toolCallId":"B","toolName":"ls","result":{},"isError":false}`, pilot.PhaseToolRunning, "stream:tool_execution_end", []string{"A"}},
		{`{"type":"tool_execution_update","toolCallId":"A","toolName":"read","args":{},"partialResult":{}}`, pilot.PhaseToolRunning, "stream:tool_execution_update", []string{"A"}},
		{`{"type":"message_end","message":{"role":"toolResult","toolCallId":"B","toolName":"ls","content":[],"isError":false}}`, pilot.PhaseToolRunning, "stream:message_end", []string{"A"}},
		{`{"type":"tool_execution_end","toolCallId":"A","toolName":"read","result":{},"isError":false}`, pilot.PhaseAwaitingModel, "stream:tool_execution_end", nil},
		{`{"type":"turn_start"}`, pilot.PhaseAwaitingModel, "stream:turn_start", nil},
		{piError("529 overloaded_error: Overloaded"), pilot.PhaseErrored, "stream:message_end", nil},
		{`{"type":"agent_end","messages":[],"willRetry":true}`, pilot.PhaseErrored, "stream:agent_end", nil},
		{`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":60000,"errorMessage":"529"}`, pilot.PhaseAwaitingModel, "stream:auto_retry_start", nil},
		{piAgentStart, pilot.PhaseAwaitingModel, "stream:agent_start", nil},
		{piStopText, pilot.PhaseFinished, "stream:message_end", nil},
		{`{"type":"compaction_start","reason":"threshold"}`, pilot.PhaseAwaitingModel, "stream:compaction_start", nil},
		{`{"type":"compaction_end","reason":"threshold","aborted":false,"willRetry":false}`, pilot.PhaseFinished, "stream:compaction_end", nil},
		{`{"type":"agent_settled"}`, pilot.PhaseFinished, "stream:agent_settled", nil},
	}
	for i, s := range steps {
		feed(w, s.line)
		st, quiet, ok := w.StreamState()
		if s.phase == "" {
			if ok {
				t.Errorf("step %d: phase %s, want none yet", i, st.Phase)
			}
			continue
		}
		got := []any{st.Phase, st.Reason, st.PendingToolCallIDs}
		want := []any{s.phase, s.reason, s.pending}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("step %d (%.60s) (-want +got):\n%s", i, s.line, diff)
		}
		if retrying := s.reason == "stream:auto_retry_start"; retrying == quiet.IsZero() {
			t.Errorf("step %d: quietUntil %v", i, quiet)
		}
	}
	res := w.Finish(pilot.Exit{Runner: "pi", Started: true})
	if res.Outcome != pilot.Completed || res.SessionID != "s-1" {
		t.Errorf("result %+v", res)
	}
	cost := 0.75
	want := &pilot.Usage{InputTokens: 30, OutputTokens: 5, CacheReadTokens: 4, CacheWriteTokens: 1, CostUSD: &cost}
	if diff := cmp.Diff(want, res.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

func TestPiWatcherFinish(t *testing.T) {
	rateLimit := pilot.ClassifyFailure("429 Rate limit reached for requests")
	tests := []struct {
		name  string
		lines []string
		exit  pilot.Exit
		want  pilot.Outcome
		class pilot.FailureClass
		ev    string // evidence line contains
	}{
		{"completed", []string{piHeader, piAgentStart, piStopText, piAgentEnd}, pilot.Exit{}, pilot.Completed, "", ""},
		{"no header, no session id, still judged", []string{piAgentStart, piStopText, piAgentEnd}, pilot.Exit{}, pilot.Completed, "", ""},
		{"exit 1 after an answer", []string{piHeader, piAgentStart, piStopText, piAgentEnd}, pilot.Exit{Code: 1}, pilot.Failed, pilot.FailGeneric, ""},
		// Only the last assistant message counts: the Dispatcher's
		// diagnostic still holds the 429 pi retried.
		{"last error wins over a retried one", []string{piHeader, piAgentStart, piError("429 Rate limit reached for requests"), piAgentEnd,
			`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"429"}`, piAgentStart, piError("Connection error."), piAgentEnd,
			`{"type":"auto_retry_end","success":false,"attempt":1,"finalError":"Connection error."}`},
			pilot.Exit{Diagnostic: withSource(rateLimit, "pi:stdout")}, pilot.Failed, pilot.FailProviderConnection, "Connection error."},
		// agent.ts's catch: an error thrown outside the model stream gives
		// agent_end with a synthesized message and no message_end.
		{"agent_end only", []string{piHeader, piAgentStart, `{"type":"agent_end","messages":[{"role":"assistant","content":[{"type":"text","text":""}],"stopReason":"error","errorMessage":"No API key found for openai.\n\nUse /login or set an API key environment variable."}]}`},
			pilot.Exit{}, pilot.Failed, pilot.FailProviderAuth, "No API key found for openai."},
		{"aborted, no message", []string{piHeader, piAgentStart, `{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"aborted"}}`, piAgentEnd},
			pilot.Exit{}, pilot.Failed, pilot.FailGeneric, "Request aborted"},
		{"unclassified error", []string{piHeader, piAgentStart, piError("model said no"), piAgentEnd},
			pilot.Exit{Diagnostic: withSource(rateLimit, "pi:stderr")}, pilot.Failed, pilot.FailGeneric, "model said no"},
		// pi's "<status> <body>" with a body that names no provider (seen
		// from pi 0.73 against a local endpoint answering 500): the
		// status is the provider's.
		{"bare status and body", []string{piHeader, piAgentStart, piError("500 fakellm: boom"), piAgentEnd},
			pilot.Exit{}, pilot.Failed, pilot.FailProviderServerError, "500 fakellm: boom"},
		// pi 1.x appends the error's deepest cause to the SDK's message
		// (seen from pi 1.6.0 against a closed port and a dropped
		// stream); pi 0.x wrote the bare phrases.
		{"1.x connection error with its cause", []string{piHeader, piAgentStart, piError("Connection error.: connect ECONNREFUSED 127.0.0.1:38591"), piAgentEnd},
			pilot.Exit{}, pilot.Failed, pilot.FailProviderConnection, "Connection error.: connect ECONNREFUSED 127.0.0.1:38591"},
		{"1.x connection error, cause no class", []string{piHeader, piAgentStart, piError("Connection error.: bad port"), piAgentEnd},
			pilot.Exit{}, pilot.Failed, pilot.FailProviderConnection, "Connection error.: bad port"},
		{"1.x terminated with its cause", []string{piHeader, piAgentStart, piError("terminated: other side closed (UND_ERR_SOCKET)"), piAgentEnd},
			pilot.Exit{}, pilot.Failed, pilot.FailProviderStreamDisconnect, "terminated: other side closed (UND_ERR_SOCKET)"},
		{"head that proves nothing", []string{piHeader, piAgentStart, piError("Terminated: other side closed"), piAgentEnd},
			pilot.Exit{}, pilot.Failed, pilot.FailGeneric, "Terminated: other side closed"},
		{"retry announced, pi exits", []string{piHeader, piAgentStart, piError("Connection error."), `{"type":"agent_end","messages":[],"willRetry":true}`},
			pilot.Exit{}, pilot.Failed, pilot.FailProviderConnection, "Connection error."},
		{"last message asked for tools", []string{piHeader, piAgentStart, piToolsTwo, piAgentEnd},
			pilot.Exit{}, pilot.Failed, pilot.FailIncomplete, "final answer"},
		{"unknown stop reason", []string{piHeader, piAgentStart, `{"type":"message_end","message":{"role":"assistant","content":"hi","stopReason":"pending"}}`, piAgentEnd},
			pilot.Exit{}, pilot.Failed, pilot.FailGeneric, `"pending"`},
		{"string content is text", []string{piHeader, piAgentStart, `{"type":"message_end","message":{"role":"assistant","content":"hi","stopReason":"stop"}}`, piAgentEnd},
			pilot.Exit{}, pilot.Completed, "", ""},
		{"header only, exit 0", []string{piHeader}, pilot.Exit{}, pilot.Failed, pilot.FailIncomplete, "final assistant message"},
		{"header only, exit 1", []string{piHeader}, pilot.Exit{Code: 1}, pilot.Failed, pilot.FailGeneric, ""},
		{"killed by pilot", []string{piHeader, piAgentStart, piStopText, piAgentEnd}, pilot.Exit{Terminated: true, Reason: pilot.FailTimeout, Code: -1, Signal: 15}, pilot.Failed, pilot.FailTimeout, ""},
		{"non-JSON and odd lines", []string{"Warning: something", `{"type":`, `{"type":"message_end","message":"x"}`, `[1,2]`, `{"type":"agent_end","messages":{}}`}, pilot.Exit{}, pilot.Failed, pilot.FailIncomplete, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := piWatcher(t)
			feed(w, tt.lines...)
			e := tt.exit
			e.Runner, e.Started = "pi", true
			res := w.Finish(e)
			if res.Outcome != tt.want || res.Class != tt.class {
				t.Errorf("outcome %s %s, want %s %s (%+v)", res.Outcome, res.Class, tt.want, tt.class, res.Evidence)
			}
			if tt.ev != "" && (!strings.Contains(res.Evidence, tt.ev)) {
				t.Errorf("evidence %+v, want one containing %q", res.Evidence, tt.ev)
			}
			if slices.Contains(tt.lines, piHeader) && res.SessionID != "s-1" {
				t.Errorf("session id %q", res.SessionID)
			}
		})
	}
}

// TestPiWatcherTruncated: a line longer than the Dispatcher reads is only a
// prefix; the watcher still uses its event type but never its body.
func TestPiWatcherTruncated(t *testing.T) {
	w := piWatcher(t)
	feed(w, piHeader, piAgentStart, piToolsTwo)
	for _, l := range []string{
		`{"type":"tool_execution_end","toolCallId":"A","toolName":"read","result":{"content":[{"type":"text","text":"aaaa`,
		`{"type":"message_end","message":{"role":"toolResult","toolCallId":"B","toolName":"ls","content":[{"type":"text","text":"aaaa`,
	} {
		w.Line(pilot.Line{Stream: pilot.Stdout, Data: []byte(l), Size: 9 << 20, Truncated: true})
	}
	if st, _, _ := w.StreamState(); st.Phase != pilot.PhaseAwaitingModel || len(st.PendingToolCallIDs) != 0 {
		t.Errorf("after both tools ended: %+v", st)
	}
	feed(w, piStopText)
	long := `{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"aaaa`
	w.Line(pilot.Line{Stream: pilot.Stdout, Data: []byte(long), Size: 9 << 20, Truncated: true})
	w.Line(pilot.Line{Stream: pilot.Stdout, Data: []byte(`{"type":"agent_end","messages":[{"role":"user"`), Size: 9 << 20, Truncated: true})
	st, _, _ := w.StreamState()
	if st.Phase != pilot.PhaseUnknown {
		t.Errorf("phase %s, want unknown", st.Phase)
	}
	res := w.Finish(pilot.Exit{Runner: "pi", Started: true})
	if res.Outcome != pilot.Failed || res.Class != pilot.FailGeneric || !strings.Contains(res.Evidence, "MaxLineBytes") {
		t.Errorf("result %+v %+v", res, res.Evidence)
	}
}

func FuzzPiWatcher(f *testing.F) {
	for _, s := range []string{piHeader, piAgentStart, piToolsTwo, piStopText, piAgentEnd, piError("429 x"),
		`{"type":"auto_retry_start","delayMs":1e308}`, `{"type":"auto_retry_end","success":false}`,
		`{"type":"tool_execution_start","toolCallId":5}`, `{"type":"agent_end","messages":[null,{"role":"assistant","usage":{"input":-1e300}}],"willRetry":"x"}`} {
		f.Add(s, 0, false)
	}
	a := agentAttempt(f, agents.RunnerPi, pilot.Provider{}, pilot.ModeCode, "", "x", "")
	f.Fuzz(func(t *testing.T, data string, code int, truncated bool) {
		var lines []pilot.Line
		for _, l := range strings.Split(data, "\n") {
			lines = append(lines, pilot.Line{Stream: pilot.Stdout, Data: []byte(l), Size: int64(len(l)), Truncated: truncated})
		}
		fuzzWatcher(t, agents.PiRunner{}, a, lines, pilot.Exit{Runner: "pi", Started: true, Code: code})
	})
}
