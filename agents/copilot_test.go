package agents_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

// copilotNewSession matches the --session-id flag of a new session.
var copilotNewSession = regexp.MustCompile(`^--session-id=[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestCopilotCommandArgv(t *testing.T) {
	base := pilot.Provider{Name: "cp", Runner: agents.RunnerCopilot}
	withModel := base
	withModel.Model = "gpt-5"
	withArgs := withModel
	withArgs.Binary = "/opt/copilot/bin/copilot"
	withArgs.Args = []string{"--max-autopilot-continues", "3"}
	head := []string{"copilot", "--output-format", "json", "--no-auto-update", "--allow-all-tools"}
	readOnly := []string{"--deny-tool=shell", "--deny-tool=write"}
	tests := []struct {
		name   string
		p      pilot.Provider
		mode   pilot.Mode
		resume string
		want   []string // without --usage-output-file and the --session-id of a new session
	}{
		{"code", base, pilot.ModeCode, "", append(slicesClone(head), "--allow-all-paths")},
		{"test with a model", withModel, pilot.ModeTest, "", append(slicesClone(head), "--model", "gpt-5", "--allow-all-paths")},
		{"explore denies shell and writes", base, pilot.ModeExplore, "", append(slicesClone(head), readOnly...)},
		{"review denies shell and writes", base, pilot.ModeReview, "", append(slicesClone(head), readOnly...)},
		{"resume by id", base, pilot.ModeResume, "5c2e1f0a-1b2c-4d3e-8f4a-5b6c7d8e9f00", append(slicesClone(head), "--allow-all-paths", "--resume=5c2e1f0a-1b2c-4d3e-8f4a-5b6c7d8e9f00")},
		{"binary and args last", withArgs, pilot.ModeCode, "",
			[]string{"/opt/copilot/bin/copilot", "--output-format", "json", "--no-auto-update", "--allow-all-tools", "--model", "gpt-5", "--allow-all-paths", "--max-autopilot-continues", "3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := agentAttempt(t, agents.RunnerCopilot, tc.p, tc.mode, tc.resume, flagPrompt, "/work/tree")
			cmd := agentCommand(t, agents.CopilotRunner{}, a)
			argv := cmd.Argv
			// The usage file, in the run directory, before Provider.Args.
			u := len(argv) - len(tc.p.Args) - 1
			if want := "--usage-output-file=" + filepath.Join(a.RunDir, "copilot-usage.json"); u < 0 || argv[u] != want {
				t.Fatalf("argv %q has no %s before the provider's args", argv, want)
			}
			argv = append(slicesClone(argv[:u]), argv[u+1:]...)
			if tc.resume == "" {
				// A new session's id, fixed up front, before Provider.Args.
				i := len(argv) - len(tc.p.Args) - 1
				if i < 0 || !copilotNewSession.MatchString(argv[i]) {
					t.Fatalf("argv %q has no --session-id=UUID before the provider's args", argv)
				}
				argv = append(slicesClone(argv[:i]), argv[i+1:]...)
			}
			if diff := cmp.Diff(tc.want, argv); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			if string(cmd.Stdin) != flagPrompt {
				t.Errorf("stdin = %q, want the prompt", cmd.Stdin)
			}
			if len(cmd.Env) != 0 {
				t.Errorf("env of a provider without isolation: %v", cmd.Env)
			}
			if _, err := os.Stat(filepath.Join(a.RunDir, "copilot")); err == nil {
				t.Error("a provider without isolation got a COPILOT_HOME")
			}
		})
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func TestCopilotCommandRefusals(t *testing.T) {
	base := pilot.Provider{Name: "cp", Runner: agents.RunnerCopilot}
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
		{"isolated resume by bare id", isolated, "5c2e1f0a", "", "not the bare session id"},
		{"not a session dir", isolated, "/runs/r/copilot/5c2e1f0a", "", "does not name a copilot session"},
		{"session gone", isolated, "/nonexistent/copilot/session-state/5c2e1f0a", "", "no such copilot session"},
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
			wantRefusal(t, agents.CopilotRunner{}, agentAttempt(t, agents.RunnerCopilot, tc.p, mode, tc.resume, prompt, ""), tc.want)
		})
	}
}

// A BaseURL provider is copilot's BYOK provider in offline mode, in its
// own COPILOT_HOME, the key under the name copilot reads; its resume value
// is <COPILOT_HOME>/session-state/<session id>, which a later worker resumes in that
// home.
func TestCopilotBaseURLIsolationAndResume(t *testing.T) {
	const secret = "sk-copilot-test-secret-13579-long-enough-to-mask"
	p := replayProvider(t, agents.RunnerCopilot, "../testdata/copilot/stream/tool")
	p.BaseURL = "http://127.0.0.1:9/v1"
	p.Model = "fake-model"
	p.CredentialEnv = "GW_KEY"
	d := secretDispatcher(t, p, secret)
	workdir := t.TempDir()

	v := dispatchCompleted(t, d, pilot.Task{Provider: p.Name, Mode: pilot.ModeCode, Prompt: "add a flag", Workdir: workdir})
	runDir := filepath.Dir(v.Record)
	home := filepath.Join(runDir, "copilot")
	_, env := readCall(t, p)
	for k, want := range map[string]string{
		"COPILOT_HOME":              home,
		"COPILOT_PROVIDER_BASE_URL": p.BaseURL,
		"COPILOT_MODEL":             "fake-model",
		"COPILOT_OFFLINE":           "true",
		"COPILOT_PROVIDER_API_KEY":  secret,
		"GW_KEY":                    secret,
	} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	noSecretIn(t, runDir, secret)

	// The session state as copilot writes it, in the earlier worker's home.
	const sid = "d8b72bb4-667d-4438-bdcd-702c91211da4"
	if err := os.MkdirAll(filepath.Join(home, "session-state", sid), 0o700); err != nil {
		t.Fatal(err)
	}
	mustDispatch(t, d, pilot.Task{Provider: p.Name, Mode: pilot.ModeResume, Prompt: "go on", Resume: filepath.Join(home, "session-state", sid), Workdir: workdir})
	call, env := readCall(t, p)
	if !subsequence(call.Argv, []string{"--resume=" + sid}) {
		t.Errorf("resume argv %q has no --resume=%s", call.Argv, sid)
	}
	if env["COPILOT_HOME"] != home {
		t.Errorf("resumed COPILOT_HOME = %q, want the earlier worker's %q", env["COPILOT_HOME"], home)
	}
}

// An isolated worker's resume value names its COPILOT_HOME and the
// session, when that home holds the session's state.
func TestCopilotIsolatedResumeValue(t *testing.T) {
	p := pilot.Provider{Name: "cp", Isolated: true}
	a := agentAttempt(t, agents.RunnerCopilot, p, pilot.ModeCode, "", flagPrompt, "")
	w := agentWatcher(t, agents.CopilotRunner{}, a)
	home := filepath.Join(a.RunDir, "copilot")
	if err := os.MkdirAll(filepath.Join(home, "session-state", "s-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	feed(w, copilotAnswer, copilotOK)
	r := w.Finish(pilot.Exit{Runner: agents.RunnerCopilot, Started: true})
	if want := filepath.Join(home, "session-state", "s-1"); r.Resume != want || r.SessionID != "s-1" {
		t.Errorf("session %q resume %q, want s-1 and %q", r.SessionID, r.Resume, want)
	}
}

// The usage is the tokens of every model in the usage file copilot writes
// as it exits; a session to resume that is gone is told from stderr.
func TestCopilotUsageAndSessionGone(t *testing.T) {
	a := agentAttempt(t, agents.RunnerCopilot, pilot.Provider{Name: "cp"}, pilot.ModeResume, "99999999-bbbb-4ccc-8ddd-eeeeeeeeeeee", flagPrompt, "")
	w := agentWatcher(t, agents.CopilotRunner{}, a)
	data, err := os.ReadFile(filepath.Join("testdata", "copilot", "stream", "usage-file.usage.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.RunDir, "copilot-usage.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	feed(w, copilotAnswer, copilotOK)
	r := w.Finish(pilot.Exit{Runner: agents.RunnerCopilot, Started: true})
	if want := (pilot.Usage{InputTokens: 200, OutputTokens: 40}); r.Usage == nil || *r.Usage != want {
		t.Errorf("usage %+v, want %+v", r.Usage, want)
	}

	w = agentWatcher(t, agents.CopilotRunner{}, agentAttempt(t, agents.RunnerCopilot, pilot.Provider{Name: "cp"}, pilot.ModeResume, "99999999-bbbb-4ccc-8ddd-eeeeeeeeeeee", flagPrompt, ""))
	w.Line(pilot.Line{Stream: pilot.Stderr, Data: []byte("Error: No session, task, or name matched '99999999-bbbb-4ccc-8ddd-eeeeeeeeeeee'.")})
	r = w.Finish(pilot.Exit{Runner: agents.RunnerCopilot, Started: true, Code: 1})
	if !strings.HasPrefix(r.SessionGone, "No session, task, or name matched") || r.Usage != nil {
		t.Errorf("session gone %q, usage %+v", r.SessionGone, r.Usage)
	}
}

// A provider whose key is already COPILOT_PROVIDER_API_KEY needs no second name.
func TestCopilotSecretEnv(t *testing.T) {
	for cred, want := range map[string][]string{"": nil, "COPILOT_PROVIDER_API_KEY": nil, "OPENAI_API_KEY": {"COPILOT_PROVIDER_API_KEY"}} {
		p := pilot.Provider{Name: "cp", Runner: agents.RunnerCopilot, CredentialEnv: cred}
		cmd := agentCommand(t, agents.CopilotRunner{}, agentAttempt(t, agents.RunnerCopilot, p, pilot.ModeCode, "", flagPrompt, ""))
		if diff := cmp.Diff(want, cmd.SecretEnv); diff != "" {
			t.Errorf("credential %q: SecretEnv (-want +got):\n%s", cred, diff)
		}
	}
}

func copilotWatcher(t *testing.T) pilot.PhaseWatcher {
	t.Helper()
	return agentWatcher(t, agents.CopilotRunner{}, agentAttempt(t, agents.RunnerCopilot, pilot.Provider{Name: "cp"}, pilot.ModeCode, "", flagPrompt, ""))
}

const (
	copilotCallStart = `{"type":"model.call_start","data":{"turnId":"0","model":"fake-model"},"ephemeral":true}`
	copilotToolMsg   = `{"type":"assistant.message","data":{"messageId":"m1","content":"","toolRequests":[{"toolCallId":"call_1_0","name":"bash","arguments":{}},{"toolCallId":"call_1_1","name":"bash","arguments":{}}]}}`
	copilotToolStart = `{"type":"tool.execution_start","data":{"toolCallId":"call_1_0","toolName":"bash"}}`
	copilotToolDone0 = `{"type":"tool.execution_complete","data":{"toolCallId":"call_1_0","success":true}}`
	copilotToolDone1 = `{"type":"tool.execution_complete","data":{"toolCallId":"call_1_1","success":true}}`
	copilotAnswer    = `{"type":"assistant.message","data":{"messageId":"m2","content":"done","toolRequests":[]}}`
	copilotOK        = `{"type":"result","sessionId":"s-1","exitCode":0,"usage":{"premiumRequests":0}}`
	copilotFailed    = `{"type":"result","sessionId":"s-1","exitCode":1,"usage":{"premiumRequests":0}}`
	copilot429       = `{"type":"model.call_failure","data":{"statusCode":429,"errorMessage":"{\"code\":\"rate_limit_exceeded\",\"message\":\"Rate limit reached (fakellm)\"}","retryAttempt":0,"failureKind":"api"},"ephemeral":true}`
	copilotRetry     = `{"type":"assistant.turn_retry","data":{"turnId":"0","reason":"rate_limit"},"ephemeral":true}`
	copilotAuthErr   = `{"type":"session.error","data":{"errorType":"authentication","message":"Authentication failed with provider at http://127.0.0.1:9/v1 (HTTP 401).","statusCode":401}}`
)

// The phases follow the model calls and the tools, two at once here; the
// result line ends the stream.
func TestCopilotWatcherPhases(t *testing.T) {
	w := copilotWatcher(t)
	var got []pilot.SessionPhase
	var pending [][]string
	for _, l := range []string{copilotCallStart, copilotToolMsg, copilotToolStart, copilotToolDone0, copilotToolDone1, copilotCallStart, copilotAnswer, copilotOK} {
		feed(w, l)
		st, _, _ := w.StreamState()
		got = append(got, st.Phase)
		pending = append(pending, st.PendingToolCallIDs)
	}
	want := []pilot.SessionPhase{pilot.PhaseAwaitingModel, pilot.PhaseToolRunning, pilot.PhaseToolRunning, pilot.PhaseToolRunning,
		pilot.PhaseAwaitingModel, pilot.PhaseAwaitingModel, pilot.PhaseAwaitingModel, pilot.PhaseFinished}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"call_1_1"}, pending[3]); diff != "" {
		t.Errorf("pending after the first tool completed (-want +got):\n%s", diff)
	}
	r := w.Finish(pilot.Exit{Runner: agents.RunnerCopilot, Started: true})
	if r.Outcome != pilot.Completed || r.SessionID != "s-1" || r.Resume != "s-1" {
		t.Errorf("result %+v, want completed, session s-1", r)
	}
}

// A failed call and the turn's retry are a retry loop of the call's
// class; the model's answer ends it.
func TestCopilotWatcherRetries(t *testing.T) {
	w := copilotWatcher(t)
	rl := w.(interface {
		RetryLoop() (pilot.RetryLoop, bool)
	})
	feed(w, copilotCallStart, copilot429)
	if _, on := rl.RetryLoop(); on {
		t.Error("a retry loop before copilot announced the retry")
	}
	feed(w, copilotRetry, copilotCallStart, copilot429, copilotRetry)
	loop, on := rl.RetryLoop()
	if !on || loop.Retries != 2 || loop.Diagnostic.Class != pilot.FailProviderRateLimit || loop.Diagnostic.Source != "copilot:stdout" ||
		!strings.Contains(loop.Diagnostic.Evidence, "Rate limit reached") || !strings.Contains(loop.Diagnostic.Note, "HTTP 429") {
		t.Fatalf("retry loop %+v (%v), want two rate-limit retries from copilot:stdout", loop, on)
	}
	feed(w, copilotAnswer)
	if _, on := rl.RetryLoop(); on {
		t.Error("the retry loop goes on after the model answered")
	}
	// A retry whose failed call the stream did not show: its reason.
	w = copilotWatcher(t)
	rl = w.(interface {
		RetryLoop() (pilot.RetryLoop, bool)
	})
	feed(w, `{"type":"assistant.turn_retry","data":{"reason":"streaming_error"}}`)
	if loop, on := rl.RetryLoop(); !on || loop.Diagnostic.Class != pilot.FailProviderStreamDisconnect {
		t.Errorf("retry loop %+v (%v), want a stream-disconnect retry", loop, on)
	}
}

func TestCopilotWatcherFinish(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		exit  int
		want  pilot.Outcome
		class pilot.FailureClass
	}{
		{"completed", []string{copilotAnswer, copilotOK}, 0, pilot.Completed, ""},
		{"empty answer", []string{`{"type":"assistant.message","data":{"content":"","toolRequests":[]}}`, copilotOK}, 0, pilot.Empty, ""},
		{"session error", []string{copilotAuthErr, copilotFailed}, 1, pilot.Failed, pilot.FailProviderAuth},
		{"no response is empty", []string{`{"type":"assistant.message","data":{"content":"","toolRequests":[]}}`,
			`{"type":"session.error","data":{"errorType":"query","message":"No response was returned. Send your message again to retry."}}`, copilotFailed}, 1, pilot.Empty, ""},
		{"failed result alone", []string{copilotAnswer, copilotFailed}, 1, pilot.Failed, pilot.FailGeneric},
		{"failed result, exit 0", []string{copilotAnswer, copilotFailed}, 0, pilot.Failed, pilot.FailGeneric},
		{"no result", []string{copilotAnswer}, 0, pilot.Failed, pilot.FailIncomplete},
		{"no result, exit 1", nil, 1, pilot.Failed, pilot.FailGeneric},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := copilotWatcher(t)
			feed(w, tc.lines...)
			r := w.Finish(pilot.Exit{Runner: agents.RunnerCopilot, Started: true, Code: tc.exit})
			if r.Outcome != tc.want || r.Classification.Class != tc.class {
				t.Errorf("outcome %s class %q (%q), want %s %q", r.Outcome, r.Classification.Class, r.Classification.Evidence, tc.want, tc.class)
			}
		})
	}
}

// Diagnose reads session.error and model.call_failure events; a tool's
// output that quotes an API error is no evidence.
func TestCopilotDiagnose(t *testing.T) {
	diagnose, err := agents.Classifier(agents.CopilotRunner{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		stream pilot.Stream
		line   string
		class  pilot.FailureClass // "" for no evidence
	}{
		{pilot.Stdout, copilotAuthErr, pilot.FailProviderAuth},
		{pilot.Stdout, copilot429, pilot.FailProviderRateLimit},
		{pilot.Stdout, `{"type":"session.error","data":{"errorType":"rate_limit","message":"Failed to get response from the AI model; retried 5 times (total retry wait time: 5.59 seconds) Last error: 429 Rate limit reached (fakellm)","statusCode":429}}`, pilot.FailProviderRateLimit},
		{pilot.Stdout, `{"type":"session.error","data":{"errorType":"query","message":"Failed to get response from the AI model; retried 5 times (total retry wait time: 16.36 seconds) Last error: 500 boom (fakellm)","statusCode":500}}`, pilot.FailProviderServerError},
		{pilot.Stdout, `{"type":"session.error","data":{"errorType":"query","message":"400 This model's maximum context length is 128000 tokens. However, your messages resulted in 200000 tokens.","statusCode":400}}`, pilot.FailContextLimit},
		{pilot.Stdout, `{"type":"session.error","data":{"errorType":"query","message":"Failed to get response from the AI model; retried 5 times (total retry wait time: 5.00 seconds) Last error: Failed native model HTTP request: error decoding response body: error reading a body from connection: unexpected EOF during chunk size line"}}`, pilot.FailProviderStreamDisconnect},
		{pilot.Stdout, `{"type":"model.call_failure","data":{"durationMs":46,"failureKind":"transport","errorMessage":"\"Failed native model HTTP request: error decoding response body\""}}`, pilot.FailProviderStreamDisconnect},
		{pilot.Stdout, `{"type":"tool.execution_complete","data":{"toolCallId":"c1","success":true,"result":{"content":"401 Unauthorized: Authentication failed"}}}`, ""},
		{pilot.Stdout, `{"type":"assistant.message","data":{"content":"a 429 rate limit is what the log said"}}`, ""},
		{pilot.Stdout, "not json", ""},
		{pilot.Stderr, "Error: No authentication information found.", pilot.FailProviderAuth},
	}
	for _, tc := range tests {
		c, ok := diagnose(tc.stream, tc.line)
		if got := map[bool]pilot.FailureClass{true: c.Class}[ok]; got != tc.class {
			t.Errorf("%s %s: class %q (evidence %q), want %q", tc.stream, tc.line, got, c.Evidence, tc.class)
		}
	}
}

func FuzzCopilotWatcher(f *testing.F) {
	for _, name := range []string{"tool", "rate-limit", "provider-auth", "stream-disconnect"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "copilot", "stream", name+".stdout"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, 0)
	}
	f.Fuzz(func(t *testing.T, data []byte, code int) {
		checkFuzzedWatcher(t, agents.CopilotRunner{}, data, code)
	})
}

// The runner's sandbox needs: a user's ~/.copilot (or the COPILOT_HOME the
// provider names), the shared package cache in every case, and the
// endpoint the provider's env gives.
func TestCopilotSandboxNeeds(t *testing.T) {
	n := agents.CopilotRunner{}.SandboxNeeds(pilot.Provider{Runner: agents.RunnerCopilot}, "/home/u")
	if diff := cmp.Diff([]string{"/home/u/.copilot"}, n.Own); diff != "" {
		t.Errorf("own (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/home/u/.copilot", "/home/u/.cache/copilot"}, n.Write); diff != "" {
		t.Errorf("write (-want +got):\n%s", diff)
	}
	p := pilot.Provider{Runner: agents.RunnerCopilot, Env: map[string]string{
		"COPILOT_HOME": "/srv/copilot", "COPILOT_PKG_CACHE_HOME": "/srv/cache", "COPILOT_PROVIDER_BASE_URL": "http://10.0.0.5:8000/v1"}}
	n = agents.CopilotRunner{}.SandboxNeeds(p, "/home/u")
	if diff := cmp.Diff([]string{"/srv/copilot", "/srv/cache"}, n.Write); diff != "" {
		t.Errorf("write with COPILOT_HOME (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"10.0.0.5:8000"}, n.Connect); diff != "" {
		t.Errorf("connect (-want +got):\n%s", diff)
	}
	n = agents.CopilotRunner{}.SandboxNeeds(pilot.Provider{Runner: agents.RunnerCopilot, BaseURL: "http://127.0.0.1:9/v1", Model: "m"}, "/home/u")
	if len(n.Own) != 0 {
		t.Errorf("an isolated worker owns %v of HOME", n.Own)
	}
	if diff := cmp.Diff([]string{"/home/u/.cache/copilot"}, n.Write); diff != "" {
		t.Errorf("an isolated worker's writes (-want +got):\n%s", diff)
	}
}
