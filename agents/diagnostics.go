package agents

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/pilotworkers/pilot"
)

// ClassifyExitCode maps the exit codes that mean something by themselves for
// a runner to a failure class. ok is false for every other code: the run is
// then judged by its output (its terminal diagnostics), or is generic-error.
//
// Only gemini-cli documents such codes (packages/core/src/utils/exitCodes.ts,
// docs/cli/headless.md):
//
//	41  auth (FatalAuthenticationError)       → provider-auth
//	42  input                                 → spawn-failed
//	44  sandbox                               → spawn-failed
//	52  config                                → spawn-failed
//	53  turn limit (MaxSessionTurnsError)     → ok=false: a step cap, see [StepCapExit]
//	54  tool execution                        → ok=false: no class of its own
//	55  untrusted workspace                   → spawn-failed
//	130 cancelled                             → ok=false: a termination, see [pilot.JudgeExit]
//
// 42, 44, 52 and 55 mean gemini refused to begin the task (bad input, no
// sandbox, bad configuration, a workspace it does not trust): like a program
// that is not there, the worker never worked and will refuse again, so they
// are spawn-failed and not retryable. 54 is a tool that failed during the
// task, which may not happen again: it would be generic-error, so it is left
// to the worker's diagnostics, which may say more. 130 is SIGINT; whether
// pilot's caller cancelled is pilot's to know, not the exit code's, so the
// termination path judges it. codex, Claude Code, pi and opencode exit 1
// for every failure, and 143, 137, 130 and other 128+N codes are
// terminations for every runner: none of them is classified here.
func ClassifyExitCode(runner string, code int) (pilot.FailureClass, bool) {
	if runner != "gemini" {
		return "", false
	}
	switch code {
	case 41:
		return pilot.FailProviderAuth, true
	case 42, 44, 52, 55:
		return pilot.FailSpawn, true
	}
	return "", false
}

// StepCapExit reports whether code is the runner's exit for stopping at its
// own turn or step limit, which the Dispatcher reports as
// step_capped_partial rather than a failure: gemini-cli's 53 (turn limit,
// MaxSessionTurnsError). Claude Code reports its limit in the result event
// (subtype error_max_turns), not in the exit code.
func StepCapExit(runner string, code int) bool {
	return runner == "gemini" && code == 53
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
//     then " (statusCode: N)" when set, and " (provider request)" for an
//     UnknownError that is Bun's fetch failing to connect ("Unable to
//     connect. Is the computer able to access the url?"): opencode reports
//     the model request's connection failure that way, without a provider
//     name, and the classifier needs one. " (provider stream closed)" is
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

// rePiStatusLead matches an error message that begins with an HTTP error
// status ("500 upstream boom", "error: 429 ...").
var rePiStatusLead = regexp.MustCompile(`^\s*(?:error:\s*)?([45]\d\d)\b(.*)$`)

// piMessage is the part of a pi AgentMessage that tells an error.
type piMessage struct {
	Role         string `json:"role"`
	StopReason   string `json:"stopReason"`
	ErrorMessage string `json:"errorMessage"`
}

func (m piMessage) diagnostic() (string, bool) {
	if m.Role != "assistant" || m.StopReason != "error" {
		return "", false
	}
	if m.ErrorMessage == "" {
		return "Request error", true
	}
	return piErrorText(m.ErrorMessage), true
}

// piErrorText is the text to classify for an errorMessage of pi's model
// call. pi writes an HTTP failure as "<status> <body>"; the body is
// whatever the endpoint sent ("500 upstream boom"), which may hold no word
// that proves a provider. The message comes from the model call itself, so
// a leading status is the provider's: when the message proves nothing
// alone, " (provider error)" is added, which lets the status count.
func piErrorText(msg string) string {
	if rePiStatusLead.MatchString(strings.ToLower(msg)) && pilot.ClassifyFailure(msg).Evidence == "" {
		return msg + " (provider error)"
	}
	return msg
}

func piDiagnostic(line string) (string, bool) {
	// Skip the (often huge) streaming events without decoding them.
	// pi writes its JSON with JSON.stringify, so without spaces.
	if !strings.Contains(line, `"stopReason":"error"`) && !strings.Contains(line, `"auto_retry_end"`) {
		return "", false
	}
	var ev struct {
		Type       string          `json:"type"`
		Message    json.RawMessage `json:"message"`
		Messages   json.RawMessage `json:"messages"`
		Success    *bool           `json:"success"`
		FinalError string          `json:"finalError"`
	}
	if json.Unmarshal([]byte(line), &ev) != nil {
		return "", false
	}
	switch ev.Type {
	case "message_end", "turn_end", "message":
		var m piMessage
		if json.Unmarshal(ev.Message, &m) != nil {
			return "", false
		}
		return m.diagnostic()
	case "agent_end":
		var ms []piMessage
		if json.Unmarshal(ev.Messages, &ms) != nil {
			return "", false
		}
		for i := len(ms) - 1; i >= 0; i-- {
			if ms[i].Role == "assistant" {
				return ms[i].diagnostic()
			}
		}
	case "auto_retry_end":
		if ev.Success != nil && !*ev.Success {
			return ev.FinalError, true
		}
	}
	return "", false
}

func codexDiagnostic(line string) (string, bool) {
	var ev struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Error   struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(line), &ev) != nil {
		return "", false
	}
	switch ev.Type {
	case "turn.failed":
		return ev.Error.Message, true
	case "error":
		if codexRetrying(ev.Message) {
			return "", false
		}
		return ev.Message, true
	}
	return "", false
}

