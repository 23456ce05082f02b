package agents_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

// The seed's provider line (tests/test_dispatch.py).
const seedProviderLine = "provider_tunnel_error: dial tcp 192.0.2.1:8001: connect: connection refused"

func TestClassifyExitCode(t *testing.T) {
	tests := []struct {
		name    string
		why     string
		runner  string
		code    int
		want    pilot.FailureClass
		ok      bool
		stepCap bool
	}{
		{"gemini 41 auth", "FatalAuthenticationError", "gemini", 41, pilot.FailProviderAuth, true, false},
		{"gemini 42 input", "gemini refused its input before working", "gemini", 42, pilot.FailSpawn, true, false},
		{"gemini 44 sandbox", "no sandbox, no work", "gemini", 44, pilot.FailSpawn, true, false},
		{"gemini 52 config", "bad configuration, no work", "gemini", 52, pilot.FailSpawn, true, false},
		{"gemini 53 turn limit", "a step cap, reported as step_capped_partial", "gemini", 53, "", false, true},
		{"gemini 54 tool execution", "a failed tool has no class of its own; diagnostics may say more", "gemini", 54, "", false, false},
		{"gemini 55 untrusted workspace", "gemini refused the workspace, no work", "gemini", 55, pilot.FailSpawn, true, false},
		{"gemini 130 cancelled", "termination is judged elsewhere", "gemini", 130, "", false, false},
		{"gemini 1 general", "carries no meaning by itself", "gemini", 1, "", false, false},
		{"gemini 0", "success is not a failure class", "gemini", 0, "", false, false},
		{"codex 41", "gemini's codes mean nothing for codex", "codex", 41, "", false, false},
		{"claude 53", "no step-cap exit for Claude", "claude", 53, "", false, false},
		{"pi 1", "pi exits 1 for everything", "pi", 1, "", false, false},
		{"command 143", "termination is judged elsewhere", "command", 143, "", false, false},
		{"unknown 41", "unknown runners have no meaningful codes", "nope", 41, "", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := agents.ClassifyExitCode(tc.runner, tc.code)
			if got != tc.want || ok != tc.ok {
				t.Errorf("ClassifyExitCode(%q, %d) = %q, %v; want %q, %v (%s)", tc.runner, tc.code, got, ok, tc.want, tc.ok, tc.why)
			}
			if got := agents.StepCapExit(tc.runner, tc.code); got != tc.stepCap {
				t.Errorf("StepCapExit(%q, %d) = %v, want %v (%s)", tc.runner, tc.code, got, tc.stepCap, tc.why)
			}
		})
	}
}

type diagnosticCase struct {
	name   string
	why    string
	runner string
	stream pilot.Stream
	line   string
	want   string // "" means not a diagnostic
}

