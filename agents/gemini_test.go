package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

func TestGeminiCommandArgv(t *testing.T) {
	base := pilot.Provider{Name: "gm", Runner: agents.RunnerGemini}
	withModel := base
	withModel.Model = "gemini-2.5-pro"
	withArgs := withModel
	withArgs.Binary = "/opt/gemini/bin/gemini"
	withArgs.Args = []string{"--include-directories", "../lib"}
	const prompt = `--prompt=-fix the bug "now"`
	tests := []struct {
		name   string
		p      pilot.Provider
		mode   pilot.Mode
		resume string
		want   []string // "POLICY" stands for the read-only policy file
	}{
		{"code", base, pilot.ModeCode, "", []string{"gemini", "--output-format", "stream-json", "--approval-mode", "yolo", prompt}},
		{"test", withModel, pilot.ModeTest, "",
			[]string{"gemini", "--output-format", "stream-json", "--model", "gemini-2.5-pro", "--approval-mode", "yolo", prompt}},
		{"explore is plan mode, kept there", withModel, pilot.ModeExplore, "",
			[]string{"gemini", "--output-format", "stream-json", "--model", "gemini-2.5-pro", "--approval-mode", "plan", "--admin-policy", "POLICY", prompt}},
		{"review is plan mode, kept there", base, pilot.ModeReview, "",
			[]string{"gemini", "--output-format", "stream-json", "--approval-mode", "plan", "--admin-policy", "POLICY", prompt}},
		{"resume", base, pilot.ModeResume, "0d9c8b7a-6f5e-4d3c-2b1a-0f9e8d7c6b5a",
			[]string{"gemini", "--output-format", "stream-json", "--approval-mode", "yolo", "--resume", "0d9c8b7a-6f5e-4d3c-2b1a-0f9e8d7c6b5a", prompt}},
		{"review resuming", base, pilot.ModeReview, "0d9c8b7a",
			[]string{"gemini", "--output-format", "stream-json", "--approval-mode", "plan", "--admin-policy", "POLICY", "--resume", "0d9c8b7a", prompt}},
		{"binary and args before the prompt", withArgs, pilot.ModeCode, "",
			[]string{"/opt/gemini/bin/gemini", "--output-format", "stream-json", "--model", "gemini-2.5-pro", "--approval-mode", "yolo", "--include-directories", "../lib", prompt}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := agentAttempt(t, agents.RunnerGemini, tc.p, tc.mode, tc.resume, flagPrompt, "/work/tree")
			cmd := agentCommand(t, agents.GeminiRunner{}, a)
			policy := filepath.Join(a.RunDir, "gemini-read-only.toml")
			want := append([]string(nil), tc.want...)
			for i, s := range want {
				if s == "POLICY" {
					want[i] = policy
				}
			}
			if diff := cmp.Diff(want, cmd.Argv); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			if cmd.Stdin != nil {
				t.Errorf("stdin = %q, want none", cmd.Stdin)
			}
			if len(cmd.Env) != 0 || len(cmd.SecretEnv) != 0 {
				t.Errorf("env %v, secret env %v; want none without isolation or a key", cmd.Env, cmd.SecretEnv)
			}
			data, err := os.ReadFile(policy)
			switch {
			case tc.mode == pilot.ModeExplore || tc.mode == pilot.ModeReview:
				if err != nil || !strings.Contains(string(data), `toolName = "exit_plan_mode"`) || !strings.Contains(string(data), `decision = "deny"`) {
					t.Errorf("policy %s: %v\n%s", policy, err, data)
				}
				if st, err := os.Stat(policy); err != nil || st.Mode().Perm() != 0o600 {
					t.Errorf("policy mode: %v %v", st.Mode().Perm(), err)
				}
			case err == nil:
				t.Errorf("a %s task wrote the read-only policy", tc.mode)
			}
		})
	}
}

func TestGeminiCommandRefusals(t *testing.T) {
	base := pilot.Provider{Name: "gm", Runner: agents.RunnerGemini}
	isolated := base
	isolated.Isolated = true
	tests := []struct {
		name   string
		p      pilot.Provider
		resume string
		prompt string
		want   string
	}{
		{"resume latest", base, "latest", "", "latest session"},
		{"resume by index", base, "5", "", "list index"},
		{"resume id read as a flag", base, "-h", "", "not a session id"},
		{"isolated resume by bare id", isolated, "0d9c8b7a", "", "resume with that verdict's"},
		{"resume from a home that is gone", base, "/nonexistent/run/gemini-home/0d9c8b7a", "", "holds no gemini home"},
		{"prompt over one argument's limit", base, "", strings.Repeat("x", 128<<10), "Linux limits one argument"},
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
			wantRefusal(t, agents.GeminiRunner{}, agentAttempt(t, agents.RunnerGemini, tc.p, mode, tc.resume, prompt, ""), tc.want)
		})
	}
	a := agentAttempt(t, agents.RunnerGemini, base, pilot.ModeCode, "", strings.Repeat("x", 100<<10), "")
	if _, err := (agents.GeminiRunner{}).Command(context.Background(), a); err != nil {
		t.Errorf("a 100 KiB prompt: %v", err)
	}
}