// claudeDiagnostic reads Claude Code's stream-json error events: a result
// with is_error, and the synthetic assistant message that carries an API
// error's text with its category in "error" (authentication_failed,
// billing_error, rate_limit, invalid_request, server_error, unknown). The
// category is added as " (api error: <category>)" when the text alone
// proves nothing: Claude Code's texts ("Invalid API key · Fix external API
// key", "Rate limit exceeded") do not always say by themselves that the
// API refused. A text that does prove a class keeps it: the category is
// coarse (server_error for a refused connection and a dropped stream
// alike).
func claudeDiagnostic(line string) (string, bool) {
	// Most lines are the model's messages: skip them without decoding.
	if !strings.Contains(line, `"is_error"`) && !strings.Contains(line, `"error"`) {
		return "", false
	}
	var ev struct {
		Type           string            `json:"type"`
		Subtype        string            `json:"subtype"`
		IsError        bool              `json:"is_error"`
		Result         string            `json:"result"`
		Errors         []json.RawMessage `json:"errors"`
		APIErrorStatus *int              `json:"api_error_status"`
		TerminalReason string            `json:"terminal_reason"`
		Error          json.RawMessage   `json:"error"`
		Message        struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal([]byte(line), &ev) != nil {
		return "", false
	}
	switch {
	case ev.Type == "result" && ev.IsError:
		return claudeResultDiagnostic(ev.Result, ev.Errors, ev.Subtype, ev.APIErrorStatus, ev.TerminalReason), true
	case ev.Type == "assistant":
		var category string
		if json.Unmarshal(ev.Error, &category) != nil || category == "" {
			return "", false
		}
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		var texts []string
		if json.Unmarshal(ev.Message.Content, &blocks) == nil {
			for _, b := range blocks {
				if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
					texts = append(texts, strings.TrimSpace(b.Text))
				}
			}
		}
		text := strings.Join(texts, " ")
		if text != "" && pilot.ClassifyFailure(text).Evidence != "" {
			// The text proves its class ("Connection refused ...
			// (ECONNREFUSED)"); Claude's coarse category
			// (server_error for any transport trouble) would only
			// blur it.
			return text, true
		}
		if text != "" {
			text += " "
		}
		return text + "(api error: " + category + ")", true
	}
	return "", false
}