var diagnosticCases = []diagnosticCase{
	// The seed's ReviewControlTest.test_pi_stdout_provider_words_are_not_terminal_diagnostics.
	{"PiStdoutProviderWordsAreNotTerminalDiagnostics", "pi's stdout is the model's stream", "pi", pilot.Stdout, "provider_tunnel_error: connection refused", ""},
	{"seed pi stderr provider line", "pi's stderr is its own diagnostics", "pi", pilot.Stderr, seedProviderLine, seedProviderLine},
	{"pi stderr keeps spaces", "the line is returned untouched", "pi", pilot.Stderr, "  Connection error.  ", "  Connection error.  "},
	{"pi message_update text", "model text on stdout is never a diagnostic",
		"pi", pilot.Stdout, `{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"provider_tunnel_error: connection refused"}}`, ""},
	{"pi message_end error", "an assistant message with stopReason error carries errorMessage",
		"pi", pilot.Stdout, `{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"Connection error.","timestamp":1}}`, "Connection error."},
	{"pi message_end error without text", "pi's text mode prints Request error then",
		"pi", pilot.Stdout, `{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","timestamp":1}}`, "Request error"},
	{"pi message_end stop", "a finished message is no diagnostic",
		"pi", pilot.Stdout, `{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop"}}`, ""},
	{"pi message_end aborted", "an abort is pilot's or the user's, not an error",
		"pi", pilot.Stdout, `{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"aborted","errorMessage":"Request aborted"}}`, ""},
	{"pi turn_end error", "turn_end carries the same message",
		"pi", pilot.Stdout, `{"type":"turn_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"terminated"},"toolResults":[]}`, "terminated"},
	{"pi agent_end last assistant error", "the last assistant message decides",
		"pi", pilot.Stdout, `{"type":"agent_end","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[],"stopReason":"error","errorMessage":"429 rate limited"}]}`, "429 rate limited"},
	{"pi agent_end retried success", "an earlier error followed by a success is no diagnostic",
		"pi", pilot.Stdout, `{"type":"agent_end","messages":[{"role":"assistant","content":[],"stopReason":"error","errorMessage":"terminated"},{"role":"assistant","content":[],"stopReason":"stop"}]}`, ""},
	{"pi auto_retry_end failed", "pi's rpc docs line: the final error after retries",
		"pi", pilot.Stdout, `{"type": "auto_retry_end", "success": false, "attempt": 3, "finalError": "529 overloaded_error: Overloaded"}`, "529 overloaded_error: Overloaded"},
	{"pi auto_retry_start", "pi's rpc docs line: a retry in progress",
		"pi", pilot.Stdout, `{"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 2000, "errorMessage": "529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}`, ""},
	{"pi broken JSON", "unparseable lines are no diagnostics",
		"pi", pilot.Stdout, `{"type":"message_end","message":{"role":"assistant","stopReason":"error"`, ""},

	{"codex turn.failed", "codex's terminal error", "codex", pilot.Stdout,
		`{"type":"turn.failed","error":{"message":"stream disconnected before completion: error sending request for url (http://127.0.0.1:8080/v1/responses)"}}`,
		"stream disconnected before completion: error sending request for url (http://127.0.0.1:8080/v1/responses)"},
	{"codex top-level fatal error", "a top-level error that is no retry notice", "codex", pilot.Stdout,
		`{"type":"error","message":"unexpected status 401 Unauthorized: Missing bearer or basic authentication in header"}`,
		"unexpected status 401 Unauthorized: Missing bearer or basic authentication in header"},
	{"codex stderr tracing", "codex's stderr counts", "codex", pilot.Stderr, "ERROR: Missing environment variable: `MOCK_API_KEY`.", "ERROR: Missing environment variable: `MOCK_API_KEY`."},
	{"codex stderr reconnecting", "a retry notice on stderr is no diagnostic either", "codex", pilot.Stderr, "ERROR: Reconnecting... 1/5 (request timed out)", ""},
	{"codex human stdout", "codex's stdout in human mode is the answer", "codex", pilot.Stdout, "Connection failed: nope", ""},

	{"claude result with status", "result text plus the status", "claude", pilot.Stdout,
		`{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}","terminal_reason":"api_error"}`,
		`API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"slow down"}} (api_error_status: 429)`},
	{"claude blocking limit", "terminal_reason that says more than api_error is kept", "claude", pilot.Stdout,
		`{"type":"result","subtype":"success","is_error":true,"result":"Prompt is too long","terminal_reason":"blocking_limit"}`,
		"Prompt is too long (terminal_reason: blocking_limit)"},
	{"claude errors without result", "errors[] when result is empty", "claude", pilot.Stdout,
		`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["Invalid API key · Please run /login"]}`,
		"Invalid API key · Please run /login"},
	{"claude api_retry", "a retry in progress", "claude", pilot.Stdout,
		`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":600,"error_status":401,"error":"authentication_failed"}`, ""},
	{"claude stderr", "Claude's stderr counts", "claude", pilot.Stderr, `[claude-code:unrecognized_model] {"model":"x"}`, `[claude-code:unrecognized_model] {"model":"x"}`},

	{"opencode APIError", "name, message and statusCode", "opencode", pilot.Stdout,
		`{"type":"error","timestamp":1780013193618,"sessionID":"ses_A","error":{"name":"APIError","data":{"message":"Too Many Requests","statusCode":429,"isRetryable":true}}}`,
		"APIError: Too Many Requests (statusCode: 429)"},
	{"opencode ProviderAuthError", "name and message", "opencode", pilot.Stdout,
		`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"ProviderAuthError","data":{"providerID":"mock","message":"No credentials found"}}}`,
		"ProviderAuthError: No credentials found"},
	{"opencode name only", "an error with no data", "opencode", pilot.Stdout,
		`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"MessageOutputLengthError","data":{}}}`,
		"MessageOutputLengthError"},

	{"gemini error event", "severity error counts", "gemini", pilot.Stdout,
		`{"type":"error","timestamp":"2025-10-10T12:00:00.000Z","severity":"error","message":"[API Error: You have exhausted your daily quota on this model.]"}`,
		"[API Error: You have exhausted your daily quota on this model.]"},
	{"gemini result terminated", "undici's bare \"terminated\" is a stream cut short: said so", "gemini", pilot.Stdout,
		`{"type":"result","timestamp":"2026-11-30T07:20:25.757Z","status":"error","error":{"type":"unknown","message":"[API Error: terminated]"}}`,
		"unknown: [API Error: terminated] (model response stream terminated)"},
	{"gemini result other error", "only the bare terminated message gets the note", "gemini", pilot.Stdout,
		`{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: terminated by the user]"}}`,
		"unknown: [API Error: terminated by the user]"},
	{"gemini warning event", "a warning is no diagnostic", "gemini", pilot.Stdout,
		`{"type":"error","timestamp":"2025-10-10T12:00:00.000Z","severity":"warning","message":"Loop detected"}`, ""},

	{"command stdout", "the command runner's stdout is the answer", "command", pilot.Stdout, seedProviderLine, ""},
	{"command stderr", "the command runner's stderr counts", "command", pilot.Stderr, seedProviderLine, seedProviderLine},
	{"unknown runner stdout JSON", "no JSON stream is known for it", "kimi", pilot.Stdout, `{"type":"turn.failed","error":{"message":"x"}}`, ""},
	{"unknown runner stderr", "stderr counts for every runner", "kimi", pilot.Stderr, "Connection error.", "Connection error."},
	{"blank stderr", "blank lines are no diagnostics", "pi", pilot.Stderr, "   ", ""},
	{"unknown stream", "only stdout and stderr exist", "pi", pilot.Stream("stdin"), "Connection error.", ""},
}

