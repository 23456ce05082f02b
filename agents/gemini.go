package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/text"
	"github.com/pilotworkers/pilot/sandbox"
)

// RunnerGemini is the gemini runner's name, as providers files give it.
const RunnerGemini = "gemini"

// geminiProviders are the built-in providers of the gemini runner ([Providers]).
var geminiProviders = []pilot.Provider{{Name: "gemini", Runner: RunnerGemini, CredentialEnv: "GEMINI_API_KEY"}}

// GeminiRunner runs gemini-cli non-interactively:
//
//	gemini --output-format stream-json [--model M] --approval-mode MODE
//	       [--admin-policy FILE] [--resume ID] [Args...] --prompt=<prompt>
//
// The prompt is one --prompt= argument (a leading "-" is no flag; over
// 128 KiB it is refused). MODE is yolo for code, test and resume, plan for
// explore and review, with a policy file denying exit_plan_mode. README's
// "The agent CLIs" gives isolation (GEMINI_CLI_HOME), the key
// (GEMINI_API_KEY), resume and exit codes; geminiWatcher reads the stream.
type GeminiRunner struct{}

// Name implements Runner.
func (GeminiRunner) Name() string { return RunnerGemini }

// SandboxNeeds tells pilot's sandbox what the CLI needs (see pilot.Runner). gemini-cli keeps its
// settings, login, trusted folders and sessions in ~/.gemini, where "~" is
// GEMINI_CLI_HOME when set (an isolated worker's, in its run directory).
// Its default endpoint is the Gemini API; a Google login also reaches
// Code Assist and Google's OAuth endpoint. GOOGLE_GEMINI_BASE_URL in the
// provider's env moves the API.
func (GeminiRunner) SandboxNeeds(p pilot.Provider, home string) sandbox.Needs {
	n := sandbox.Needs{Connect: []string{"generativelanguage.googleapis.com:443", "cloudcode-pa.googleapis.com:443", "oauth2.googleapis.com:443"}}
	if hp, ok := endpointOf(p, "GOOGLE_GEMINI_BASE_URL"); ok {
		n.Connect = hp
	}
	if !isolated(p) {
		n.Own = []string{filepath.Join(userDir(p, home, "GEMINI_CLI_HOME", ""), ".gemini")}
		n.Write = n.Own
	}
	return n
}

// geminiMaxPrompt is the longest prompt gemini can take: Linux's limit on
// one argument (MAX_ARG_STRLEN, 128 KiB), less "--prompt=" and its NUL.
const geminiMaxPrompt = 128<<10 - len("--prompt=") - 1

// geminiReadOnlyPolicy keeps an explore or review worker in plan mode.
const geminiReadOnlyPolicy = `# Written by pilot for an explore or review task: the worker stays read-only.
# A non-interactive gemini may leave plan mode with exit_plan_mode, which
# then approves every tool (yolo); this admin-tier rule denies it.
[[rule]]
toolName = "exit_plan_mode"
decision = "deny"
priority = 100
denyMessage = "This task is read-only: stay in plan mode and report your findings as your answer."
`

