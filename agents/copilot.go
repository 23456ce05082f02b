package agents

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/jsonskim"
	"github.com/pilotworkers/pilot/sandbox"
)

// RunnerCopilot is the GitHub Copilot CLI runner's name, as providers
// files give it.
const RunnerCopilot = "copilot"

// CopilotRunner runs GitHub's Copilot CLI (npm @github/copilot, 1.x)
// headless, one prompt per worker, the prompt on stdin:
//
//	copilot --output-format json --no-auto-update --allow-all-tools
//	        [--model M] [--allow-all-paths | --deny-tool=shell --deny-tool=write]
//	        [--session-id=UUID | --resume=ID]
//	        --usage-output-file=<RunDir>/copilot-usage.json [Provider.Args...] < prompt
//
// Code, test and resume allow every path too (copilot otherwise denies a
// command or file outside the workdir, asking nobody). Explore and review
// deny its shell and its file-writing tools (--deny-tool beats
// --allow-all-tools) and keep its path check: the model may read, list
// and search the workdir, but runs no command and writes no file. A provider with a
// base_url is copilot's BYOK provider (COPILOT_PROVIDER_BASE_URL, an
// OpenAI-compatible endpoint, with COPILOT_MODEL) in offline mode, which
// keeps copilot off every GitHub host. Its stream has no token counts:
// they come from the usage file it writes as it exits (for a resumed
// session, the whole session's). formats-copilot.md has the stream and
// what was seen of its failures.
type CopilotRunner struct{}

// Name implements Runner.
func (CopilotRunner) Name() string { return RunnerCopilot }

// SandboxNeeds tells pilot's sandbox what the CLI needs (see
// pilot.Runner). copilot keeps its config, login, logs and sessions in
// ~/.copilot, which COPILOT_HOME moves (an isolated worker's is in its run
// directory); it unpacks its 235 MB package into ~/.cache/copilot (or
// COPILOT_PKG_CACHE_HOME) on its first run and reads it on every run
// after, isolated or not, which is why pilot leaves that cache shared.
// Without a BYOK endpoint it talks to GitHub's Copilot API.
func (CopilotRunner) SandboxNeeds(p pilot.Provider, home string) sandbox.Needs {
	n := sandbox.Needs{Connect: []string{"api.githubcopilot.com:443", "api.github.com:443"}}
	if hp, ok := endpointOf(p, "COPILOT_PROVIDER_BASE_URL"); ok {
		n.Connect = hp
	}
	if !isolated(p) {
		n.Own = []string{userDir(p, home, "COPILOT_HOME", ".copilot")}
	}
	n.Write = append(slices.Clone(n.Own), userDir(p, home, "COPILOT_PKG_CACHE_HOME", filepath.Join(".cache", "copilot")))
	return n
}

