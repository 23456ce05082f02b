package agents_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

// opencode's error events, as whole stdout lines, through the watcher's
// Diagnose, as the Dispatcher reads them.
func TestOpencodeDiagnosticClasses(t *testing.T) {
	tests := []struct {
		name, why string
		line      string
		evidence  string // the CLI's words; "" means the line proves nothing
		class     pilot.FailureClass
		note      string
	}{
		{"ProviderAuthError", "opencode's auth error name is provider-auth",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"ProviderAuthError","data":{"providerID":"zai-coding-plan","message":"No API key found for provider zai-coding-plan"}}}`,
			"No API key found for provider zai-coding-plan", pilot.FailProviderAuth, "ProviderAuthError"},
		{"ContextOverflowError", "opencode's overflow error name is context-limit",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"ContextOverflowError","data":{"message":"This model's maximum context length is 131072 tokens."}}}`,
			"This model's maximum context length is 131072 tokens.", pilot.FailContextLimit, "ContextOverflowError"},
		{"APIError 401", "the status decides",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"APIError","data":{"message":"Unauthorized","statusCode":401,"isRetryable":false}}}`,
			"Unauthorized", pilot.FailProviderAuth, "APIError, statusCode 401"},
		{"APIError 429", "a non-retried 429",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"APIError","data":{"message":"Too Many Requests","statusCode":429,"isRetryable":false}}}`,
			"Too Many Requests", pilot.FailProviderRateLimit, "APIError, statusCode 429"},
		{"APIError cannot connect", "the AI SDK's fetch failure in newer builds",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"APIError","data":{"message":"Cannot connect to API: Unable to connect. Is the computer able to access the url?","isRetryable":true}}}`,
			"Cannot connect to API: Unable to connect. Is the computer able to access the url?", pilot.FailProviderConnection, "APIError"},
		{"APIError connection reset", "message-v2 fromError's ECONNRESET: a failed fetch is the AI SDK's \"Cannot connect to API\", so this is the response stream reset after it began (seen against fakellm's Dropped step)",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"APIError","data":{"message":"Connection reset by server","isRetryable":true,"metadata":{"code":"ECONNRESET"}}}}`,
			"Connection reset by server", pilot.FailProviderStreamDisconnect, "provider stream closed"},
		{"UnknownError Bun connect", "Bun's fetch failure as older builds report it (anomalyco/opencode#5485, #7278)",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"UnknownError","data":{"message":"Error: Unable to connect. Is the computer able to access the url?"}}}`,
			"Error: Unable to connect. Is the computer able to access the url?", pilot.FailProviderConnection, "provider request"},
		{"UnknownError other", "any other unknown error proves nothing",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"UnknownError","data":{"message":"default agent \"x\" not found"}}}`,
			"", "", ""},
		{"MessageOutputLengthError", "the output cap has no narrower class",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"MessageOutputLengthError","data":{}}}`,
			"MessageOutputLengthError", pilot.FailGeneric, ""},
		{"step_finish", "a finished step is no diagnostic",
			`{"type":"step_finish","timestamp":1,"sessionID":"ses_A","part":{"type":"step-finish","reason":"stop","cost":0,"tokens":{"input":1,"output":1,"reasoning":0,"cache":{"read":0,"write":0}}}}`,
			"", "", ""},
		{"text naming an error", "the model's text is never a diagnostic",
			`{"type":"text","timestamp":1,"sessionID":"ses_A","part":{"type":"text","text":"ProviderAuthError: Unable to connect. Is the computer able to access the url?"}}`,
			"", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkOpencodeDiagnostic(t, pilot.Stdout, tc.line, tc.evidence, tc.class, tc.note, tc.why)
		})
	}
}

// opencode's log lines on stderr (--print-logs), from runs of opencode
// 1.18.33 against internal/fakellm (2026-11-30): only the model call's
// "stream error" is a diagnostic, worded like the error event; every other
// log line is not, whatever it quotes.
func TestOpencodeLogDiagnosticClasses(t *testing.T) {
	const head = `timestamp=2026-11-30T07:16:14.724Z level=ERROR run=e532bdfa message="stream error" providerID=pilot modelID=fake-model session.id=ses_A small=false agent=build mode=primary error.error=`
	tests := []struct {
		name, why string
		line      string
		evidence  string
		class     pilot.FailureClass
		note      string
	}{
		{"refused", "Bun's connect failure, as the AI SDK wraps it",
			head + `"AI_APICallError: Cannot connect to API: Unable to connect. Is the computer able to access the url? (cause: Error: Unable to connect. Is the computer able to access the url?)"`,
			"AI_APICallError: Cannot connect to API: Unable to connect. Is the computer able to access the url? (cause: Error: Unable to connect. Is the computer able to access the url?)",
			pilot.FailProviderConnection, "APICallError"},
		{"dropped", "Bun's closed socket: the endpoint had answered (fakellm's Dropped)",
			head + "\"AI_APICallError: Cannot connect to API: The socket connection was closed unexpectedly. For more information, pass `verbose: true` in the second argument to fetch() (cause: Error: The socket connection was closed unexpectedly.)\"",
			"AI_APICallError: Cannot connect to API: The socket connection was closed unexpectedly. For more information, pass `verbose: true` in the second argument to fetch() (cause: Error: The socket connection was closed unexpectedly.)",
			pilot.FailProviderStreamDisconnect, "provider stream closed"},
		{"500 with an uninformative body", "the log has no status: an API error, no narrower class",
			head + `"AI_APICallError: fakellm: boom"`, "AI_APICallError: fakellm: boom", pilot.FailGeneric, "APICallError"},
		{"429", "the provider's own words",
			head + `"AI_APICallError: Rate limit exceeded, retry after 1s"`, "AI_APICallError: Rate limit exceeded, retry after 1s", pilot.FailProviderRateLimit, "APICallError"},
		{"title request", "the small model's side request is not the task's",
			`timestamp=2026-11-30T07:16:15.609Z level=ERROR run=e532bdfa message="stream error" providerID=pilot modelID=fake-model session.id=ses_A small=true agent=title mode=primary error.error="AI_RetryError: Failed after 3 attempts. Last error: Cannot connect to API: Unable to connect. Is the computer able to access the url?"`,
			"", "", ""},
		{"halt", "the run's end is the error event's to tell, with its status",
			`timestamp=2026-11-30T07:17:21.431Z level=ERROR run=ccd5097b message=process session.id=ses_A messageID=msg_1 error="fakellm: boom" stack="AI_APICallError: fakellm: boom\n    at <anonymous>"`,
			"", "", ""},
		{"plugin install", "opencode's own npm chatter",
			`timestamp=2026-11-30T07:17:15.492Z level=WARN run=ccd5097b message="background dependency install failed" dir=/x/cfg/opencode error="Cause([Fail(NpmInstallFailedError (cause: FetchError: request to http://127.0.0.1:9/@opencode-ai%2fplugin failed, reason: ECONNREFUSED))])"`,
			"", "", ""},
		{"a tool's input", "a bash command quoting a provider error is the model's text",
			`timestamp=2026-11-30T07:14:59.659Z level=INFO run=55c1683d message=evaluated permission=bash pattern="echo \"API Error: 401 Unauthorized\"" action.permission=* action.action=allow action.pattern=*`,
			"", "", ""},
		{"INFO stream", "a model call going out",
			`timestamp=2026-11-30T07:14:58.997Z level=INFO run=55c1683d message=stream providerID=pilot modelID=fake-model session.id=ses_A small=false agent=build mode=primary`,
			"", "", ""},
		{"not a log line", "opencode's own prints on stderr stay diagnostics",
			"Error: Unable to connect. Is the computer able to access the url? API error",
			"Error: Unable to connect. Is the computer able to access the url? API error", pilot.FailProviderConnection, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkOpencodeDiagnostic(t, pilot.Stderr, tc.line, tc.evidence, tc.class, tc.note, tc.why)
		})
	}
}

func checkOpencodeDiagnostic(t *testing.T, stream pilot.Stream, line, evidence string, class pilot.FailureClass, note, why string) {
	t.Helper()
	c, ok := diagnose(t, agents.RunnerOpencode, stream, line)
	if ok != (evidence != "") || c.Evidence != evidence || ok && (c.Class != class || c.Note != note) {
		t.Errorf("Diagnose = %+v, %v; want %s, evidence %q, note %q (%s)", c, ok, class, evidence, note, why)
	}
}

// An opencode log line is a diagnostic only as the model call's stream
// error, and no value quoted in a log line (a tool's input, written by the
// model) can make one, nor start a tool-running phase.
func FuzzOpencodeLogLine(f *testing.F) {
	for _, l := range []string{ocLogCreated, ocLogTitle, ocLogStream, ocLogEvaluated, ocLogDenied, ocLogStreamError, ocLogTitleError, ocLogHalt} {
		f.Add(l)
	}
	f.Add(`" level=ERROR message="stream error" error.error="AI_APICallError: 401 Unauthorized" action.action=allow`)
	f.Add(`\" action.action=allow \"`)
	f.Add("timestamp= level=\"")
	d := diagnoser(f, agents.RunnerOpencode)
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := d(pilot.Stderr, s)
		if ok && strings.HasPrefix(s, "timestamp=") && strings.Contains(s, " level=") && !strings.Contains(s, "stream error") {
			t.Fatalf("log line %q gave diagnostic %+v", s, c)
		}
		quoted, err := json.Marshal(s)
		if err != nil {
			return
		}
		line := "timestamp=2026-11-30T07:14:59.659Z level=INFO run=r message=evaluated permission=bash action.action=deny pattern=" + string(quoted)
		if c, ok := d(pilot.Stderr, line); ok {
			t.Fatalf("a quoted value made %q a diagnostic: %+v", line, c)
		}
		w := opencodeWatcher(t)
		feedLines(w, ocErr(ocLogStream), ocErr(line))
		if st, _, _ := w.StreamState(); st.Phase != pilot.PhaseAwaitingModel {
			t.Fatalf("a quoted value in %q made the phase %s", line, st.Phase)
		}
	})
}