// A BaseURL provider gets its own gemini home, the endpoint and the key
// under the name gemini reads; its resume value finds that home again.
func TestGeminiBaseURLIsolationAndResume(t *testing.T) {
	const secret = "AIza-gemini-test-secret-5678"
	p := replayProvider(t, agents.RunnerGemini, "../testdata/gemini/stream/success")
	p.BaseURL = "http://127.0.0.1:9"
	p.CredentialEnv = "GW_KEY"
	d := secretDispatcher(t, p, secret)

	v := dispatchCompleted(t, d, pilot.Task{Provider: p.Name, Mode: pilot.ModeCode, Prompt: "add a flag"})
	runDir := filepath.Dir(v.Record)
	home := filepath.Join(runDir, "gemini-home")
	call, env := readCall(t, p)
	for k, want := range map[string]string{
		"GEMINI_CLI_HOME":            home,
		"GEMINI_CLI_TRUST_WORKSPACE": "true",
		"GOOGLE_GEMINI_BASE_URL":     p.BaseURL,
		"GEMINI_API_KEY":             secret,
		"GW_KEY":                     secret,
	} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	if st, err := os.Stat(home); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("home %s: %v; want a 0700 dir", home, err)
	}
	if call.Argv[len(call.Argv)-1] != "--prompt=add a flag" {
		t.Errorf("argv %q does not end with the prompt", call.Argv)
	}
	noSecretIn(t, runDir, secret)

	const sid = "7c1e2f4a-9b3d-4e5f-8a6b-0c1d2e3f4a5b"
	if v.SessionID != sid || v.Resume != filepath.Join(home, sid) {
		t.Fatalf("session %q resume %q; want %q and %q", v.SessionID, v.Resume, sid, filepath.Join(home, sid))
	}
	// pilot chose the API key and turned usage statistics off in the
	// fresh home; gemini keeps its ~/.gemini there.
	settings := readPrivateFile(t, filepath.Join(home, ".gemini", "settings.json"))
	var set struct {
		Security struct{ Auth struct{ SelectedType string } }
		Privacy  struct{ UsageStatisticsEnabled *bool }
	}
	if err := json.Unmarshal(settings, &set); err != nil || set.Security.Auth.SelectedType != "gemini-api-key" ||
		set.Privacy.UsageStatisticsEnabled == nil || *set.Privacy.UsageStatisticsEnabled {
		t.Errorf("settings.json %s (%v): want the API key selected and usage statistics off", settings, err)
	}
	mustDispatch(t, d, pilot.Task{Provider: p.Name, Mode: pilot.ModeResume, Prompt: "go on", Resume: v.Resume})
	call, env = readCall(t, p)
	if !subsequence(call.Argv, []string{"--resume", sid}) {
		t.Errorf("resume argv %q has no --resume %s", call.Argv, sid)
	}
	if env["GEMINI_CLI_HOME"] != home {
		t.Errorf("resumed GEMINI_CLI_HOME = %q, want the first run's %q", env["GEMINI_CLI_HOME"], home)
	}
}

// A provider whose key is already GEMINI_API_KEY needs no second name.
func TestGeminiSecretEnv(t *testing.T) {
	for cred, want := range map[string][]string{"": nil, "GEMINI_API_KEY": nil, "MY_KEY": {"GEMINI_API_KEY"}} {
		p := pilot.Provider{Name: "gm", Runner: agents.RunnerGemini, CredentialEnv: cred}
		cmd := agentCommand(t, agents.GeminiRunner{}, agentAttempt(t, agents.RunnerGemini, p, pilot.ModeCode, "", flagPrompt, ""))
		if diff := cmp.Diff(want, cmd.SecretEnv); diff != "" {
			t.Errorf("credential %q: SecretEnv (-want +got):\n%s", cred, diff)
		}
	}
}

// geminiWatcher is the watcher of a plain gemini provider's command.
func geminiWatcher(t *testing.T) pilot.PhaseWatcher {
	t.Helper()
	return agentWatcher(t, agents.GeminiRunner{}, agentAttempt(t, agents.RunnerGemini, pilot.Provider{Name: "gm"}, pilot.ModeCode, "", flagPrompt, ""))
}