// Command implements Runner.
func (GeminiRunner) Command(_ context.Context, a pilot.Attempt) (*pilot.Command, error) {
	p := a.Provider
	if len(a.Prompt) > geminiMaxPrompt {
		return nil, fmt.Errorf("the task prompt is %d bytes: gemini takes its prompt as one argument, and Linux limits one argument to %d bytes; shorten the task", len(a.Prompt), 128<<10)
	}
	argv := []string{program(p, RunnerGemini), "--output-format", "stream-json"}
	if p.Model != "" {
		argv = append(argv, "--model", p.Model)
	}
	switch a.Task.Mode {
	case pilot.ModeExplore, pilot.ModeReview:
		policy := filepath.Join(a.RunDir, "gemini-read-only.toml")
		if err := os.WriteFile(policy, []byte(geminiReadOnlyPolicy), 0o600); err != nil {
			return nil, fmt.Errorf("writing the read-only policy: %w", err)
		}
		argv = append(argv, "--approval-mode", "plan", "--admin-policy", policy)
	default:
		argv = append(argv, "--approval-mode", "yolo")
	}

	home, err := isolatedDir(a, "gemini-home")
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	if r := a.Task.Resume; r != "" {
		id := r
		if from, sid, ok := resumeFromStore(r); ok {
			if st, err := os.Stat(filepath.Join(from, ".gemini")); err != nil || !st.IsDir() {
				return nil, fmt.Errorf("cannot resume %q: %s holds no gemini home (was the run directory removed?)", r, from)
			}
			id, home = sid, from
		} else if home != "" {
			return nil, fmt.Errorf("provider %q is isolated, so gemini keeps each session in the run directory that made it; resume with that verdict's \"resume\" value (<run dir>/gemini-home/<session id>), not the bare session id %q", p.Name, r)
		}
		if err := checkResumeID(id); err != nil {
			return nil, err
		}
		if id == "latest" || strings.Trim(id, "0123456789") == "" {
			return nil, fmt.Errorf("%q is not a session id: gemini would read it as the latest session or a list index; resume with the \"resume\" value of the earlier run's verdict", id)
		}
		argv = append(argv, "--resume", id)
	}
	if home != "" {
		env["GEMINI_CLI_HOME"] = home
		env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
		if err := writeGeminiSettings(home, p); err != nil {
			return nil, err
		}
	}
	if p.BaseURL != "" {
		env["GOOGLE_GEMINI_BASE_URL"] = p.BaseURL
	}
	argv = append(argv, p.Args...)
	argv = append(argv, "--prompt="+a.Prompt)

	cmd := &pilot.Command{Argv: argv, Env: env, Watcher: &geminiWatcher{home: home}}
	if p.CredentialEnv != "" && p.CredentialEnv != "GEMINI_API_KEY" {
		cmd.SecretEnv = []string{"GEMINI_API_KEY"}
	}
	return cmd, nil
}

// geminiWatcher follows one gemini --output-format stream-json stream:
// init (the session id), message deltas, tool_use and tool_result (paired
// by tool_id; tool-running while any is open), error (severity warning is
// a notice) and result. Usage is the result's stats, cached tokens as cache
// reads; gemini reports no cost. Its stderr "Attempt N failed … Retrying"
// notices are retry loops with the silence they announce.
type geminiWatcher struct {
	streamWatch
	home string // the isolated gemini home, if any

	pending  []string             // tool_use ids without a tool_result
	answered bool                 // assistant text
	capped   bool                 // the turn limit was reported
	result   string               // the result event's status, once seen
	resLine  string               // the result event, when it reports an error
	resErr   pilot.Classification // what resLine's error proves
	resMsg   string               // its error message
	retried  bool                 // a retry notice was seen
	errLine  string               // the last error event of severity error
	errMsg   string               // its message
	skim     skim                 // the current event's fields
}

// message follows a message event: the user's prompt or a part of the
// assistant's answer.
func (w *geminiWatcher) message(assistant, text bool) {
	if assistant {
		w.retryOver() // the model answered
		if text {
			w.answered = true
		}
	}
	if len(w.pending) == 0 {
		w.setPhase(pilot.PhaseAwaitingModel, "stream:message", nil)
	}
}

// tool follows a tool_use (use) or tool_result event. id may alias the
// line: it is copied only when kept.
func (w *geminiWatcher) tool(use bool, id []byte) {
	open := func(p string) bool { return p == string(id) }
	if use {
		w.retryOver() // the model answered
		if len(id) > 0 && !slices.ContainsFunc(w.pending, open) {
			w.pending = append(w.pending, string(id))
		}
		w.setPhase(pilot.PhaseToolRunning, "stream:tool_use", w.pending)
		return
	}
	if i := slices.IndexFunc(w.pending, open); i >= 0 {
		w.pending = slices.Delete(w.pending, i, i+1)
	}
	if len(w.pending) > 0 {
		w.setPhase(pilot.PhaseToolRunning, "stream:tool_use", w.pending)
	} else {
		w.setPhase(pilot.PhaseAwaitingModel, "stream:tool_result", nil)
	}
}

