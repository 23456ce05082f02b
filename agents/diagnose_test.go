package agents_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

// The seed's provider line (tests/test_dispatch.py).
const seedProviderLine = "provider_tunnel_error: dial tcp 192.0.2.1:8001: connect: connection refused"

// diagnoser is agents.Classifier of the runner named rn, or of a runner
// without Diagnose (the command runner's watcher) for a name that is none
// of pilot's.
func diagnoser(tb testing.TB, rn string) func(pilot.Stream, string) (pilot.Classification, bool) {
	tb.Helper()
	r := pilot.NewCommandRunner(nil)
	for _, cand := range agents.Runners() {
		if cand.Name() == rn {
			r = cand
		}
	}
	d, err := agents.Classifier(r)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// diagnose is diagnoser(tb, rn)(s, line).
func diagnose(tb testing.TB, rn string, s pilot.Stream, line string) (pilot.Classification, bool) {
	tb.Helper()
	return diagnoser(tb, rn)(s, line)
}

type diagnoseCase struct {
	name     string
	why      string
	runner   string
	stream   pilot.Stream
	line     string
	class    pilot.FailureClass
	evidence string // "" means the line proves nothing
	note     string
}

var diagnoseCases = []diagnoseCase{
	// The seed's ReviewControlTest.test_pi_stdout_provider_words_are_not_terminal_diagnostics.
	{"PiStdoutProviderWordsAreNotTerminalDiagnostics", "pi's stdout is the model's stream", "pi", pilot.Stdout, "provider_tunnel_error: connection refused", "", "", ""},
	{"seed pi stderr provider line", "pi's stderr is its own diagnostics", "pi", pilot.Stderr, seedProviderLine, pilot.FailProviderConnection, seedProviderLine, ""},
	{"pi stderr keeps spaces", "the line is the evidence untouched", "pi", pilot.Stderr, "  Connection error.  ", pilot.FailProviderConnection, "  Connection error.  ", ""},
	{"pi message_update text", "model text on stdout is never a diagnostic",
		"pi", pilot.Stdout, `{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"provider_tunnel_error: connection refused"}}`, "", "", ""},
	{"pi message_end error", "an assistant message with stopReason error carries errorMessage",
		"pi", pilot.Stdout, `{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"Connection error.","timestamp":1}}`, pilot.FailProviderConnection, "Connection error.", ""},
	{"pi message_end error without text", "pi's text mode prints Request error then, which proves no class",
		"pi", pilot.Stdout, `{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","timestamp":1}}`, "", "", ""},
	{"pi message_end stop", "a finished message is no diagnostic",
		"pi", pilot.Stdout, `{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop"}}`, "", "", ""},
	{"pi message_end aborted", "an abort is pilot's or the user's, not an error",
		"pi", pilot.Stdout, `{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"aborted","errorMessage":"Request aborted"}}`, "", "", ""},
	{"pi turn_end error", "turn_end carries the same message",
		"pi", pilot.Stdout, `{"type":"turn_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"terminated"},"toolResults":[]}`, pilot.FailProviderStreamDisconnect, "terminated", ""},
	{"pi agent_end last assistant error", "the last assistant message decides; its status counts",
		"pi", pilot.Stdout, `{"type":"agent_end","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[],"stopReason":"error","errorMessage":"429 rate limited"}]}`, pilot.FailProviderRateLimit, "429 rate limited", ""},
	{"pi status with a body that names no provider", "the message is the model call's: its status counts",
		"pi", pilot.Stdout, `{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"500 upstream boom"}}`, pilot.FailProviderServerError, "500 upstream boom", ""},
	{"pi 1.x cause after an exact text", "pi 1.x appends the deepest cause: the cause decides",
		"pi", pilot.Stdout, `{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"Connection error.: connect ECONNREFUSED 127.0.0.1:9"}}`, pilot.FailProviderConnection, "Connection error.: connect ECONNREFUSED 127.0.0.1:9", ""},
	{"pi agent_end retried success", "an earlier error followed by a success is no diagnostic",
		"pi", pilot.Stdout, `{"type":"agent_end","messages":[{"role":"assistant","content":[],"stopReason":"error","errorMessage":"terminated"},{"role":"assistant","content":[],"stopReason":"stop"}]}`, "", "", ""},
	{"pi auto_retry_end failed", "pi's rpc docs line: the final error after retries",
		"pi", pilot.Stdout, `{"type": "auto_retry_end", "success": false, "attempt": 3, "finalError": "529 overloaded_error: Overloaded"}`, pilot.FailProviderServerError, "529 overloaded_error: Overloaded", ""},
	{"pi auto_retry_start", "pi's rpc docs line: a retry in progress",
		"pi", pilot.Stdout, `{"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 2000, "errorMessage": "529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}`, "", "", ""},
	{"pi broken JSON", "unparseable lines are no diagnostics",
		"pi", pilot.Stdout, `{"type":"message_end","message":{"role":"assistant","stopReason":"error"`, "", "", ""},
	{"pi shell Terminated", "a shell's Terminated reports a signal, not a stream drop", "pi", pilot.Stderr, "Terminated", "", "", ""},

	{"codex turn.failed", "codex's terminal error; the cause says the request never left", "codex", pilot.Stdout,
		`{"type":"turn.failed","error":{"message":"stream disconnected before completion: error sending request for url (http://127.0.0.1:8080/v1/responses)"}}`,
		pilot.FailProviderConnection, "stream disconnected before completion: error sending request for url (http://127.0.0.1:8080/v1/responses)", ""},
	{"codex top-level fatal error", "a top-level error that is no retry notice", "codex", pilot.Stdout,
		`{"type":"error","message":"unexpected status 401 Unauthorized: Missing bearer or basic authentication in header"}`,
		pilot.FailProviderAuth, "unexpected status 401 Unauthorized: Missing bearer or basic authentication in header", ""},
	{"codex top-level reconnecting", "a retry in progress", "codex", pilot.Stdout,
		`{"type":"error","message":"Reconnecting... 2/5 (request timed out)"}`, "", "", ""},
	{"codex stderr tracing", "codex's stderr counts", "codex", pilot.Stderr, "ERROR: Missing environment variable: `MOCK_API_KEY`.", pilot.FailProviderAuth, "ERROR: Missing environment variable: `MOCK_API_KEY`.", ""},
	{"codex stderr reconnecting", "a retry notice on stderr is no diagnostic either", "codex", pilot.Stderr, "ERROR: Reconnecting... 1/5 (request timed out)", "", "", ""},
	{"codex human stdout", "codex's stdout in human mode is the answer", "codex", pilot.Stdout, "Connection failed: nope", "", "", ""},

	{"claude result with status", "the result text, its status given apart", "claude", pilot.Stdout,
		`{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}","terminal_reason":"api_error"}`,
		pilot.FailProviderRateLimit, `API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, "api_error_status: 429"},
	{"claude blocking limit", "terminal_reason blocking_limit is a context limit", "claude", pilot.Stdout,
		`{"type":"result","subtype":"success","is_error":true,"result":"Conversation too long","terminal_reason":"blocking_limit"}`,
		pilot.FailContextLimit, "Conversation too long", "terminal_reason: blocking_limit"},
	{"claude errors without result", "errors[] when result is empty", "claude", pilot.Stdout,
		`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["Invalid API key · Please run /login"]}`,
		pilot.FailProviderAuth, "Invalid API key · Please run /login", ""},
	{"claude api_retry", "a retry in progress", "claude", pilot.Stdout,
		`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":600,"error_status":401,"error":"authentication_failed"}`, "", "", ""},
	{"claude stderr", "Claude's stderr counts", "claude", pilot.Stderr, `[claude-code:unrecognized_model] {"model":"x"}`, pilot.FailGeneric, `[claude-code:unrecognized_model] {"model":"x"}`, ""},

	{"opencode APIError", "the message is the evidence, the name and statusCode the note", "opencode", pilot.Stdout,
		`{"type":"error","timestamp":1780013193618,"sessionID":"ses_A","error":{"name":"APIError","data":{"message":"Too Many Requests","statusCode":429,"isRetryable":true}}}`,
		pilot.FailProviderRateLimit, "Too Many Requests", "APIError, statusCode 429"},
	{"opencode ProviderAuthError", "the name decides", "opencode", pilot.Stdout,
		`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"ProviderAuthError","data":{"providerID":"mock","message":"No credentials found"}}}`,
		pilot.FailProviderAuth, "No credentials found", "ProviderAuthError"},
	{"opencode name only", "an error with no data: the name is the evidence", "opencode", pilot.Stdout,
		`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"MessageOutputLengthError","data":{}}}`,
		pilot.FailGeneric, "MessageOutputLengthError", ""},

	{"gemini error event", "severity error counts", "gemini", pilot.Stdout,
		`{"type":"error","timestamp":"2025-10-10T12:00:00.000Z","severity":"error","message":"[API Error: You have exhausted your daily quota on this model.]"}`,
		pilot.FailProviderQuota, "[API Error: You have exhausted your daily quota on this model.]", ""},
	{"gemini result terminated", "undici's bare \"terminated\" is a stream cut short: said so in the note", "gemini", pilot.Stdout,
		`{"type":"result","timestamp":"2026-11-30T07:20:25.757Z","status":"error","error":{"type":"unknown","message":"[API Error: terminated]"}}`,
		pilot.FailProviderStreamDisconnect, "[API Error: terminated]", "model response stream terminated"},
	{"gemini result other error", "only the bare terminated message is a stream cut", "gemini", pilot.Stdout,
		`{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: terminated by the user]"}}`,
		pilot.FailGeneric, "[API Error: terminated by the user]", ""},
	{"gemini warning event", "a warning is no diagnostic", "gemini", pilot.Stdout,
		`{"type":"error","timestamp":"2025-10-10T12:00:00.000Z","severity":"warning","message":"Loop detected"}`, "", "", ""},
	{"gemini retryable quota on stderr", "gemini's name for a per-minute quota it retries", "gemini", pilot.Stderr,
		"Error when talking to Gemini API Full report available at: /tmp/r.json RetryableQuotaError: You exceeded your current quota",
		pilot.FailProviderRateLimit, "Error when talking to Gemini API Full report available at: /tmp/r.json RetryableQuotaError: You exceeded your current quota", ""},

	{"command stdout", "the command runner's stdout is the answer", "command", pilot.Stdout, seedProviderLine, "", "", ""},
	{"command stderr", "the command runner's stderr counts", "command", pilot.Stderr, seedProviderLine, pilot.FailProviderConnection, seedProviderLine, ""},
	{"unknown runner stdout JSON", "no JSON stream is known for it", "kimi", pilot.Stdout, `{"type":"turn.failed","error":{"message":"x"}}`, "", "", ""},
	{"unknown runner stderr", "stderr counts for every runner", "kimi", pilot.Stderr, seedProviderLine, pilot.FailProviderConnection, seedProviderLine, ""},
	{"unknown runner knows no CLI's exact lines", "pi's exact texts are pi's", "kimi", pilot.Stderr, "Connection error.", "", "", ""},
	{"blank stderr", "blank lines are no diagnostics", "pi", pilot.Stderr, "   ", "", "", ""},
	{"unknown stream", "only stdout and stderr exist", "pi", pilot.Stream("stdin"), "Connection error.", "", "", ""},
}

func TestDiagnose(t *testing.T) {
	for _, tc := range diagnoseCases {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := diagnose(t, tc.runner, tc.stream, tc.line)
			if ok != (tc.evidence != "") || c.Evidence != tc.evidence || ok && (c.Class != tc.class || c.Note != tc.note) {
				t.Errorf("%s Diagnose(%s, %q) = %+v, %v; want %s, evidence %q, note %q (%s)",
					tc.runner, tc.stream, tc.line, c, ok, tc.class, tc.evidence, tc.note, tc.why)
			}
		})
	}
}