func TestExtractDiagnostic(t *testing.T) {
	for _, tc := range diagnosticCases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := agents.ExtractDiagnostic(tc.runner, tc.stream, tc.line)
			if ok != (tc.want != "") || got != tc.want {
				t.Errorf("ExtractDiagnostic(%q, %s, %q) = %q, %v; want %q (%s)", tc.runner, tc.stream, tc.line, got, ok, tc.want, tc.why)
			}
			if td := agents.TerminalDiagnostic(tc.runner, tc.stream, tc.line); td != ok {
				t.Errorf("TerminalDiagnostic = %v, ExtractDiagnostic ok = %v", td, ok)
			}
		})
	}
}

// Every line of the research's example files, read as the stdout of the CLI
// that wrote it: only the error events listed here are diagnostics, with
// this text, and they classify as given.
func TestExtractDiagnosticFormatExamples(t *testing.T) {
	type want struct {
		text  string
		class pilot.FailureClass
	}
	wants := map[string]map[int]want{
		"codex-exec-json.errors.third-party.jsonl": {
			// Lines 1-2 are Reconnecting notices, line 4 a warning item.
			3: {"usage limit reached", pilot.FailProviderQuota},
		},
		"claude-stream-json.third-party-captures.jsonl": {
			4: {"API Error: Unable to connect to API (ENOTFOUND)", pilot.FailProviderConnection},
		},
		"gemini-stream-json.serialized-from-stream-json-formatter.test.ts.jsonl": {
			5: {"MaxSessionTurnsError: Maximum session turns exceeded", pilot.FailGeneric},
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
		for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			n := i + 1
			w, isDiag := wants[base][n]
			got, ok := agents.ExtractDiagnostic(runner, pilot.Stdout, line)
			if ok != isDiag || got != w.text {
				t.Errorf("%s:%d: ExtractDiagnostic(%s, stdout) = %q, %v; want %q, %v", base, n, runner, got, ok, w.text, isDiag)
				continue
			}
			if !ok {
				continue
			}
			seen++
			if c := pilot.ClassifyFailure(got); c.Class != w.class {
				t.Errorf("%s:%d: ClassifyFailure(%q).Class = %s, want %s", base, n, got, c.Class, w.class)
			}
		}
	}
	if want := 5; seen != want {
		t.Errorf("found %d diagnostics in the examples, want %d", seen, want)
	}
}