// claudeResultDiagnostic is the text of a result with is_error: its result
// text (or its errors), then " (api_error_status: N)" when the status is set
// and " (terminal_reason: R)" when R says more than api_error or completed.
func claudeResultDiagnostic(result string, rawErrors []json.RawMessage, subtype string, status *int, reason string) string {
	text := result
	if text == "" {
		var errs []string
		for _, raw := range rawErrors {
			var s string
			if json.Unmarshal(raw, &s) == nil && s != "" {
				errs = append(errs, s)
			}
		}
		text = strings.Join(errs, "; ")
	}
	if text == "" {
		text = subtype
	}
	if status != nil {
		text += " (api_error_status: " + strconv.Itoa(*status) + ")"
	}
	switch reason {
	case "", "completed", "api_error":
	default:
		text += " (terminal_reason: " + reason + ")"
	}
	return strings.TrimSpace(text)
}

func opencodeDiagnostic(line string) (string, bool) {
	var ev struct {
		Type  string `json:"type"`
		Error struct {
			Name string `json:"name"`
			Data struct {
				Message    string `json:"message"`
				StatusCode *int   `json:"statusCode"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(line), &ev) != nil || ev.Type != "error" {
		return "", false
	}
	return opencodeErrorText(ev.Error.Name, ev.Error.Data.Message, ev.Error.Data.StatusCode), true
}

// opencodeErrorText is the text to classify for an opencode error named name
// with message msg (and HTTP status, when known): "<name>: <msg>", then
// " (statusCode: N)", then a note for Bun's connection failures, whose words
// alone prove no provider class:
//
//   - " (provider request)" for an UnknownError holding Bun's "Unable to
//     connect. Is the computer able to access the url?": opencode reports
//     the model request's connection failure that way, without a provider
//     name.
//   - " (provider stream closed)" for Bun's "The socket connection was closed
//     unexpectedly" (its ConnectionClosed): the endpoint accepted the
//     connection and closed it before the answer was whole. The AI SDK
//     wraps every failed fetch as "Cannot connect to API: …", but this one
//     did connect: Bun reports a response cut mid-stream this way when the
//     close arrives before fetch has handed the response over (seen against
//     fakellm's Dropped step, which sends the status line and half the
//     stream, then closes). It is Bun's wording of undici's "other side
//     closed", which is a stream disconnect too; an endpoint that never
//     accepts gives Bun's "Unable to connect" instead. And for opencode's
//     APIError "Connection reset by server", its name for an ECONNRESET
//     outside fetch, that is while the response streams in (see
//     opencodeConnReset).
func opencodeErrorText(name, msg string, status *int) string {
	text := name
	if msg != "" {
		if text != "" {
			text += ": "
		}
		text += msg
	}
	if status != nil {
		text += " (statusCode: " + strconv.Itoa(*status) + ")"
	}
	switch {
	case name == "UnknownError" && strings.Contains(msg, bunConnectFailed):
		text += " (provider request)"
	case strings.Contains(msg, bunSocketClosed), name == "APIError" && msg == opencodeConnReset:
		text += " (provider stream closed)"
	}
	return text
}

// opencodeConnReset is the message opencode gives an error with code
// ECONNRESET (its message-v2 fromError). A failed fetch never gets there:
// the AI SDK wraps those, ECONNRESET included, as "Cannot connect to API:
// …". So it is the response stream being reset after the response began
// (seen against fakellm's Dropped step, after a step_start).
const opencodeConnReset = "Connection reset by server"

// bunConnectFailed is the message of Bun's fetch when it cannot connect.
// opencode (which runs on Bun) reports it as an UnknownError when the model
// request itself cannot connect; the error event carries no provider name.
const bunConnectFailed = "Unable to connect. Is the computer able to access the url?"

// bunSocketClosed is the message of Bun's fetch when the other side closes
// a connection before the response is whole.
const bunSocketClosed = "The socket connection was closed unexpectedly"

// An opencodeLog is one of opencode's log lines, as --print-logs writes them
// to stderr: logfmt, "timestamp=2026-11-30T07:16:13.903Z level=ERROR
// run=ccd5097b message="stream error" providerID=pilot … small=false …
// error.error="AI_APICallError: fakellm: boom"". Only the fields pilot reads
// are kept.
type opencodeLog struct {
	Level     string // DEBUG, INFO, WARN, ERROR
	Message   string
	SessionID string // session.id
	Small     string // "true" for the small model's side requests (the title)
	Err       string // error.error: the failed model call's error
	ID        string // id (message=created: the new session's id)
	Action    string // action.action (message=evaluated: allow, deny, ask)
	Perm      string // permission (message=evaluated)
}

// parseOpencodeLog reads line as one of opencode's log lines; isLog is false
// when it is not one (a line opencode printed itself, a crash).
func parseOpencodeLog(line string) (l opencodeLog, isLog bool) {
	if !strings.HasPrefix(line, "timestamp=") || !strings.Contains(line, " level=") {
		return l, false
	}
	rest := line
	for rest != "" {
		var key, val string
		key, val, rest = nextLogfmt(rest)
		switch key {
		case "level":
			l.Level = val
		case "message":
			l.Message = val
		case "session.id":
			l.SessionID = val
		case "small":
			l.Small = val
		case "error.error":
			l.Err = val
		case "id":
			l.ID = val
		case "action.action":
			l.Action = val
		case "permission":
			l.Perm = val
		}
	}
	return l, true
}

// nextLogfmt reads the first key=value pair of s and returns what follows.
// A value is bare (up to the next space) or a JSON string in quotes; a
// quoted value that does not decode is kept as written between the quotes.
// Text that is no pair (a key without "=") is skipped up to the next space.
func nextLogfmt(s string) (key, val, rest string) {
	s = strings.TrimLeft(s, " ")
	eq := strings.IndexAny(s, "= ")
	if eq < 0 || s[eq] == ' ' {
		if eq < 0 {
			return "", "", ""
		}
		return "", "", s[eq:]
	}
	key, s = s[:eq], s[eq+1:]
	if !strings.HasPrefix(s, `"`) {
		if sp := strings.IndexByte(s, ' '); sp >= 0 {
			return key, s[:sp], s[sp:]
		}
		return key, s, ""
	}
	end := 1
	for end < len(s) && s[end] != '"' {
		if s[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(s) {
		// No closing quote: the value runs to the end of the line.
		return key, s[1:], ""
	}
	quoted := s[:end+1]
	if err := json.Unmarshal([]byte(quoted), &val); err != nil {
		val = quoted[1 : len(quoted)-1]
	}
	return key, val, s[end+1:]
}

// opencodeLogDiagnostic is the diagnostic text of an opencode log line: the
// main model call's "stream error", worded like the error event.
func opencodeLogDiagnostic(l opencodeLog) (string, bool) {
	if l.Level != "ERROR" || l.Message != "stream error" || l.Small == "true" || strings.TrimSpace(l.Err) == "" {
		return "", false
	}
	name, msg, found := strings.Cut(l.Err, ": ")
	if !found || strings.ContainsAny(name, " ") {
		name, msg = "", l.Err
	}
	// The AI SDK's error names carry an "AI_" prefix ("AI_APICallError")
	// that its error events do not.
	name = strings.TrimPrefix(name, "AI_")
	return opencodeErrorText(name, msg, nil), true
}

// geminiTerminated is gemini-cli's result error when the model's answer
// broke off mid-stream: undici's fetch reports a response body cut short
// (the server closed the connection: "other side closed") as "terminated",
// which gemini does not retry and wraps as an API error. A request that
// never connects fails earlier, as "fetch failed". Seen in an e2e run of
// gemini-cli 0.61.0 against fakellm (testdata/gemini/stream/
// e2e-stream-terminated).
const geminiTerminated = "[API Error: terminated]"

func geminiDiagnostic(line string) (string, bool) {
	var ev struct {
		Type     string `json:"type"`
		Status   string `json:"status"`
		Severity string `json:"severity"`
		Message  string `json:"message"`
		Error    struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(line), &ev) != nil {
		return "", false
	}
	switch {
	case ev.Type == "result" && ev.Status == "error":
		text := ev.Error.Type
		if ev.Error.Message != "" {
			if text != "" {
				text += ": "
			}
			text += ev.Error.Message
		}
		if strings.TrimSpace(ev.Error.Message) == geminiTerminated {
			text += " (model response stream terminated)"
		}
		return text, true
	case ev.Type == "error" && ev.Severity == "error":
		return ev.Message, true
	}
	return "", false
}