// geminiEvent is the part of a stream-json event pilot reads.
type geminiEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	Role      string `json:"role"`
	Content   string `json:"content"`
	ToolID    string `json:"tool_id"`
	Severity  string `json:"severity"`
	Message   string `json:"message"`
	Status    string `json:"status"`
	Error     struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats *struct {
		InputTokens  *float64 `json:"input_tokens"`
		OutputTokens float64  `json:"output_tokens"`
		Cached       float64  `json:"cached"`
		Input        *float64 `json:"input"`
	} `json:"stats"`
}

// geminiTurnLimit reports whether a result error or error event names
// gemini's session turn limit.
func geminiTurnLimit(errType, message string) bool {
	switch errType {
	case "FatalTurnLimitedError", "MaxSessionTurnsError":
		return true
	}
	return message == "Maximum session turns exceeded"
}

// Line implements Watcher.
func (w *geminiWatcher) Line(l pilot.Line) {
	if l.Truncated {
		return
	}
	if l.Stream == pilot.Stderr {
		if d, ok := geminiRetryDelay(l.Data); ok {
			w.quiet(d)
			notice := string(l.Data)
			w.retried = true
			w.retrying(RunnerGemini+":stderr", notice, pilot.ClassifyProviderError(notice, 0))
		}
		return
	}
	if l.Stream != pilot.Stdout {
		return
	}
	if w.leading(l.Data) {
		return
	}
	if !isJSONObjectLine(l.Data) || !w.skim.object(l.Data) {
		return
	}
	// Messages and tool events, most of a stream, are read through skim,
	// only the fields they need; the others are decoded whole.
	typ, ok := w.skim.str("type")
	if !ok {
		return
	}
	switch string(typ) {
	case "message":
		role, rok := w.skim.str("role")
		content, cok := w.skim.str("content")
		if rok && cok {
			w.message(string(role) == "assistant", len(bytes.TrimSpace(content)) > 0)
		}
		return
	case "tool_use", "tool_result":
		if id, ok := w.skim.str("tool_id"); ok {
			w.tool(string(typ) == "tool_use", id)
		}
		return
	}
	var ev geminiEvent
	if json.Unmarshal(l.Data, &ev) != nil {
		return
	}
	if ev.Type == "result" {
		// Gemini settled its retries itself.
		w.retryOver()
	}
	switch ev.Type {
	case "init":
		if ev.SessionID != "" {
			w.sessionID = ev.SessionID
		}
		w.setPhase(pilot.PhaseAwaitingModel, "stream:init", nil)
	case "error":
		if ev.Severity == "error" {
			w.errLine = clip(string(l.Data), 2000)
			w.errMsg = ev.Message
		}
		if geminiTurnLimit("", ev.Message) {
			w.capped = true
		}
	case "result":
		w.result = ev.Status
		w.pending = nil
		if ev.Status == "success" {
			w.setPhase(pilot.PhaseFinished, "stream:result", nil)
		} else {
			w.resLine = clip(string(l.Data), 2000)
			w.resMsg, w.resErr = ev.Error.Message, geminiError(ev.Error.Type, ev.Error.Message)
			if ev.Error.Type == "" && ev.Error.Message == "" && w.errLine != "" {
				// An invalid stream ends in a bare status error; the
				// error event before it says what went wrong.
				w.resLine, w.resMsg = w.errLine, w.errMsg
				w.resErr, _ = geminiWords(w.errMsg)
			}
			if geminiTurnLimit(ev.Error.Type, "") {
				w.capped = true
			}
			w.setPhase(pilot.PhaseErrored, "stream:result", nil)
		}
		if s := ev.Stats; s != nil {
			u := &pilot.Usage{OutputTokens: int64(s.OutputTokens), CacheReadTokens: int64(s.Cached)}
			switch {
			case s.Input != nil:
				u.InputTokens = int64(*s.Input)
			case s.InputTokens != nil:
				u.InputTokens = max(int64(*s.InputTokens)-int64(s.Cached), 0)
			}
			w.usage = u
		}
	}
}