// Parallel tool calls stay pending until each has its result.
func TestGeminiWatcherPendingTools(t *testing.T) {
	w := geminiWatcher(t)
	steps := []struct {
		line    string
		phase   pilot.SessionPhase
		pending []string
	}{
		{`{"type":"init","session_id":"s1","model":"m"}`, pilot.PhaseAwaitingModel, nil},
		{`{"type":"tool_use","tool_name":"glob","tool_id":"a","parameters":{}}`, pilot.PhaseToolRunning, []string{"a"}},
		{`{"type":"tool_use","tool_name":"grep","tool_id":"b","parameters":{}}`, pilot.PhaseToolRunning, []string{"a", "b"}},
		{`{"type":"tool_use","tool_name":"grep","tool_id":"b","parameters":{}}`, pilot.PhaseToolRunning, []string{"a", "b"}},
		{`{"type":"message","role":"assistant","content":"still streaming","delta":true}`, pilot.PhaseToolRunning, []string{"a", "b"}},
		{`{"type":"error","severity":"warning","message":"Loop detected, stopping execution"}`, pilot.PhaseToolRunning, []string{"a", "b"}},
		{`{"type":"tool_result","tool_id":"b","status":"success"}`, pilot.PhaseToolRunning, []string{"a"}},
		{`{"type":"tool_result","tool_id":"zzz","status":"success"}`, pilot.PhaseToolRunning, []string{"a"}},
		{`{"type":"tool_result","tool_id":"a","status":"error","error":{"type":"X","message":"y"}}`, pilot.PhaseAwaitingModel, nil},
		{`{"type":"result","status":"success","stats":{"input_tokens":10,"output_tokens":2,"cached":4}}`, pilot.PhaseFinished, nil},
	}
	for i, s := range steps {
		w.Line(pilot.Line{Stream: pilot.Stdout, Data: []byte(s.line), Size: int64(len(s.line))})
		st, _, ok := w.StreamState()
		if !ok || st.Phase != s.phase || !cmp.Equal(s.pending, st.PendingToolCallIDs, cmpEmptyNil) {
			t.Errorf("after line %d: %s %q; want %s %q", i, st.Phase, st.PendingToolCallIDs, s.phase, s.pending)
		}
	}
	res := w.Finish(pilot.Exit{Runner: agents.RunnerGemini, Started: true})
	want := pilot.Result{Outcome: pilot.Completed, SessionID: "s1",
		Usage: &pilot.Usage{InputTokens: 6, OutputTokens: 2, CacheReadTokens: 4}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

var cmpEmptyNil = cmp.Comparer(func(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || cmp.Equal(a, b))
})

// Finish on exit codes: gemini exits with an API error's HTTP status.
func TestGeminiWatcherFinish(t *testing.T) {
	const (
		initEv  = `{"type":"init","session_id":"s1","model":"m"}`
		answer  = `{"type":"message","role":"assistant","content":"done","delta":true}`
		ok      = `{"type":"result","status":"success","stats":{}}`
		badKey  = `{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: API key not valid. Please pass a valid API key.]"}}`
		cancel  = `{"type":"result","status":"error","error":{"type":"FatalCancellationError","message":"Operation cancelled."}}`
		turns   = `{"type":"result","status":"error","error":{"type":"FatalTurnLimitedError","message":"Reached max session turns for this session."}}`
		noInput = `{"type":"result","status":"error","error":{"type":"FatalInputError","message":"No input provided via stdin."}}`
	)
	auth := withSource(pilot.ClassifyFailure("unknown: [API Error: API key not valid. Please pass a valid API key.]"), "gemini:stdout")
	tests := []struct {
		name  string
		lines []string
		exit  pilot.Exit
		want  pilot.Outcome
		class pilot.FailureClass
	}{
		{"400 reported, exit 144 is no signal", []string{initEv, badKey}, pilot.Exit{Started: true, Code: 144, Diagnostic: auth}, pilot.Failed, pilot.FailProviderAuth},
		{"exit 144 without a result is a signal", []string{initEv}, pilot.Exit{Started: true, Code: 144}, pilot.Failed, pilot.FailProcessTerminated},
		{"exit 143 after a result error is still SIGTERM", []string{initEv, badKey}, pilot.Exit{Started: true, Code: 143, Diagnostic: auth}, pilot.Failed, pilot.FailProcessTerminated},
		{"cancelled, exit 130", []string{initEv, cancel}, pilot.Exit{Started: true, Code: 130}, pilot.Failed, pilot.FailProcessTerminated},
		{"turn limit by result type", []string{initEv, turns}, pilot.Exit{Started: true, Code: 53}, pilot.StepCappedPartial, ""},
		{"turn limit by exit code alone", []string{initEv}, pilot.Exit{Started: true, Code: 53}, pilot.StepCappedPartial, ""},
		{"a documented exit code beats an unclassified result", []string{noInput}, pilot.Exit{Started: true, Code: 42}, pilot.Failed, pilot.FailSpawn},
		{"an unclassified result error", []string{initEv, cancel}, pilot.Exit{Started: true, Code: 1}, pilot.Failed, pilot.FailGeneric},
		{"success even if the exit is not 0", []string{initEv, answer, ok}, pilot.Exit{Started: true, Code: 1}, pilot.Completed, ""},
		{"exit 41 before any event", nil, pilot.Exit{Started: true, Code: 41}, pilot.Failed, pilot.FailProviderAuth},
		{"truncated result is not read", []string{initEv, answer}, pilot.Exit{Started: true}, pilot.Failed, pilot.FailIncomplete},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := geminiWatcher(t)
			feed(w, tc.lines...)
			if tc.name == "truncated result is not read" {
				w.Line(pilot.Line{Stream: pilot.Stdout, Data: []byte(ok), Size: 1 << 30, Truncated: true})
			}
			tc.exit.Runner = agents.RunnerGemini
			res := w.Finish(tc.exit)
			if res.Outcome != tc.want || res.Class != tc.class {
				t.Errorf("Finish = %s %s, want %s %s (%+v)", res.Outcome, res.Class, tc.want, tc.class, res)
			}
		})
	}
}