// Command implements Runner.
func (CopilotRunner) Command(_ context.Context, a pilot.Attempt) (*pilot.Command, error) {
	p := a.Provider
	if strings.TrimSpace(a.Prompt) == "" {
		return nil, errors.New("the task text is empty, and copilot needs a prompt: give the task some text")
	}
	if p.BaseURL != "" && p.Model == "" {
		return nil, fmt.Errorf("provider %q sets base_url but no model: copilot uses a custom endpoint only with the model id it serves; set \"model\"", p.Name)
	}
	home, err := isolatedDir(a, RunnerCopilot)
	if err != nil {
		return nil, err
	}
	argv := []string{program(p, RunnerCopilot), "--output-format", "json", "--no-auto-update", "--allow-all-tools"}
	if p.Model != "" && p.BaseURL == "" {
		argv = append(argv, "--model", p.Model)
	}
	if a.Task.Mode == pilot.ModeExplore || a.Task.Mode == pilot.ModeReview {
		argv = append(argv, "--deny-tool=shell", "--deny-tool=write")
	} else {
		// Without it copilot asks before a command or a file touches a
		// path outside the workdir, and headless, nobody answers: the
		// call is denied. pilot's sandbox is the bound.
		argv = append(argv, "--allow-all-paths")
	}
	w := &copilotWatcher{home: home, usageFile: filepath.Join(a.RunDir, "copilot-usage.json")}
	if r := a.Task.Resume; r != "" {
		id := r
		if states, sid, ok := resumeFromStore(r); ok {
			if filepath.Base(states) != "session-state" {
				return nil, fmt.Errorf("%s does not name a copilot session (<COPILOT_HOME>/session-state/<session id>)", r)
			}
			if st, err := os.Stat(r); err != nil || !st.IsDir() {
				return nil, fmt.Errorf("cannot resume %q: no such copilot session (was the run directory removed?)", r)
			}
			// The session's own COPILOT_HOME, where its store is too.
			id, home = sid, filepath.Dir(states)
			w.home = home
		} else if home != "" {
			return nil, fmt.Errorf("provider %q is isolated, so copilot keeps each session in the COPILOT_HOME of the run that made it; resume with that verdict's \"resume\" value (<run dir>/copilot/session-state/<session id>), not the bare session id %q", p.Name, r)
		}
		if err := checkResumeID(id); err != nil {
			return nil, err
		}
		argv = append(argv, "--resume="+id)
		w.sessionID = id
	} else {
		// A new session's id, known before the result line names it
		// (which a killed worker never prints).
		id := newUUID()
		argv = append(argv, "--session-id="+id)
		w.sessionID = id
	}
	argv = append(argv, "--usage-output-file="+w.usageFile)
	argv = append(argv, p.Args...)

	env := map[string]string{}
	if home != "" {
		env["COPILOT_HOME"] = home
	}
	if p.BaseURL != "" {
		env["COPILOT_PROVIDER_BASE_URL"] = p.BaseURL
		env["COPILOT_MODEL"] = p.Model
		// No GitHub login, telemetry, update check or GitHub MCP server:
		// without it copilot looks up GitHub's hosts even with a BYOK
		// provider.
		env["COPILOT_OFFLINE"] = "true"
	}
	cmd := &pilot.Command{Argv: argv, Env: env, Stdin: []byte(a.Prompt), Watcher: w}
	if c := p.CredentialEnv; c != "" && c != "COPILOT_PROVIDER_API_KEY" {
		cmd.SecretEnv = []string{"COPILOT_PROVIDER_API_KEY"}
	}
	return cmd, nil
}

// newUUID returns a random (version 4) UUID, copilot's form of a session id.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// copilotWatcher follows one `copilot --output-format json` stream: JSON
// lines whose type names the event, with the model call's failures and
// retries as events of their own, a session.error when the run fails, and
// a result line (session id, exit code) that always ends it.
type copilotWatcher struct {
	streamWatch
	home      string               // the worker's COPILOT_HOME when pilot chose it, or ""
	usageFile string               // where copilot writes its usage as it exits
	pending   []string             // the tool calls started and not complete
	answered  bool                 // an assistant message with text
	failure   pilot.Classification // the last failed call's, until its retry is announced
	errLine   string               // the last session.error line
	errMsg    string               // and its message
	errClass  pilot.Classification
	result    *copilotResult
	resultRaw string
	skim      copilotSkim // Line's reading of its events
}

// copilotResult is the final result line's part the watcher reads.
type copilotResult struct {
	SessionID string `json:"sessionId"`
	ExitCode  *int   `json:"exitCode"`
}

// copilotEvent is the part of a copilot event the watcher reads, as
// encoding/json decodes it where the skim is unsure (copilotSkim).
type copilotEvent struct {
	Type string `json:"type"`
	Data struct {
		Content      string `json:"content"`
		ToolRequests []struct {
			ToolCallID string `json:"toolCallId"`
		} `json:"toolRequests"`
		ToolCallID   string `json:"toolCallId"`
		StatusCode   int    `json:"statusCode"`
		ErrorMessage string `json:"errorMessage"`
		FailureKind  string `json:"failureKind"`
		Reason       string `json:"reason"`
		ErrorType    string `json:"errorType"`
		Message      string `json:"message"`
	} `json:"data"`
}