// Every line of the research's example files, read as the stdout of the CLI
// that wrote it: only the error events listed here prove a class, with
// this evidence.
func TestDiagnoseFormatExamples(t *testing.T) {
	type want struct {
		evidence string
		class    pilot.FailureClass
	}
	wants := map[string]map[int]want{
		"codex-exec-json.errors.third-party.jsonl": {
			// Lines 1-2 are Reconnecting notices, line 4 a warning item.
			3: {"usage limit reached", pilot.FailProviderQuota},
		},
		"claude-stream-json.third-party-captures.jsonl": {
			4: {"API Error: Unable to connect to API (ENOTFOUND)", pilot.FailProviderConnection},
		},
		"pi-session-v1.stream-terminated-error.from-fixture-large-session-line33.jsonl": {
			1: {"terminated", pilot.FailProviderStreamDisconnect},
		},
		"pi-session-v1.from-fixture-before-compaction.jsonl": {
			2: {`400 {"type":"error","error":{"type":"invalid_request_error","message":"messages.236: ` + "`tool_use`" + ` ids were found without ` + "`tool_result`" + ` blocks immediately after: toolu_019tYDrbzifrra2KYzmYqWvk. Each ` + "`tool_use`" + ` block must have a corresponding ` + "`tool_result`" + ` block in the next message."},"request_id":"req_011CVvAQm5gLufA1cDeHobKh"}`, pilot.FailGeneric},
		},
	}
	files, err := filepath.Glob(filepath.Join("..", "testdata", "classify", "examples", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example files: %v", err)
	}
	seen := 0
	for _, file := range files {
		base := filepath.Base(file)
		runner, _, _ := strings.Cut(base, "-")
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		d := diagnoser(t, runner)
		for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			n := i + 1
			w, isDiag := wants[base][n]
			c, ok := d(pilot.Stdout, line)
			if ok != isDiag || c.Evidence != w.evidence || ok && c.Class != w.class {
				t.Errorf("%s:%d: %s Diagnose(stdout) = %s %q, %v; want %s %q, %v", base, n, runner, c.Class, c.Evidence, ok, w.class, w.evidence, isDiag)
			}
			if ok {
				seen++
			}
		}
	}
	if want := 4; seen != want {
		t.Errorf("found %d diagnostics in the examples, want %d", seen, want)
	}
}