// gemini's result event decides the evidence over the same error on its
// stderr, which the Dispatcher may have read after it (e2e runs of
// gemini-cli 0.61.0 against fakellm gave a context overflow's evidence
// from either stream). A result that proves no class leaves the
// Dispatcher's diagnostic to decide.
func TestGeminiWatcherResultEvidence(t *testing.T) {
	const overflow = `{"error":{"code":400,"message":"The input token count (200000) exceeds the maximum number of tokens allowed (128000).","status":"INVALID_ARGUMENT"}}`
	stderrLine := "Error when talking to Gemini API Full report available at: /tmp/x.json _ApiError: " + overflow
	stderrDiag := func(line string) *pilot.Classification {
		return withSource(pilot.ClassifyFailure(line), "gemini:stderr")
	}
	result := func(msg string) string {
		b, _ := json.Marshal(map[string]any{"type": "result", "status": "error", "error": map[string]any{"type": "unknown", "message": msg}})
		return string(b)
	}
	for _, tc := range []struct {
		name       string
		result     string
		diag       *pilot.Classification
		class      pilot.FailureClass
		source     string
		evidenceIn string
	}{
		{"the result over the same error on stderr", result("[API Error: " + overflow + "]"), stderrDiag(stderrLine),
			pilot.FailContextLimit, "gemini:stdout", "[API Error:"},
		{"the result's class over another on stderr", result("[API Error: terminated]"), stderrDiag("API Error: 401 unauthorized"),
			pilot.FailProviderStreamDisconnect, "gemini:stdout", "terminated"},
		{"stderr when the result proves nothing", result("something odd"), stderrDiag(stderrLine),
			pilot.FailContextLimit, "gemini:stderr", "_ApiError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := geminiWatcher(t)
			feed(w, `{"type":"init","session_id":"s1","model":"m"}`, tc.result)
			res := w.Finish(pilot.Exit{Runner: agents.RunnerGemini, Started: true, Code: 144, Diagnostic: tc.diag})
			if res.Class != tc.class || res.Classification.Source != tc.source ||
				!strings.Contains(res.Evidence, tc.evidenceIn) {
				t.Errorf("Finish = %s (evidence %+v), want %s from %s", res.Class, res.Evidence, tc.class, tc.source)
			}
		})
	}
}

// An invalid stream ends in a result error without an error object: the
// error event before it is the evidence.
func TestGeminiWatcherInvalidStreamEvidence(t *testing.T) {
	w := geminiWatcher(t)
	feed(w,
		`{"type":"init","session_id":"s1","model":"m"}`,
		`{"type":"error","severity":"error","message":"Model stream ended with an invalid chunk or missing finish reason."}`,
		`{"type":"result","status":"error","stats":{}}`,
	)
	res := w.Finish(pilot.Exit{Runner: agents.RunnerGemini, Started: true})
	if res.Outcome != pilot.Failed || res.Class != pilot.FailGeneric || res.Evidence == "" ||
		!strings.Contains(res.Evidence, "invalid chunk") || res.Classification.Source != "gemini:stdout" {
		t.Errorf("Finish = %+v (evidence %+v); want generic-error with the error event as evidence", res, res.Evidence)
	}
}