// copilotSessionGone begins what copilot prints on stderr, exiting 1
// before any request, when the session to resume does not exist:
// "Error: No session, task, or name matched '<id>'."
const copilotSessionGone = "No session, task, or name matched"

// copilotNoResponse begins the session.error copilot ends a run with,
// exiting 1, when the model answered nothing: pilot's empty verdict.
const copilotNoResponse = "No response was returned"

// Line implements Watcher.
func (w *copilotWatcher) Line(l pilot.Line) {
	if l.Truncated {
		return
	}
	if l.Stream != pilot.Stdout {
		w.noteGone(l.Data, copilotSessionGone)
		return
	}
	typ, ok := leadingType(l.Data)
	if !ok {
		return
	}
	switch t := string(typ); t {
	case "assistant.turn_start", "model.call_start":
		w.quiet(0)
		if len(w.pending) == 0 {
			reason := "stream:model.call_start" // a constant: "stream:"+t allocates
			if t == "assistant.turn_start" {
				reason = "stream:assistant.turn_start"
			}
			w.setPhase(pilot.PhaseAwaitingModel, reason, nil)
		}
	case "assistant.message_delta":
		w.retryOver()
	case "assistant.message", "tool.execution_start", "tool.execution_complete",
		"model.call_failure", "assistant.turn_retry", "session.error":
		if !w.skim.event(l.Data) {
			return
		}
		w.event(t, &w.skim.ev, l.Data)
	case "result":
		var r copilotResult
		sid, ok := w.skim.result(l.Data, &r)
		if !ok {
			return
		}
		w.result, w.resultRaw = &r, string(l.Data)
		if len(sid) > 0 {
			w.sessionID = w.sessionString(sid)
			r.SessionID = w.sessionID
		}
		if r.ExitCode != nil && *r.ExitCode == 0 {
			w.setPhase(pilot.PhaseFinished, "stream:result", nil)
		} else {
			w.setPhase(pilot.PhaseErrored, "stream:result", nil)
		}
	}
}

// event reads one event of type t, the line, as d reads it.
func (w *copilotWatcher) event(t string, d *copilotData, line []byte) {
	switch t {
	case "assistant.message":
		w.retryOver()
		if d.content {
			w.answered = true
		}
		for _, id := range d.toolRequests {
			w.open(id)
		}
		if len(w.pending) > 0 {
			w.setPhase(pilot.PhaseToolRunning, "stream:assistant.message", w.pending)
		}
	case "tool.execution_start":
		w.open(d.toolCallID)
		w.setPhase(pilot.PhaseToolRunning, "stream:tool.execution_start", w.pending)
	case "tool.execution_complete":
		// open keeps the ids distinct: one at most is complete.
		if i := indexOf(w.pending, d.toolCallID); i >= 0 {
			w.pending = slices.Delete(w.pending, i, i+1)
		}
		if len(w.pending) > 0 {
			w.setPhase(pilot.PhaseToolRunning, "stream:tool.execution_complete", w.pending)
		} else {
			w.setPhase(pilot.PhaseAwaitingModel, "stream:tool.execution_complete", nil)
		}
	case "model.call_failure":
		w.failure = copilotCallFailure(d.statusCode, string(d.errorMessage), string(d.failureKind))
	case "assistant.turn_retry":
		c := w.failure
		if c.Evidence == "" {
			c = copilotRetryReason(string(d.reason))
		}
		w.retrying(RunnerCopilot+":stdout", c.Evidence, c)
		w.failure = pilot.Classification{}
		if len(w.pending) == 0 {
			w.setPhase(pilot.PhaseAwaitingModel, "stream:assistant.turn_retry", nil)
		}
	case "session.error":
		w.errLine, w.errMsg = string(line), string(d.message)
		w.errClass = copilotSessionError(string(d.errorType), w.errMsg, d.statusCode)
	}
}

