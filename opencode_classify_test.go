package pilot_test

import (
	"testing"

	"github.com/pilotworkers/pilot"
)

// opencode's error events, as whole stdout lines, through ExtractDiagnostic
// and ClassifyFailure, as the Dispatcher reads them.
func TestOpencodeDiagnosticClasses(t *testing.T) {
	tests := []struct {
		name, why string
		line      string
		text      string // ExtractDiagnostic's text; "" means no diagnostic
		class     pilot.FailureClass
		evidence  bool
	}{
		{"ProviderAuthError", "opencode's auth error name is provider-auth",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"ProviderAuthError","data":{"providerID":"zai-coding-plan","message":"No API key found for provider zai-coding-plan"}}}`,
			"ProviderAuthError: No API key found for provider zai-coding-plan", pilot.FailProviderAuth, true},
		{"ContextOverflowError", "opencode's overflow error name is context-limit",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"ContextOverflowError","data":{"message":"This model's maximum context length is 131072 tokens."}}}`,
			"ContextOverflowError: This model's maximum context length is 131072 tokens.", pilot.FailContextLimit, true},
		{"APIError 401", "the status decides",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"APIError","data":{"message":"Unauthorized","statusCode":401,"isRetryable":false}}}`,
			"APIError: Unauthorized (statusCode: 401)", pilot.FailProviderAuth, true},
		{"APIError 429", "a non-retried 429",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"APIError","data":{"message":"Too Many Requests","statusCode":429,"isRetryable":false}}}`,
			"APIError: Too Many Requests (statusCode: 429)", pilot.FailProviderRateLimit, true},
		{"APIError cannot connect", "the AI SDK's fetch failure in newer builds",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"APIError","data":{"message":"Cannot connect to API: Unable to connect. Is the computer able to access the url?","isRetryable":true}}}`,
			"APIError: Cannot connect to API: Unable to connect. Is the computer able to access the url?", pilot.FailProviderConnection, true},
		{"APIError connection reset", "message-v2 fromError's ECONNRESET",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"APIError","data":{"message":"Connection reset by server","isRetryable":true,"metadata":{"code":"ECONNRESET"}}}}`,
			"APIError: Connection reset by server", pilot.FailProviderConnection, true},
		{"UnknownError Bun connect", "Bun's fetch failure as older builds report it (anomalyco/opencode#5485, #7278)",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"UnknownError","data":{"message":"Error: Unable to connect. Is the computer able to access the url?"}}}`,
			"UnknownError: Error: Unable to connect. Is the computer able to access the url? (provider request)", pilot.FailProviderConnection, true},
		{"UnknownError other", "any other unknown error proves nothing",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"UnknownError","data":{"message":"default agent \"x\" not found"}}}`,
			`UnknownError: default agent "x" not found`, pilot.FailGeneric, false},
		{"MessageOutputLengthError", "the output cap has no narrower class",
			`{"type":"error","timestamp":1,"sessionID":"ses_A","error":{"name":"MessageOutputLengthError","data":{}}}`,
			"MessageOutputLengthError", pilot.FailGeneric, true},
		{"step_finish", "a finished step is no diagnostic",
			`{"type":"step_finish","timestamp":1,"sessionID":"ses_A","part":{"type":"step-finish","reason":"stop","cost":0,"tokens":{"input":1,"output":1,"reasoning":0,"cache":{"read":0,"write":0}}}}`,
			"", "", false},
		{"text naming an error", "the model's text is never a diagnostic",
			`{"type":"text","timestamp":1,"sessionID":"ses_A","part":{"type":"text","text":"ProviderAuthError: Unable to connect. Is the computer able to access the url?"}}`,
			"", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text, ok := pilot.ExtractDiagnostic(pilot.RunnerOpencode, pilot.Stdout, tc.line)
			if ok != (tc.text != "") || text != tc.text {
				t.Fatalf("ExtractDiagnostic = %q, %v; want %q (%s)", text, ok, tc.text, tc.why)
			}
			if !ok {
				return
			}
			c := pilot.ClassifyFailure(text)
			if c.Class != tc.class || (c.Evidence != "") != tc.evidence {
				t.Errorf("ClassifyFailure(%q) = %s, evidence %q; want %s, evidence %v (%s)", text, c.Class, c.Evidence, tc.class, tc.evidence, tc.why)
			}
		})
	}
}