func FuzzGeminiWatcher(f *testing.F) {
	for _, name := range []string{"success", "parallel-tools", "rate-limit-exit-173", "step-cap-exit-53"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "gemini", "stream", name+".stdout"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, 0)
	}
	f.Add([]byte(`{"type":"result","status":"error","stats":{"input_tokens":-1e300,"cached":"x"}}`), 144)
	f.Add([]byte("{\"type\":\"tool_result\",\"tool_id\":null}\n\x00{"), 53)
	// Every fifth line is read as stderr: gemini's retry notices.
	f.Add([]byte("{}\n{}\n{}\n{}\nAttempt 3 failed with status 500. Retrying with backoff... _ApiError\n{}\n{}\n{}\n{}\nAttempt 2 failed: x. Retrying after 5053ms..."), 244)
	f.Fuzz(func(t *testing.T, data []byte, code int) {
		checkFuzzedWatcher(t, agents.GeminiRunner{}, data, code)
	})
}

// gemini's retry notice on stderr says how long it will be silent.
func TestGeminiWatcherRetryQuiet(t *testing.T) {
	tests := []struct {
		line string
		want time.Duration // 0: no quiet period
	}{
		{"Attempt 2 failed: You have exhausted your capacity on this model. Retrying after 5123ms...", 5123 * time.Millisecond},
		// No delay printed: the longest backoff after attempt N, 5 s
		// doubling to 30 s, plus 30% jitter.
		{"Attempt 1 failed with status 429. Retrying with backoff... ApiError: {}", 6500 * time.Millisecond},
		{`Attempt 1 failed with status 500. Retrying with backoff... _ApiError: {"error":{"code":500,"message":"fakellm: boom","status":"INTERNAL"}}`, 6500 * time.Millisecond},
		{"Attempt 2 failed. Retrying with backoff... Error: exception TypeError: fetch failed sending request", 13 * time.Second},
		{"Attempt 3 failed with 5xx error. Retrying with backoff...", 26 * time.Second},
		{"Attempt 4 failed with 429 error (no Retry-After header). Retrying with backoff...", 39 * time.Second},
		{"Attempt 9 failed with status 503. Retrying with backoff...", 39 * time.Second},
		{"Attempt 9999999999 failed. Retrying with backoff...", 39 * time.Second},
		{"Attempt 99999999999 failed. Retrying with backoff...", 0},
		{"Attempt 0 failed. Retrying with backoff...", 0},
		{"Attempt x failed. Retrying with backoff...", 0},
		{"Attempt 2 failed: boom. Max attempts reached", 0},
		{"the model said: Attempt 2 failed. Retrying with backoff...", 0},
		{"Retrying after ms...", 0},
		{"Retrying after 99999999999999999999ms...", 0},
	}
	for _, tc := range tests {
		w := geminiWatcher(t)
		before := time.Now()
		w.Line(pilot.Line{Stream: pilot.Stderr, Data: []byte(tc.line), Size: int64(len(tc.line))})
		_, quiet, _ := w.StreamState()
		switch {
		case tc.want == 0 && !quiet.IsZero():
			t.Errorf("%q: quiet until %v, want none", tc.line, quiet)
		case tc.want != 0 && (quiet.Before(before.Add(tc.want)) || quiet.After(time.Now().Add(tc.want))):
			t.Errorf("%q: quiet until %v, want %v from now", tc.line, quiet, tc.want)
		}
	}
}

func ExampleGeminiRunner() {
	dir, _ := os.MkdirTemp("", "pilot-example")
	defer os.RemoveAll(dir)
	cmd, err := agents.GeminiRunner{}.Command(context.Background(), pilot.Attempt{
		Task:     pilot.Task{Mode: pilot.ModeCode},
		Provider: pilot.Provider{Name: "gemini", Runner: agents.RunnerGemini, Model: "gemini-2.5-pro", CredentialEnv: "MY_GEMINI_KEY"},
		RunDir:   dir,
		Prompt:   "Add a --verbose flag.",
		Workdir:  dir,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Join(cmd.Argv, " "))
	fmt.Println("secret also in:", cmd.SecretEnv)
	// Output:
	// gemini --output-format stream-json --model gemini-2.5-pro --approval-mode yolo --prompt=Add a --verbose flag.
	// secret also in: [GEMINI_API_KEY]
}