// open adds a tool call to the pending ones, once.
func (w *copilotWatcher) open(id []byte) {
	if len(id) > 0 && indexOf(w.pending, id) < 0 {
		w.pending = append(w.pending, string(id))
	}
}

// copilotData is what the watcher reads of an event's data: each string
// as decoding it gives it, aliasing the line where it has no escapes
// (read during Watcher.Line only).
type copilotData struct {
	content      bool     // content is not blank
	toolRequests [][]byte // each tool request's toolCallId, "" too
	toolCallID   []byte
	statusCode   int
	errorMessage []byte
	failureKind  []byte
	reason       []byte
	errorType    []byte
	message      []byte
}

// copilotSkim reads copilot's event lines as json.Unmarshal decodes them
// into a copilotEvent or a copilotResult, without encoding/json: the
// skim (jsonskim.ValidMembers checks the line as json.Unmarshal does, and
// delimits the members), then each field the watcher reads, each of the
// type the struct gives it (where encoding/json fails on another, and the
// line is ignored). A line with a key encoding/json could match otherwise
// than exactly (exactKeys: escaped, in another letter case, twice) is
// decoded by encoding/json. Its buffers are reused from line to line.
type copilotSkim struct {
	top, data, req skim
	elems          [][]byte
	ev             copilotData
}

// The fields of copilotEvent, its data and a tool request, and of
// copilotResult, as encoding/json names them.
var (
	copilotEventFields   = newFieldSet("type", "data")
	copilotDataFields    = newFieldSet("content", "toolRequests", "toolCallId", "statusCode", "errorMessage", "failureKind", "reason", "errorType", "message")
	copilotRequestFields = newFieldSet("toolCallId")
	copilotResultFields  = newFieldSet("sessionId", "exitCode")
)

// skimSure is what a copilotSkim read of a line ends in: the line read,
// the line one that json.Unmarshal fails on, or a line to decode with it.
type skimSure int

const (
	skimRead skimSure = iota
	skimFailed
	skimUnsure
)

// event reads the event line data into s.ev, and reports whether
// json.Unmarshal decodes it into a copilotEvent (the watcher reads no
// other line).
func (s *copilotSkim) event(data []byte) bool {
	switch s.skimEvent(data) {
	case skimRead:
		return true
	case skimFailed:
		return false
	}
	var ev copilotEvent
	if json.Unmarshal(data, &ev) != nil {
		return false
	}
	d := ev.Data
	s.ev = copilotData{
		content:      strings.TrimSpace(d.Content) != "",
		toolRequests: s.ev.toolRequests[:0],
		toolCallID:   []byte(d.ToolCallID),
		statusCode:   d.StatusCode,
		errorMessage: []byte(d.ErrorMessage),
		failureKind:  []byte(d.FailureKind),
		reason:       []byte(d.Reason),
		errorType:    []byte(d.ErrorType),
		message:      []byte(d.Message),
	}
	for _, r := range d.ToolRequests {
		s.ev.toolRequests = append(s.ev.toolRequests, []byte(r.ToolCallID))
	}
	return true
}