var fuzzRunners = []string{"pi", "codex", "claude", "opencode", "gemini", "command", "unknown"}

// Diagnose never panics, proves a class only with evidence, and on stderr
// takes its evidence from the line (an opencode log line's from its
// error.error, which may be quoted); the stdout of a runner without a JSON
// stream never counts.
func FuzzDiagnose(f *testing.F) {
	for _, tc := range diagnoseCases {
		for i, r := range fuzzRunners {
			if r == tc.runner {
				f.Add(uint8(i), tc.stream == pilot.Stderr, tc.line)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "classify", "examples", "*.jsonl"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			for i := range fuzzRunners {
				f.Add(uint8(i), false, string(line))
			}
		}
	}
	ds := map[string]func(pilot.Stream, string) (pilot.Classification, bool){}
	for _, r := range fuzzRunners {
		ds[r] = diagnoser(f, r)
	}
	f.Fuzz(func(t *testing.T, runner uint8, stderr bool, line string) {
		r := fuzzRunners[int(runner)%len(fuzzRunners)]
		s := pilot.Stdout
		if stderr {
			s = pilot.Stderr
		}
		c, ok := ds[r](s, line)
		if ok != (c.Evidence != "") {
			t.Fatalf("ok %v with evidence %q", ok, c.Evidence)
		}
		if !ok {
			return
		}
		if strings.TrimSpace(c.Evidence) == "" || c.Class == "" {
			t.Fatalf("a diagnostic with blank evidence or no class: %+v", c)
		}
		switch {
		case stderr && !strings.Contains(line, c.Evidence) && !(r == "opencode" && strings.HasPrefix(line, "timestamp=")):
			t.Fatalf("stderr evidence %q is not in the line %q", c.Evidence, line)
		case !stderr && (r == "command" || r == "unknown"):
			t.Fatalf("stdout of %s is a diagnostic", r)
		}
	})
}

// BenchmarkDiagnosePiStdout is the cost of a pi stdout line that is not an
// error event (a 22 KB assistant message without stopReason error) and of
// the real 22 KB error event of the large-session fixture.
func BenchmarkDiagnosePiStdout(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "classify", "examples", "pi-session-v1.stream-terminated-error.from-fixture-large-session-line33.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	d := diagnoser(b, agents.RunnerPi)
	errLine := strings.TrimSuffix(string(data), "\n")
	okLine := strings.Replace(errLine, `"stopReason":"error"`, `"stopReason":"stop"`, 1)
	for name, line := range map[string]string{"not-an-error": okLine, "error-event": errLine} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				d(pilot.Stdout, line)
			}
		})
	}
}

