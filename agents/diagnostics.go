package agents

import (
	"regexp"
	"strings"

	"github.com/pilotworkers/pilot"
)

// ClassifyExitCode maps the exit codes that mean something by themselves for
// a runner to a failure class. ok is false for every other code: the run is
// then judged by its output (its terminal diagnostics), or is generic-error.
// Only gemini-cli documents such codes (see GeminiRunner); codex, Claude
// Code, pi and opencode exit 1 for every failure, and 143, 137, 130 and
// other 128+N codes are terminations for every runner: none of them is
// classified here.
func ClassifyExitCode(runner string, code int) (pilot.FailureClass, bool) {
	if runner != RunnerGemini {
		return "", false
	}
	return geminiExitClass(code)
}

// StepCapExit reports whether code is the runner's exit for stopping at its
// own turn or step limit, which the Dispatcher reports as
// step_capped_partial rather than a failure: gemini-cli's 53 (turn limit,
// MaxSessionTurnsError). Claude Code reports its limit in the result event
// (subtype error_max_turns), not in the exit code.
func StepCapExit(runner string, code int) bool {
	return runner == RunnerGemini && code == geminiTurnLimitExit
}

// TerminalDiagnostic reports whether a line from runner's stream counts as
// evidence of how the run ended at all, that is whether [ExtractDiagnostic]
// returns text for it.
func TerminalDiagnostic(runner string, stream pilot.Stream, line string) bool {
	_, ok := ExtractDiagnostic(runner, stream, line)
	return ok
}

// ExtractDiagnostic returns the text of a worker's output line that should
// be classified with [pilot.ClassifyFailure], and whether the line is a
// diagnostic at all.
//
// A stderr line is its own text for every runner: stderr is where the CLIs
// (and arbitrary commands) report their own trouble. stdout lines count only
// as the error events of a known runner's JSON stream, and then the text is
// the error prose the event carries:
//
//   - pi: message_end, turn_end, a session file's message entry, or the last
//     message of agent_end, when it is an assistant message with stopReason
//     "error": its errorMessage ("Request error" when empty, as pi's text
//     mode prints; " (provider error)" added to a "<status> <body>" that
//     proves nothing alone); auto_retry_end with success false: its finalError.
//     Anything else pi prints on stdout is the model's event stream, and a
//     model may write "provider_tunnel_error: connection refused" as text.
//   - codex (exec --json): turn.failed: error.message; a top-level error:
//     its message, but not "Reconnecting... N/M" notices, which are retries
//     in progress. Error items (item.completed, type error) are warnings.
//   - claude (stream-json): result with is_error: its result text (or its
//     errors), then " (api_error_status: N)" when the status is set and
//     " (terminal_reason: R)" when R says more than api_error or completed;
//     an assistant message with an error category (the synthetic message
//     carrying an API error): its text, and " (api error: <category>)"
//     when the text alone proves no class.
//   - opencode (run --format json): error: "<error.name>: <data.message>",
//     then " (statusCode: N)" when set, and " [pilot: provider request]" for an
//     UnknownError that is Bun's fetch failing to connect ("Unable to
//     connect. Is the computer able to access the url?"): opencode reports
//     the model request's connection failure that way, without a provider
//     name, and the classifier needs one. " [pilot: provider stream closed]" is
//     added to an error carrying Bun's "The socket connection was closed
//     unexpectedly" (which the AI SDK still words "Cannot connect to API")
//     and to opencode's "Connection reset by server": the provider closed or
//     reset a connection it had accepted (see opencodeErrorText). On stderr, opencode's own log lines
//     (--print-logs: "timestamp=… level=… message=…") are diagnostics only
//     when they are the model call's "stream error" (level ERROR, not the
//     small model's side request): its error.error, worded like the error
//     event ("AI_APICallError: m" becomes "APICallError: m"). Its other log
//     lines never count: they quote the model's tool input (a bash
//     command's text) and opencode's own chatter.
//   - gemini (stream-json): result with status error:
//     "<error.type>: <error.message>", then " (model response stream
//     terminated)" when the message is "[API Error: terminated]" (undici's
//     word for a response body cut short, which alone proves no class);
//     error with severity error: message.
//
// Unknown runners and "command" have no JSON stream: their stdout never
// counts. Blank lines and retry notices never count.
func ExtractDiagnostic(runner string, stream pilot.Stream, line string) (text string, ok bool) {
	if runner == RunnerOpencode && stream == pilot.Stderr {
		if l, isLog := parseOpencodeLog(line); isLog {
			return opencodeLogDiagnostic(l)
		}
	}
	if stream == pilot.Stderr {
		if strings.TrimSpace(line) == "" || retryNotice(line) {
			return "", false
		}
		return line, true
	}
	if stream != pilot.Stdout {
		return "", false
	}
	t := strings.TrimSpace(line)
	if !strings.HasPrefix(t, "{") {
		return "", false
	}
	if typ, ok := leadingType(t); ok && !diagnosticType(runner, typ) {
		// The CLI's event says what it is in its first bytes, and it is
		// not one that reports an error: the line is not searched.
		return "", false
	}
	switch runner {
	case "pi":
		text, ok = piDiagnostic(t)
	case "codex":
		text, ok = codexDiagnostic(t)
	case "claude":
		text, ok = claudeDiagnostic(t)
	case "opencode":
		text, ok = opencodeDiagnostic(t)
	case "gemini":
		text, ok = geminiDiagnostic(t)
	}
	if !ok || strings.TrimSpace(text) == "" {
		return "", false
	}
	return text, true
}

// reRetryNotice matches the CLIs' notices of a model call they retry
// (codex's "Reconnecting... 2/5", Claude Code's api_retry, pi's
// auto_retry_start, gemini-cli's "Retrying with backoff..." and "Retrying
// after 5000ms..."): retries in progress, never a diagnostic.
var reRetryNotice = regexp.MustCompile(`(?i)reconnecting\.\.\.\s*(?:\d+\s*/\s*\d+|waiting for network)|"subtype"\s*:\s*"api_retry"|"type"\s*:\s*"auto_retry_start"|\bretrying in\b|\bretrying with backoff\b|\bretrying after \d+\s*ms\b`)

func retryNotice(line string) bool { return reRetryNotice.MatchString(line) }

// maxLeadingType is the longest event type leadingType reads.
const maxLeadingType = 64

// leadingType returns the event type of a line that starts the way the
// CLIs write their events, {"type":"…", without reading the rest. The type
// aliases the line.
func leadingType[T ~string | ~[]byte](line T) (T, bool) {
	const prefix = `{"type":"`
	if len(line) < len(prefix) || string(line[:len(prefix)]) != prefix {
		return line[:0], false
	}
	rest := line[len(prefix):]
	for i := 0; i < len(rest) && i <= maxLeadingType; i++ {
		switch rest[i] {
		case '"':
			return rest[:i], true
		case '\\':
			return line[:0], false
		}
	}
	return line[:0], false
}

// diagnosticType reports whether an event of type typ may carry one of
// runner's diagnostics: false only for types known not to (the frequent
// ones).
func diagnosticType(runner, typ string) bool {
	switch runner {
	case RunnerCodex:
		return typ == "turn.failed" || typ == "error"
	case RunnerGemini:
		return typ == "result" || typ == "error"
	case RunnerOpencode:
		return typ == "error"
	case RunnerClaude:
		return typ == "result" || typ == "assistant"
	case RunnerPi:
		switch typ {
		case "message_end", "turn_end", "message", "agent_end", "auto_retry_end":
			return true
		}
		return false
	}
	return true
}