// leading follows a message or tool event from its leading members
// (geminiHead), without reading the rest of the line: such an event only
// moves the phase. It returns false, leaving the line to be read whole,
// when the line is not in that shape and for an assistant message until
// one had text (its text decides completed or empty).
func (w *geminiWatcher) leading(data []byte) bool {
	typ, v, ok := geminiHead(data)
	if !ok {
		return false
	}
	switch typ {
	case "message":
		assistant := string(v) == "assistant"
		if assistant && !w.answered {
			return false
		}
		w.message(assistant, false) // text or not: the answer is known
	case "tool_use", "tool_result":
		w.tool(typ == "tool_use", v)
	}
	return true
}

// geminiHead reads the type of a message or tool event and its role or
// tool_id from the leading members of the line, the way gemini writes
// them ({"type":"tool_use","timestamp":"…","tool_name":"…","tool_id":"…",…;
// {"type":"message","timestamp":"…","role":"user",…), in place, or
// wherever they are among the leading members. ok is false for another
// event, and when the role or tool_id is not plain text (plainText).
func geminiHead(data []byte) (typ string, v []byte, ok bool) {
	t, ok := leadingType(data)
	if !ok {
		return "", nil, false
	}
	rest := data[len(`{"type":"`)+len(t)+1:]
	switch string(t) {
	case "message":
		if v, ok = plainMembers(rest, "timestamp", "role"); !ok {
			v, ok = leadingString(data, "role")
		}
		return "message", v, ok
	case "tool_use":
		if v, ok = plainMembers(rest, "timestamp", "tool_name", "tool_id"); !ok {
			v, ok = leadingString(data, "tool_id")
		}
		return "tool_use", v, ok
	case "tool_result":
		if v, ok = plainMembers(rest, "timestamp", "tool_id"); !ok {
			v, ok = leadingString(data, "tool_id")
		}
		return "tool_result", v, ok
	}
	return "", nil, false
}

// Finish implements Watcher. After an API error gemini exits with the HTTP
// status (process.exit(429)), truncated to 8 bits, so a 400 to 415 looks
// like a signal (144 to 159): when a result reported the error, it decides.
func (w *geminiWatcher) Finish(e pilot.Exit) pilot.Result {
	if w.home != "" && w.sessionID != "" {
		w.resume = filepath.Join(w.home, w.sessionID)
	}
	if w.ended(e) {
		return w.session(pilot.JudgeExit(e))
	}
	switch {
	case w.capped || e.Code == geminiTurnLimitExit:
		return w.session(pilot.Result{Outcome: pilot.StepCappedPartial})
	case w.result == "success":
		if w.answered {
			return w.session(pilot.Result{Outcome: pilot.Completed})
		}
		return w.session(pilot.Result{Outcome: pilot.Empty})
	case w.result != "":
		// gemini's own report of the error decides when it proves a
		// class. Its stderr often carries the same error ("Error when
		// talking to Gemini API ... {...}"), and stdout and stderr are
		// read apart, so which of the two came last, the Dispatcher's
		// pick, is timing (seen in e2e runs: a context overflow's
		// evidence came from either stream).
		e = w.perMinute(streamDiagnostic(e, RunnerGemini, w.resErr), w.resMsg)
		if d := e.Diagnostic; d == nil || d.Evidence == "" {
			if r, ok := geminiExit(e); ok {
				return w.session(r)
			}
		}
		return w.session(reportedFailure(e, RunnerGemini, w.resLine))
	case e.Code != 0:
		if r, ok := geminiExit(e); ok {
			return w.session(r)
		}
		return w.session(pilot.JudgeExit(w.perMinute(e, "")))
	}
	return w.session(incomplete(RunnerGemini, "a result event"))
}

