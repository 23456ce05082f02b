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
}

// copilotResult is the final result line's part the watcher reads.
type copilotResult struct {
	SessionID string `json:"sessionId"`
	ExitCode  *int   `json:"exitCode"`
}

// copilotEvent is the part of a copilot event the watcher reads.
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
			w.setPhase(pilot.PhaseAwaitingModel, "stream:"+t, nil)
		}
	case "assistant.message_delta":
		w.retryOver()
	case "assistant.message", "tool.execution_start", "tool.execution_complete",
		"model.call_failure", "assistant.turn_retry", "session.error":
		var ev copilotEvent
		if json.Unmarshal(l.Data, &ev) != nil {
			return
		}
		w.event(t, ev, string(l.Data))
	case "result":
		var r copilotResult
		if json.Unmarshal(l.Data, &r) != nil {
			return
		}
		w.result, w.resultRaw = &r, string(l.Data)
		if r.SessionID != "" {
			w.sessionID = r.SessionID
		}
		if r.ExitCode != nil && *r.ExitCode == 0 {
			w.setPhase(pilot.PhaseFinished, "stream:result", nil)
		} else {
			w.setPhase(pilot.PhaseErrored, "stream:result", nil)
		}
	}
}

// event reads one decoded event of type t.
func (w *copilotWatcher) event(t string, ev copilotEvent, line string) {
	d := ev.Data
	switch t {
	case "assistant.message":
		w.retryOver()
		if strings.TrimSpace(d.Content) != "" {
			w.answered = true
		}
		for _, r := range d.ToolRequests {
			w.open(r.ToolCallID)
		}
		if len(w.pending) > 0 {
			w.setPhase(pilot.PhaseToolRunning, "stream:assistant.message", w.pending)
		}
	case "tool.execution_start":
		w.open(d.ToolCallID)
		w.setPhase(pilot.PhaseToolRunning, "stream:tool.execution_start", w.pending)
	case "tool.execution_complete":
		w.pending = slices.DeleteFunc(w.pending, func(id string) bool { return id == d.ToolCallID })
		if len(w.pending) > 0 {
			w.setPhase(pilot.PhaseToolRunning, "stream:tool.execution_complete", w.pending)
		} else {
			w.setPhase(pilot.PhaseAwaitingModel, "stream:tool.execution_complete", nil)
		}
	case "model.call_failure":
		w.failure = copilotCallFailure(d.StatusCode, d.ErrorMessage, d.FailureKind)
	case "assistant.turn_retry":
		c := w.failure
		if c.Evidence == "" {
			c = copilotRetryReason(d.Reason)
		}
		w.retrying(RunnerCopilot+":stdout", c.Evidence, c)
		w.failure = pilot.Classification{}
		if len(w.pending) == 0 {
			w.setPhase(pilot.PhaseAwaitingModel, "stream:assistant.turn_retry", nil)
		}
	case "session.error":
		w.errLine, w.errMsg = line, d.Message
		w.errClass = copilotSessionError(d.ErrorType, d.Message, d.StatusCode)
	}
}

// open adds a tool call to the pending ones, once.
func (w *copilotWatcher) open(id string) {
	if id != "" && !slices.Contains(w.pending, id) {
		w.pending = append(w.pending, id)
	}
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
		var ev copilotEvent
		if len(t) > maxDiagnosticText || json.Unmarshal([]byte(t), &ev) != nil {
			return pilot.Classification{}, false
		}
		if typ == "session.error" {
			return proved(copilotSessionError(ev.Data.ErrorType, ev.Data.Message, ev.Data.StatusCode))
		}
		return proved(copilotCallFailure(ev.Data.StatusCode, ev.Data.ErrorMessage, ev.Data.FailureKind))
	}
	return pilot.Classification{}, false
}

// copilotPhrases are copilot's own failure texts on stderr.
var copilotPhrases = []phrase{
	{word: "no authentication information found", class: pilot.FailProviderAuth},
	{word: "offline mode requires a local model provider", class: pilot.FailSpawn},
}

var _ pilot.PhaseWatcher = (*copilotWatcher)(nil)