// skimEvent is event without encoding/json.
func (s *copilotSkim) skimEvent(data []byte) skimSure {
	s.ev = copilotData{toolRequests: s.ev.toolRequests[:0]}
	if sure, ok := s.validObject(data, copilotEventFields); !ok {
		return sure
	}
	if _, ok := s.top.str("type"); !ok {
		return skimFailed
	}
	raw := s.top.raw("data")
	if raw == nil || string(raw) == "null" {
		return skimRead
	}
	if raw[0] != '{' {
		return skimFailed
	}
	s.data.ms, _ = jsonskim.Members(s.data.ms[:0], raw) // checked with the line
	if !exactKeys(s.data.ms, copilotDataFields) {
		return skimUnsure
	}
	d, ok := &s.ev, true
	if c := s.data.raw("content"); c != nil && string(c) != "null" {
		if c[0] != '"' {
			return skimFailed
		}
		d.content = claudeNonBlank(c)
	}
	for _, f := range [...]struct {
		dst *[]byte
		key string
	}{{&d.toolCallID, "toolCallId"}, {&d.errorMessage, "errorMessage"}, {&d.failureKind, "failureKind"},
		{&d.reason, "reason"}, {&d.errorType, "errorType"}, {&d.message, "message"}} {
		if *f.dst, ok = s.data.str(f.key); !ok {
			return skimFailed
		}
	}
	if d.statusCode, ok = skimInt(s.data.raw("statusCode")); !ok {
		return skimFailed
	}
	raw = s.data.raw("toolRequests")
	if raw == nil || string(raw) == "null" {
		return skimRead
	}
	if raw[0] != '[' {
		return skimFailed
	}
	s.elems, _ = jsonskim.Elements(s.elems[:0], raw)
	for _, e := range s.elems {
		switch e[0] {
		case 'n': // null: an empty request
			d.toolRequests = append(d.toolRequests, nil)
			continue
		case '{':
		default:
			return skimFailed
		}
		s.req.ms, _ = jsonskim.Members(s.req.ms[:0], e)
		if !exactKeys(s.req.ms, copilotRequestFields) {
			return skimUnsure
		}
		id, ok := s.req.str("toolCallId")
		if !ok {
			return skimFailed
		}
		d.toolRequests = append(d.toolRequests, id)
	}
	return skimRead
}

// validObject reads the members of the line data into s.top when it is a
// valid JSON object whose keys are fields' exactly (exactKeys); else ok is
// false and sure says what the line is.
func (s *copilotSkim) validObject(data []byte, fields *fieldSet) (sure skimSure, ok bool) {
	s.top.ms, ok = jsonskim.ValidMembers(s.top.ms[:0], data)
	switch {
	case !ok && jsonskim.Valid(data):
		return skimUnsure, false // valid JSON, but no object: null, say
	case !ok:
		return skimFailed, false
	case !exactKeys(s.top.ms, fields):
		return skimUnsure, false
	}
	return skimRead, true
}

// result reads the result line data into *r, as json.Unmarshal decodes
// it, and reports whether it decodes. The session id is returned, not set
// in r (it aliases the line).
func (s *copilotSkim) result(data []byte, r *copilotResult) (sessionID []byte, ok bool) {
	switch sure, ok := s.validObject(data, copilotResultFields); {
	case ok:
	case sure == skimFailed:
		return nil, false
	default:
		if json.Unmarshal(data, r) != nil {
			return nil, false
		}
		return []byte(r.SessionID), true
	}
	if sessionID, ok = s.top.str("sessionId"); !ok {
		return nil, false
	}
	if raw := s.top.raw("exitCode"); raw != nil && string(raw) != "null" {
		code, ok := skimInt(raw)
		if !ok {
			return nil, false
		}
		r.ExitCode = &code
	}
	return sessionID, true
}