// geminiExit judges an exit code with a documented meaning
// (geminiExitClass), the exit itself the evidence.
func geminiExit(e pilot.Exit) (pilot.Result, bool) {
	class, ok := geminiExitClass(e.Code)
	if !ok {
		return pilot.JudgeExit(e), false
	}
	r := failed(class, RunnerGemini+":exit", "exit status "+strconv.Itoa(e.Code))
	r.DecidedBy = "exit-code"
	return r, true
}

// geminiRetryDelay reads how long gemini will be silent from its retry
// notice on stderr (packages/core/src/utils/retry.ts, which writes it with
// debugLogger.warn):
//
//   - a rate limit with a delay: "Attempt 2 failed: <message>. Retrying
//     after 5123ms...": that delay;
//   - any other error it retries (a 5xx, a refused connection, a 429 with
//     no delay): "Attempt N failed with status 500. Retrying with
//     backoff...", "Attempt N failed. Retrying with backoff...": no delay
//     is printed, so the longest gemini may wait after attempt N,
//     [geminiBackoff].
//
// Without it pilot would take gemini's silent backoff for a stalled model
// (seen in an e2e run of gemini-cli 0.61.0 against fakellm: a 500, then
// 5 s of silence, ended as session-stall under a 3 s ModelStall).
func geminiRetryDelay(line []byte) (time.Duration, bool) {
	const mark = "Retrying after "
	if i := bytes.LastIndex(line, []byte(mark)); i >= 0 {
		ms, rest, ok := leadingInt(line[i+len(mark):])
		if !ok || !bytes.HasPrefix(rest, []byte("ms")) {
			return 0, false
		}
		return time.Duration(ms) * time.Millisecond, true
	}
	rest, ok := bytes.CutPrefix(bytes.TrimLeft(line, " \t"), []byte("Attempt "))
	if !ok || !bytes.Contains(rest, []byte("Retrying with backoff")) {
		return 0, false
	}
	n, rest, ok := leadingInt(rest)
	if !ok || n < 1 || !bytes.HasPrefix(rest, []byte(" failed")) {
		return 0, false
	}
	return geminiBackoff(n), true
}

// leadingInt reads the decimal number (at most 10 digits) that b starts
// with, and what follows it.
func leadingInt(b []byte) (int, []byte, bool) {
	n := 0
	for n < len(b) && n < 10 && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n == 0 || (n < len(b) && b[n] >= '0' && b[n] <= '9') {
		return 0, nil, false
	}
	v, err := strconv.Atoi(string(b[:n]))
	if err != nil {
		return 0, nil, false
	}
	return v, b[n:], true
}

// geminiBackoff is the longest gemini-cli waits after its attempt n failed
// with an error it retries with backoff: retry.ts's DEFAULT_RETRY_OPTIONS
// start at 5 s and double up to 30 s, and each wait has ±30% jitter.
func geminiBackoff(n int) time.Duration {
	const initial, most = 5 * time.Second, 30 * time.Second
	d := initial
	for i := 1; i < n && d < most; i++ {
		d *= 2
	}
	return min(d, most) * 13 / 10
}

// ended is [ended] for gemini, which exits with an API error's HTTP status
// (truncated to 8 bits): once a result event has reported the error, an
// exit code of 144 to 159 is a 400 to 415, not a signal.
func (w *geminiWatcher) ended(e pilot.Exit) bool {
	if !e.Started || e.Terminated || e.Signal != 0 {
		return true
	}
	if w.result == "error" && e.Code >= 144 && e.Code <= 159 {
		return false
	}
	return ended(e)
}

var _ pilot.PhaseWatcher = (*geminiWatcher)(nil)

