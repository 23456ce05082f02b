package agents_test

import (
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

// TestClaudeDiagnostic covers Claude Code's error events: the class they
// prove, the evidence (Claude's words) and the note.
func TestClaudeDiagnostic(t *testing.T) {
	tests := []struct {
		name     string
		line     string
		evidence string // "" when the line proves nothing
		class    pilot.FailureClass
		note     string
	}{
		{"synthetic auth message with an env key",
			`{"type":"assistant","message":{"content":[{"type":"text","text":"Invalid API key · Fix external API key"}],"model":"<synthetic>"},"session_id":"test-session","error":"authentication_failed"}`,
			"Invalid API key · Fix external API key", pilot.FailProviderAuth, "api error category: authentication_failed"},
		{"a refused connection keeps its class, not the coarse server_error category (seen from Claude Code 2.1.332 against a closed port)",
			`{"type":"assistant","message":{"content":[{"type":"text","text":"API Error: Connection refused (ECONNREFUSED)"}],"model":"<synthetic>"},"error":"server_error"}`,
			"API Error: Connection refused (ECONNREFUSED)", pilot.FailProviderConnection, ""},
		{"a stream lost mid-response is a stream disconnect (seen from Claude Code 2.1.332)",
			`{"type":"assistant","message":{"content":[{"type":"text","text":"API Error: Connection to the API was lost (ECONNRESET)"}],"model":"<synthetic>"},"error":"server_error"}`,
			"API Error: Connection to the API was lost (ECONNRESET)", pilot.FailProviderStreamDisconnect, ""},
		{"synthetic rate limit message",
			`{"type":"assistant","message":{"content":[{"type":"text","text":"Rate limit exceeded"}],"model":"<synthetic>"},"error":"rate_limit"}`,
			"Rate limit exceeded", pilot.FailProviderRateLimit, "api error category: rate_limit"},
		{"synthetic server error with the API's text",
			`{"type":"assistant","message":{"content":[{"type":"text","text":"API Error: 500 {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"}}"}],"model":"<synthetic>"},"error":"unknown"}`,
			`API Error: 500 {"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, pilot.FailProviderServerError, ""},
		{"synthetic billing error",
			`{"type":"assistant","message":{"content":[{"type":"text","text":"Credit balance is too low"}],"model":"<synthetic>"},"error":"billing_error"}`,
			"Credit balance is too low", pilot.FailProviderQuota, ""},
		{"an error category without text",
			`{"type":"assistant","message":{"content":[]},"error":"server_error"}`,
			"server_error", pilot.FailProviderServerError, "api error category: server_error"},
		{"the model's own message is no diagnostic",
			`{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"API Error: 401 Invalid API key · Please run /login"}]},"session_id":"s"}`,
			"", "", ""},
		{"an error field that is not a category",
			`{"type":"assistant","message":{"content":[{"type":"text","text":"x"}]},"error":{"code":1}}`,
			"", "", ""},
		{"a tool result that mentions errors",
			`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"\"error\": connection refused","is_error":true}]}}`,
			"", "", ""},
		{"result with /login",
			`{"type":"result","subtype":"success","is_error":true,"result":"Invalid API key · Please run /login","api_error_status":401,"terminal_reason":"api_error"}`,
			"Invalid API key · Please run /login", pilot.FailProviderAuth, "api_error_status: 401"},
		{"result with only a status",
			`{"type":"result","subtype":"success","is_error":true,"api_error_status":529,"session_id":"session_overload"}`,
			"success", pilot.FailProviderServerError, "api_error_status: 529"},
		{"result that succeeded",
			`{"type":"result","subtype":"success","is_error":false,"result":"API Error: 429 is what I would print"}`,
			"", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := diagnose(t, agents.RunnerClaude, pilot.Stdout, tc.line)
			if ok != (tc.evidence != "") || c.Evidence != tc.evidence || ok && (c.Class != tc.class || c.Note != tc.note) {
				t.Errorf("Diagnose = %+v, %v; want %s, evidence %q, note %q", c, ok, tc.class, tc.evidence, tc.note)
			}
		})
	}
}