// skimInt decodes the raw JSON value of an int field, valid JSON, as
// encoding/json does, and reports whether it decodes: a missing member
// (nil) or null is 0 (the field as it was), an integer in range is
// parsed, anything else (a fraction, an exponent, a string) fails.
func skimInt(raw []byte) (int, bool) {
	if raw == nil || string(raw) == "null" {
		return 0, true
	}
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, false
	}
	if len(raw) <= 9 && raw[0] != '-' { // the usual HTTP status: no allocation
		n := 0
		for _, c := range raw {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	n, err := strconv.ParseInt(string(raw), 10, strconv.IntSize)
	return int(n), err == nil
}

// copilotCallFailure classifies one failed model call of a
// model.call_failure event: its HTTP status and the API's error body, or,
// with failureKind "transport" and no status, the connection's error. The
// evidence is the error as copilot printed it; the note names the status.
func copilotCallFailure(status int, msg, kind string) pilot.Classification {
	text := clip(strings.TrimSpace(msg), 2000)
	if text == "" {
		return pilot.Classification{}
	}
	note := "copilot's model.call_failure, failureKind " + kind
	if status > 0 {
		note = "copilot's model.call_failure, HTTP " + strconv.Itoa(status)
	}
	c := pilot.ClassifyProviderError(text, status)
	if (c.Evidence == "" || c.Class == pilot.FailGeneric) && status == 0 && kind == "transport" {
		c = classified(pilot.FailProviderStreamDisconnect, text, "")
	}
	if c.Evidence == "" {
		c = classified(pilot.FailGeneric, text, "")
	}
	c.Note = note
	return c
}

// copilotRetryReason is the class an assistant.turn_retry's reason names,
// for a retry whose failed call the stream did not show.
func copilotRetryReason(reason string) pilot.Classification {
	notice := "copilot retried the model call: " + reason
	switch reason {
	case "rate_limit":
		return classified(pilot.FailProviderRateLimit, notice, "")
	case "api_error":
		return classified(pilot.FailProviderServerError, notice, "")
	case "transient_auth_error":
		return classified(pilot.FailProviderAuth, notice, "")
	case "streaming_error":
		return classified(pilot.FailProviderStreamDisconnect, notice, "")
	}
	return classified(pilot.FailGeneric, notice, "")
}

// copilotSessionError classifies a session.error: its errorType
// "authentication" and "rate_limit" decide, else the message and status
// (errorType "query" is every other failed call, 400 to 5xx, and a cut
// stream, whose message names the last error).
func copilotSessionError(typ, msg string, status int) pilot.Classification {
	text := clip(strings.TrimSpace(msg), 2000)
	if text == "" {
		text = "copilot session.error " + typ
	}
	switch typ {
	case "authentication":
		return classified(pilot.FailProviderAuth, text, "")
	case "rate_limit":
		return classified(pilot.FailProviderRateLimit, text, "")
	}
	c := pilot.ClassifyProviderError(text, status)
	if c.Evidence == "" || c.Class == pilot.FailGeneric {
		if strings.Contains(text, "error decoding response body") || strings.Contains(text, "error reading a body from connection") {
			return classified(pilot.FailProviderStreamDisconnect, text, "")
		}
		return classified(pilot.FailGeneric, text, "")
	}
	return c
}

// Finish implements Watcher. Every run copilot ends itself, failed or not,
// ends with the result line, whose exitCode is the process's; a failed
// one has a session.error before it, which names the failure.
func (w *copilotWatcher) Finish(e pilot.Exit) pilot.Result {
	w.resume = w.resumeValue()
	w.usage = readCopilotUsage(w.usageFile)
	if ended(e) {
		return w.session(pilot.JudgeExit(e))
	}
	r := w.result
	failedRun := e.Code != 0 || (r != nil && r.ExitCode != nil && *r.ExitCode != 0) || w.errLine != ""
	switch {
	case r == nil && e.Code != 0:
		return w.session(pilot.JudgeExit(e))
	case r == nil:
		return w.session(incomplete(RunnerCopilot, "a result line"))
	case failedRun && strings.HasPrefix(w.errMsg, copilotNoResponse) && !w.answered:
		return w.session(pilot.Result{Outcome: pilot.Empty})
	case failedRun && w.errLine != "":
		e = streamDiagnostic(e, RunnerCopilot, w.errClass)
		return w.session(reportedFailure(e, RunnerCopilot, w.errLine))
	case failedRun:
		if e.Code == 0 {
			e.Code = 1 // the result line's exit code, where the process's says none
		}
		if d := e.Diagnostic; d != nil && d.Evidence != "" {
			return w.session(pilot.JudgeExit(e))
		}
		return w.session(failed(pilot.FailGeneric, RunnerCopilot+":stdout", clip(w.resultRaw, 2000)))
	case !w.answered:
		return w.session(pilot.Result{Outcome: pilot.Empty})
	}
	return w.session(pilot.Result{Outcome: pilot.Completed})
}

// copilotUsage is the part of copilot's usage file pilot reads: the
// tokens per model.
type copilotUsage struct {
	ModelMetrics map[string]struct {
		Usage struct {
			InputTokens      int64 `json:"inputTokens"`
			OutputTokens     int64 `json:"outputTokens"`
			CacheReadTokens  int64 `json:"cacheReadTokens"`
			CacheWriteTokens int64 `json:"cacheWriteTokens"`
		} `json:"usage"`
	} `json:"modelMetrics"`
}

// maxUsageFile bounds the usage file pilot reads.
const maxUsageFile = 1 << 20

// readCopilotUsage returns the tokens of every model in the usage file
// at path, or nil when there is none (copilot was killed, or failed
// before it wrote one).
func readCopilotUsage(path string) *pilot.Usage {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxUsageFile {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var f copilotUsage
	if json.Unmarshal(data, &f) != nil || f.ModelMetrics == nil {
		return nil
	}
	var u pilot.Usage
	for _, m := range f.ModelMetrics {
		u.InputTokens += m.Usage.InputTokens
		u.OutputTokens += m.Usage.OutputTokens
		u.CacheReadTokens += m.Usage.CacheReadTokens
		u.CacheWriteTokens += m.Usage.CacheWriteTokens
	}
	return &u
}

// resumeValue is the verdict's resume value: the session id, or, for a
// worker in its own COPILOT_HOME, the session's directory there,
// <COPILOT_HOME>/session-state/<session id> (a later worker resumes it in
// that home).
func (w *copilotWatcher) resumeValue() string {
	if w.sessionID == "" || checkResumeID(w.sessionID) != nil || strings.ContainsRune(w.sessionID, filepath.Separator) {
		return ""
	}
	if w.home == "" {
		return w.sessionID
	}
	if dir := filepath.Join(w.home, "session-state", w.sessionID); isDir(dir) {
		return dir
	}
	return ""
}

// isDir reports whether path is a directory.
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// Diagnose is pilot.Watcher's optional Diagnose: a session.error and a
// model.call_failure on stdout, and on stderr (empty in every recorded
// run) copilot's own words or any API's.
func (w *copilotWatcher) Diagnose(s pilot.Stream, line string) (pilot.Classification, bool) {
	switch s {
	case pilot.Stderr:
		return ownWords(line, copilotPhrases)
	case pilot.Stdout:
		t, ok := eventLine(line)
		if !ok {
			return pilot.Classification{}, false
		}
		typ, _ := leadingType(t)
		if typ != "session.error" && typ != "model.call_failure" {
			return pilot.Classification{}, false
		}
		var s copilotSkim // Diagnose runs beside Line: not w.skim
		if len(t) > maxDiagnosticText || !s.event([]byte(t)) {
			return pilot.Classification{}, false
		}
		d := &s.ev
		if typ == "session.error" {
			return proved(copilotSessionError(string(d.errorType), string(d.message), d.statusCode))
		}
		return proved(copilotCallFailure(d.statusCode, string(d.errorMessage), string(d.failureKind)))
	}
	return pilot.Classification{}, false
}

// copilotPhrases are copilot's own failure texts on stderr.
var copilotPhrases = []phrase{
	{word: "no authentication information found", class: pilot.FailProviderAuth},
	{word: "offline mode requires a local model provider", class: pilot.FailSpawn},
}

var _ pilot.PhaseWatcher = (*copilotWatcher)(nil)