// geminiSettings is the settings.json pilot writes into a fresh isolated
// gemini home: authenticate with the API key from the environment (with
// GOOGLE_GEMINI_BASE_URL set and no auth type chosen, gemini 0.61 picks
// its "gateway" auth and refuses it: "Invalid auth method selected.", exit
// 41), and send no usage statistics (without this, gemini reaches for its
// statistics service at start-up).
const geminiSettings = `{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false}}` + "\n"

// writeGeminiSettings writes home/.gemini/settings.json for a provider with
// an API key, unless the home already has one (a resumed store).
func writeGeminiSettings(home string, p pilot.Provider) error {
	if p.CredentialEnv == "" {
		return nil
	}
	dir := filepath.Join(home, ".gemini")
	path := filepath.Join(dir, "settings.json")
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the gemini home: %w", err)
	}
	if err := os.WriteFile(path, []byte(geminiSettings), 0o600); err != nil {
		return fmt.Errorf("writing the gemini settings: %w", err)
	}
	return nil
}

// Diagnose is pilot.Watcher's optional Diagnose: a stderr line in gemini-cli's
// words or any API's, the error of a result with status error, and the
// message of an error event with severity error.
func (w *geminiWatcher) Diagnose(s pilot.Stream, line string) (pilot.Classification, bool) {
	switch s {
	case pilot.Stderr:
		return geminiWords(line)
	case pilot.Stdout:
		if t, ok := eventLine(line); ok {
			return proved(geminiEventError(t))
		}
	}
	return pilot.Classification{}, false
}

// geminiPhrases are gemini-cli's own words for a quota: its error names
// for a per-minute quota it retries and one it does not, and the texts it
// gives a quota that lasts (per day, or the plan's capacity).
var geminiPhrases = []phrase{
	{word: "retryablequotaerror", class: pilot.FailProviderRateLimit},
	{word: "terminalquotaerror", class: pilot.FailProviderQuota},
	{word: "exhausted your daily quota", class: pilot.FailProviderQuota},
	{word: "exhausted your capacity on this model", class: pilot.FailProviderQuota},
}

// geminiWords classifies text in gemini-cli's words and the APIs'.
func geminiWords(text string) (pilot.Classification, bool) {
	return ownWords(text, geminiPhrases)
}

// geminiTerminated is gemini-cli's result error when the model's answer
// broke off mid-stream: undici's fetch reports a response body cut short
// (the server closed the connection: "other side closed") as "terminated",
// which gemini does not retry and wraps as an API error. A request that
// never connects fails earlier, as "fetch failed". Seen in an e2e run of
// gemini-cli 0.61.0 against fakellm (testdata/gemini/stream/
// e2e-stream-terminated).
const geminiTerminated = "[API Error: terminated]"

// geminiError classifies a result's error: its message, else its type.
func geminiError(typ, msg string) pilot.Classification {
	if strings.TrimSpace(msg) == geminiTerminated {
		return classified(pilot.FailProviderStreamDisconnect, msg, "model response stream terminated")
	}
	if c, ok := geminiWords(msg); ok {
		return geminiPerMinute(c, msg, "")
	}
	c, _ := geminiWords(typ)
	return c
}

// geminiEventError classifies a result with status error and an error
// event with severity error.
func geminiEventError(line string) pilot.Classification {
	// Both hold the string "error" (a result's status, an error event's
	// type and severity): a line without it is not decoded (most lines
	// are messages and tool events).
	if typ, ok := leadingType(line); ok && typ != "result" && typ != "error" || !strings.Contains(line, `"error"`) {
		return pilot.Classification{}
	}
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
		return pilot.Classification{}
	}
	switch {
	case ev.Type == "result" && ev.Status == "error":
		return geminiError(ev.Error.Type, ev.Error.Message)
	case ev.Type == "error" && ev.Severity == "error":
		c, _ := geminiWords(ev.Message)
		return c
	}
	return pilot.Classification{}
}