var fuzzRunners = []string{"pi", "codex", "claude", "opencode", "gemini", "command", "unknown"}

func FuzzExtractDiagnostic(f *testing.F) {
	for _, tc := range diagnosticCases {
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
	f.Fuzz(func(t *testing.T, runner uint8, stderr bool, line string) {
		r := fuzzRunners[int(runner)%len(fuzzRunners)]
		s := pilot.Stdout
		if stderr {
			s = pilot.Stderr
		}
		text, ok := agents.ExtractDiagnostic(r, s, line)
		if ok != agents.TerminalDiagnostic(r, s, line) {
			t.Fatal("TerminalDiagnostic disagrees with ExtractDiagnostic")
		}
		if !ok {
			if text != "" {
				t.Fatalf("not a diagnostic but text %q", text)
			}
			return
		}
		if strings.TrimSpace(text) == "" {
			t.Fatal("a diagnostic with blank text")
		}
		switch {
		case stderr && text != line && !(r == "opencode" && strings.HasPrefix(line, "timestamp=")):
			// opencode's log lines are diagnostics by their error
			// field only (see TestOpencodeLogDiagnosticClasses).
			t.Fatalf("stderr text %q differs from the line %q", text, line)
		case !stderr && (r == "command" || r == "unknown"):
			t.Fatalf("stdout of %s is a diagnostic", r)
		}
		_ = pilot.ClassifyFailure(text)
	})
}

func ExampleExtractDiagnostic() {
	line := `{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 429 Too Many Requests"}}`
	text, ok := agents.ExtractDiagnostic("codex", pilot.Stdout, line)
	fmt.Println(text, ok)
	fmt.Println(pilot.ClassifyFailure(text).Class)

	_, ok = agents.ExtractDiagnostic("codex", pilot.Stdout, `{"type":"error","message":"Reconnecting... 2/5 (request timed out)"}`)
	fmt.Println(ok)
	// Output:
	// exceeded retry limit, last status: 429 Too Many Requests true
	// provider-rate-limit
	// false
}

// BenchmarkExtractDiagnosticPiStdout is the cost of a pi stdout line that is
// not an error event (a 22 KB assistant message without stopReason error)
// and of the real 22 KB error event of the large-session fixture.
func BenchmarkExtractDiagnosticPiStdout(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "classify", "examples", "pi-session-v1.stream-terminated-error.from-fixture-large-session-line33.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	errLine := strings.TrimSuffix(string(data), "\n")
	okLine := strings.Replace(errLine, `"stopReason":"error"`, `"stopReason":"stop"`, 1)
	for name, line := range map[string]string{"not-an-error": okLine, "error-event": errLine} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				agents.ExtractDiagnostic("pi", pilot.Stdout, line)
			}
		})
	}
}