// Exit codes mean something only for the CLI that documents them: gemini's.
func TestExitCodes(t *testing.T) {
	tests := []struct {
		name   string
		why    string
		runner pilot.Runner
		code   int
		want   pilot.Outcome
		class  pilot.FailureClass // "" for the fallback's (JudgeExit's)
	}{
		{"gemini 41 auth", "FatalAuthenticationError", agents.GeminiRunner{}, 41, pilot.Failed, pilot.FailProviderAuth},
		{"gemini 42 input", "gemini refused its input before working", agents.GeminiRunner{}, 42, pilot.Failed, pilot.FailSpawn},
		{"gemini 44 sandbox", "no sandbox, no work", agents.GeminiRunner{}, 44, pilot.Failed, pilot.FailSpawn},
		{"gemini 52 config", "bad configuration, no work", agents.GeminiRunner{}, 52, pilot.Failed, pilot.FailSpawn},
		{"gemini 53 turn limit", "a step cap, reported as step_capped_partial", agents.GeminiRunner{}, 53, pilot.StepCappedPartial, ""},
		{"gemini 54 tool execution", "a failed tool has no class of its own; diagnostics may say more", agents.GeminiRunner{}, 54, "", ""},
		{"gemini 55 untrusted workspace", "gemini refused the workspace, no work", agents.GeminiRunner{}, 55, pilot.Failed, pilot.FailSpawn},
		{"gemini 130 cancelled", "termination is judged elsewhere", agents.GeminiRunner{}, 130, "", ""},
		{"gemini 1 general", "carries no meaning by itself", agents.GeminiRunner{}, 1, "", ""},
		{"codex 41", "gemini's codes mean nothing for codex", agents.CodexRunner{}, 41, "", ""},
		{"claude 53", "no step-cap exit for Claude", agents.ClaudeRunner{}, 53, "", ""},
		{"pi 1", "pi exits 1 for everything", agents.PiRunner{}, 1, "", ""},
		{"opencode 41", "opencode exits 1 for everything", agents.OpencodeRunner{}, 41, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := agentCommand(t, tc.runner, agentAttempt(t, tc.runner.Name(), pilot.Provider{}, pilot.ModeReview, "", "x", ""))
			e := pilot.Exit{Runner: tc.runner.Name(), Started: true, Code: tc.code}
			got := cmd.Watcher.Finish(e)
			want := pilot.JudgeExit(e)
			if tc.want != "" {
				want = pilot.Result{Outcome: tc.want, Classification: pilot.Classification{Class: tc.class}}
			}
			if got.Outcome != want.Outcome || got.Class != want.Class {
				t.Errorf("exit %d: %s %s, want %s %s (%s)", tc.code, got.Outcome, got.Class, want.Outcome, want.Class, tc.why)
			}
		})
	}
}