// perMinute returns e with its diagnostic a rate limit when it is a quota
// that gemini-cli's signs show to be a per-minute one (geminiPerMinute):
// exit 173 (429 mod 256: gemini exits with an API error's status), or a
// retry notice (gemini retries 429s and 5xx only). msg is the error's
// whole message.
func (w *geminiWatcher) perMinute(e pilot.Exit, msg string) pilot.Exit {
	if e.Diagnostic == nil {
		return e
	}
	sign := ""
	switch {
	case e.Code == geminiRateLimitExit:
		sign = "exit 173, HTTP 429"
	case w.retried:
		sign = "gemini-cli retried it"
	}
	c := geminiPerMinute(*e.Diagnostic, msg, sign)
	e.Diagnostic = &c
	return e
}

// geminiPerMinute returns c as a rate limit when it is a quota with a sign
// of a per-minute one: the Gemini API answers both kinds with 429
// RESOURCE_EXHAUSTED and words both as a quota ("Resource has been
// exhausted (e.g. check quota)", "You exceeded your current quota, …
// Please retry in 1.0s"), and gemini reports the error without its
// status. The signs are sign (the caller's, "" for none) and a suggested
// delay in msg, the error's whole message, which becomes RetryAfter. A
// quota that lasts reads differently (geminiPhrases) and is never retried.
func geminiPerMinute(c pilot.Classification, msg, sign string) pilot.Classification {
	if c.Class != pilot.FailProviderQuota {
		return c
	}
	m := text.Matching(c.Evidence + "\n" + msg)
	delay := geminiSuggestedDelay(m)
	switch {
	case reGeminiLasting.MatchString(m):
		return c
	case delay > 0:
		sign = "a suggested retry delay"
	case sign == "":
		return c
	}
	c.Class, c.TransportConfirmed, c.Note = pilot.FailProviderRateLimit, true, "a per-minute quota: "+sign
	if delay > 0 {
		c.RetryAfter = delay
	}
	return c
}

// geminiRateLimitExit is gemini-cli's exit with an API error's status,
// 429 mod 256.
const geminiRateLimitExit = 429 % 256

var (
	reGeminiLasting = regexp.MustCompile(`daily|per day|perday|capacity|quota will reset|terminalquotaerror`)
	reGeminiDelay   = regexp.MustCompile(`(?:suggested retry after|please retry in) (\d+(?:\.\d+)?)s\b`)
)

// geminiSuggestedDelay reads the delay the API suggests in m ("Suggested
// retry after 1s.", "Please retry in 41.2s."), or 0.
func geminiSuggestedDelay(m string) time.Duration {
	g := reGeminiDelay.FindStringSubmatch(m)
	if g == nil {
		return 0
	}
	secs, err := strconv.ParseFloat(g[1], 64)
	if err != nil || secs <= 0 || secs > 24*3600 {
		return 0
	}
	return time.Duration(secs * float64(time.Second))
}

// ---- gemini-cli's exit codes ----

// geminiExitClass is the class of a gemini-cli exit code that means
// something by itself. gemini-cli documents its codes (packages/core/src/utils/exitCodes.ts,
// docs/cli/headless.md):
//
//	41  auth (FatalAuthenticationError)       → provider-auth
//	42  input                                 → spawn-failed
//	44  sandbox                               → spawn-failed
//	52  config                                → spawn-failed
//	53  turn limit (MaxSessionTurnsError)     → ok=false: a step cap, see geminiTurnLimitExit
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
func geminiExitClass(code int) (pilot.FailureClass, bool) {
	switch code {
	case 41:
		return pilot.FailProviderAuth, true
	case 42, 44, 52, 55:
		return pilot.FailSpawn, true
	}
	return "", false
}

// geminiTurnLimitExit is gemini-cli's exit at its own turn limit
// (MaxSessionTurnsError): a step cap, not a failure.
const geminiTurnLimitExit = 53
