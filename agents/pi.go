package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/jsonskim"
	"github.com/pilotworkers/pilot/sandbox"
)

// RunnerPi is the pi runner's name, as providers files give it.
const RunnerPi = "pi"

// piProviders are the built-in providers of the pi runner ([Providers]).
var piProviders = []pilot.Provider{{Name: "pi", Runner: RunnerPi}}

// PiRunner runs the pi coding agent in print mode with its JSON event
// stream, one prompt per worker, the prompt on stdin (pi would read an
// argument starting with "-" or "@" as a flag or a file):
//
//	pi -p --mode json --session FILE [--provider pilot] [--model MODEL]
//	   [--tools read,grep,find,ls] [Provider.Args...]   < prompt
//
// Explore and review get the read-only tools; the other modes keep pi's
// defaults. README's "The agent CLIs" says how it isolates the agent dir,
// where the key comes from, how sessions resume and what its exits mean;
// piWatcher says how the stream is read.
type PiRunner struct{}

// Name implements Runner.
func (PiRunner) Name() string { return RunnerPi }

// SandboxNeeds tells pilot's sandbox what the CLI needs (see pilot.Runner). pi keeps its settings,
// logins (auth.json), models, sessions and the helpers it downloads in its
// agent dir, ~/.pi/agent, which PI_CODING_AGENT_DIR moves (an isolated
// worker's is in its run directory). Its model provider comes from its
// settings; the default is Anthropic's API.
func (PiRunner) SandboxNeeds(p pilot.Provider, home string) sandbox.Needs {
	n := sandbox.Needs{Connect: []string{"api.anthropic.com:443"}}
	switch {
	case isolated(p):
	case filepath.IsAbs(p.Env["PI_CODING_AGENT_DIR"]):
		n.Own = []string{filepath.Clean(p.Env["PI_CODING_AGENT_DIR"])}
		n.Write = n.Own
	default:
		n.Own = []string{filepath.Join(home, ".pi")}
		n.Write = []string{filepath.Join(home, ".pi", "agent")}
	}
	return n
}

// PiProviderName is the name of the provider pilot writes into a pi
// worker's models.json for a Provider with a BaseURL.
const PiProviderName = "pilot"

// piReadOnlyTools are pi's read-only built-in tools, for explore and review.
const piReadOnlyTools = "read,grep,find,ls"

// piNoCredential is the apiKey pilot writes for an endpoint that needs no
// credential: pi requires one, and resolves a value that names no
// environment variable to itself.
const piNoCredential = "pilot-no-credential"

// Command implements Runner.
func (PiRunner) Command(_ context.Context, a pilot.Attempt) (*pilot.Command, error) {
	p := a.Provider
	if p.BaseURL != "" && p.Model == "" {
		return nil, fmt.Errorf("provider %q has a base_url but no model: set \"model\" to the model id the endpoint serves", p.Name)
	}
	if strings.TrimSpace(a.Prompt) == "" {
		return nil, errors.New("the prompt is empty: pi reads a blank prompt as no prompt and does nothing")
	}
	session := a.SessionPath
	if a.Task.Resume != "" {
		var err error
		if session, err = piResumePath(a.Task.Resume); err != nil {
			return nil, err
		}
	}
	if session == "" {
		return nil, errors.New("the attempt has no session path for pi's --session")
	}
	session, err := filepath.Abs(session)
	if err != nil {
		return nil, fmt.Errorf("pi session path: %w", err)
	}

	argv := []string{program(p, RunnerPi), "-p", "--mode", "json", "--session", session}
	env := map[string]string{"PERSISTENT_STORE": "jsonl"}
	if _, ok := p.Env["PI_OFFLINE"]; !ok {
		env["PI_OFFLINE"] = "1"
	}
	dir, err := isolatedDir(a, "pi-agent")
	if err != nil {
		return nil, err
	}
	if dir != "" {
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, fmt.Errorf("pi agent dir: %w", err)
		}
		env["PI_CODING_AGENT_DIR"] = dir
	}
	switch {
	case p.BaseURL != "":
		if err := writePiModels(dir, p); err != nil {
			return nil, err
		}
		argv = append(argv, "--provider", PiProviderName, "--model", p.Model)
	case p.Model != "":
		argv = append(argv, "--model", p.Model)
	}
	switch a.Task.Mode {
	case pilot.ModeExplore, pilot.ModeReview:
		argv = append(argv, "--tools", piReadOnlyTools)
	}
	argv = append(argv, p.Args...)
	return &pilot.Command{
		Argv:        argv,
		Env:         env,
		Stdin:       []byte(a.Prompt),
		Watcher:     &piWatcher{path: session},
		SessionPath: session,
		ReadSession: ReadPiSession(session),
	}, nil
}

// piResumePath checks that resume names an existing pi session file and
// returns its absolute path.
func piResumePath(resume string) (string, error) {
	path, err := filepath.Abs(resume)
	if err != nil {
		return "", fmt.Errorf("pi resume path: %w", err)
	}
	st, err := os.Stat(path)
	switch {
	case err != nil && !strings.ContainsAny(resume, `/\`) && !strings.HasSuffix(resume, ".jsonl"):
		return "", fmt.Errorf("cannot resume %q: pi resumes a session from its session file, not an id: set Task.Resume to the earlier verdict's \"resume\" value, which for pi is the session file's path", resume)
	case err != nil:
		return "", fmt.Errorf("cannot resume: no pi session file at %s (pi writes it once the model first answered)", path)
	case !st.Mode().IsRegular():
		return "", fmt.Errorf("cannot resume: %s is not a file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cannot resume: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", fmt.Errorf("cannot resume: reading %s: %w", path, err)
	}
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	var h struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}
	if json.Unmarshal(bytes.TrimSuffix(line, []byte("\r")), &h) != nil || h.Type != "session" || h.ID == "" {
		return "", fmt.Errorf("cannot resume: %s is not a pi session file (its first line is not a session header)", path)
	}
	return path, nil
}

// writePiModels writes dir/models.json declaring p's endpoint as the
// provider "pilot". The credential is referenced by its variable's name.
func writePiModels(dir string, p pilot.Provider) error {
	key := p.CredentialEnv
	if key == "" {
		key = piNoCredential
	}
	type model struct {
		ID string `json:"id"`
	}
	type provider struct {
		BaseURL string  `json:"baseUrl"`
		API     string  `json:"api"`
		APIKey  string  `json:"apiKey"`
		Models  []model `json:"models"`
	}
	data, err := json.MarshalIndent(map[string]any{
		"providers": map[string]provider{
			PiProviderName: {BaseURL: p.BaseURL, API: "openai-completions", APIKey: key, Models: []model{{ID: p.Model}}},
		},
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "models.json"), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing pi's models.json: %w", err)
	}
	return nil
}

// piSessionGone begins what pi prints on stderr when the session it was
// asked to resume (by id) does not exist.
const piSessionGone = "No session found matching"

// piWatcher follows one pi worker's --mode json stream, both generations
// of it (whole-message message_update events up to 0.80, deltas from 0.84).
// The last assistant message (message_end, turn_end, or agent_end's
// messages) is the answer and its stopReason the outcome; a call pi retries
// (auto_retry_start) is not, the retry's message is. The session id is the
// header line; usage sums the assistant messages, cost.total as CostUSD.
type piWatcher struct {
	streamWatch
	path string // the session file, the Result's Resume

	header  bool     // the session header was seen
	pending []string // tool calls asked for or started, not yet ended

	last *piFinal // the last assistant message
	// done: the stream said the run ended (agent_end without a retry
	// coming, agent_settled, or auto_retry_end with success false) and
	// nothing started since.
	done        bool
	retryFailed bool
	finalError  string // auto_retry_end's finalError

	objs  [4][]jsonskim.Member // object's buffers, by depth
	elems [2][][]byte          // agent_end's messages, a message's content blocks
}

// piFinal is what the watcher keeps of an assistant message.
type piFinal struct {
	stopReason   string
	errorMessage string
	text         bool // it holds non-blank text
	// truncated: the message's line was longer than pilot reads, so
	// nothing but its role is known.
	truncated bool
}

// Line implements Watcher.
func (w *piWatcher) Line(l pilot.Line) {
	if l.Stream == pilot.Stderr && !l.Truncated {
		w.noteGone(l.Data, piSessionGone)
	}
	if l.Stream != pilot.Stdout {
		return
	}
	data := bytes.TrimSpace(l.Data)
	if len(data) == 0 || data[0] != '{' {
		return
	}
	lead, ok := leadingType(data)
	typ := piEventType(lead)
	if l.Truncated {
		if ok {
			w.truncatedEvent(typ, data)
		}
		return
	}
	switch typ {
	case "message_update", "tool_execution_update", "bash_execution_update", "queue_update":
		// Large and frequent (pi up to 0.80 repeats the whole message on
		// every message_update): the type says all the watcher needs.
		w.event(typ, nil)
		return
	}
	if ok && w.leading(data) {
		return
	}
	// An event the verdict rests on counts only as valid JSON (Members
	// checks the structure, not every literal): when its leading type
	// says so, its members and its validity are read in one pass.
	var f piFields
	if piDecisive(typ) {
		f, ok = w.validObject(data)
	} else {
		f, ok = w.object(0, data)
	}
	if !ok {
		return
	}
	if typ == "" {
		typ = piString(f.get("type"))
		if piDecisive(typ) && !jsonskim.Valid(data) {
			return
		}
	}
	w.event(typ, f)
}

// leading follows an event that only moves the phase from its leading
// members (piHead), without reading the rest of the line: a message's
// start, the end of a user's message or of a tool result, a tool's start
// or end. It returns false, leaving the line to be read whole, for the
// end of an assistant message (how it ended decides the verdict), for any
// other event, and for a line not in that shape.
func (w *piWatcher) leading(data []byte) bool {
	typ, role, id, ok := piHead(data)
	if !ok {
		return false
	}
	switch typ {
	case "message_start", "message_end":
		if typ == "message_end" && string(role) == "assistant" {
			return false
		}
		w.messageEdge(typ, role, id)
	case "tool_execution_start":
		w.toolStarted(id)
	case "tool_execution_end":
		w.toolEnded(id, "stream:tool_execution_end")
	}
	return true
}

// piHead reads, from the leading members of an event line as pi writes
// them, what the watcher needs of the events that only move the phase: a
// message_start's or message_end's role, and a tool result's toolCallId
// at its end ({"type":"message_end","message":{"role":"toolResult",
// "toolCallId":"…",…); a tool_execution_start's or _end's toolCallId
// ({"type":"tool_execution_start","toolCallId":"…",…). It reads them in
// place, or wherever they are among the leading members of the event and
// of its message. ok is false for another event and when a value is not
// plain text (plainText).
func piHead(data []byte) (typ string, role, id []byte, ok bool) {
	t, ok := leadingType(data)
	if !ok {
		return "", nil, nil, false
	}
	typ = piEventType(t)
	rest := data[len(`{"type":"`)+len(t)+1:]
	switch typ {
	case "message_start", "message_end":
		// The message, from its brace, and in place what follows its
		// role.
		msg, inPlace := bytes.CutPrefix(rest, []byte(`,"message":`))
		var after []byte
		if inPlace {
			var r []byte
			if r, inPlace = bytes.CutPrefix(msg, []byte(`{"role":"`)); inPlace {
				role, after, inPlace = cutPlain(r, "")
			}
		}
		if !inPlace {
			if msg, ok = leadingObject(data, "message"); !ok {
				return "", nil, nil, false
			}
			if role, ok = leadingString(msg, "role"); !ok {
				return "", nil, nil, false
			}
		}
		if typ == "message_start" || string(role) != "toolResult" {
			return typ, role, nil, true
		}
		if id, ok = plainMembers(after, "toolCallId"); !ok {
			id, ok = leadingString(msg, "toolCallId")
		}
		return typ, role, id, ok
	case "tool_execution_start", "tool_execution_end":
		if id, ok = plainMembers(rest, "toolCallId"); !ok {
			id, ok = leadingString(data, "toolCallId")
		}
		return typ, nil, id, ok
	}
	return "", nil, nil, false
}

// piEvents are the event types pi writes, the most frequent first, and
// piReasons their phase reasons ("stream:" and the type).
var (
	piEvents = [...]string{"message_update", "tool_execution_update", "message_start", "message_end",
		"tool_execution_start", "tool_execution_end", "turn_start", "turn_end", "agent_start", "agent_end",
		"agent_settled", "session", "auto_retry_start", "auto_retry_end", "auto_compaction_start",
		"auto_compaction_end", "compaction_start", "compaction_end", "bash_execution_update", "queue_update"}
	piReasons = func() (r [len(piEvents)]string) {
		for i, t := range piEvents {
			r[i] = "stream:" + t
		}
		return r
	}()
)

// piEventType returns an event type as a string, without allocating for
// the ones pi writes.
func piEventType(b []byte) string {
	for _, t := range piEvents {
		if string(b) == t {
			return t
		}
	}
	return string(b)
}

// piReason returns the phase reason of an event of type typ, without
// allocating for the ones pi writes.
func piReason(typ string) string {
	for i, t := range piEvents {
		if typ == t {
			return piReasons[i]
		}
	}
	return "stream:" + typ
}

// piDecisive reports whether the verdict may rest on an event of type
// typ: how the last message and the agent ended, and pi's own retries.
func piDecisive(typ string) bool {
	switch typ {
	case "message_end", "agent_end", "auto_retry_start", "auto_retry_end":
		return true
	}
	return false
}

// event handles one stream event; f is nil for events whose body is not
// read.
func (w *piWatcher) event(typ string, f piFields) {
	reason := piReason(typ)
	switch typ {
	case "auto_retry_end":
		// pi ends its retries with auto_retry_end right after the first
		// message without an error, or gives up.
		w.retryOver()
	}
	switch typ {
	case "session":
		if !w.header {
			w.header = true
			if id := piString(f.get("id")); id != "" {
				w.sessionID, w.resume = id, w.path
			}
		}
	case "agent_start":
		w.done, w.retryFailed, w.finalError = false, false, ""
		w.quiet(0)
		w.pending = nil
		w.setPhase(pilot.PhaseAwaitingModel, reason, nil)
	case "turn_start", "message_update", "auto_compaction_start", "compaction_start":
		w.pending = nil
		w.setPhase(pilot.PhaseAwaitingModel, reason, nil)
	case "message_start", "message_end":
		m, ok := w.object(1, f.get("message"))
		if !ok {
			return
		}
		role := piText(m.get("role"))
		if typ == "message_start" || string(role) != "assistant" {
			var id []byte
			if typ == "message_end" && string(role) == "toolResult" {
				id = piText(m.get("toolCallId"))
			}
			w.messageEdge(typ, role, id)
			return
		}
		fin, ids := w.final(m, true, true)
		w.last = &fin
		w.addUsage(m.get("usage"))
		w.pending = nil
		if fin.stopReason != "error" && fin.stopReason != "aborted" {
			w.pending = ids
		}
		w.afterAssistant(reason)
	case "turn_end":
		if m, ok := w.object(1, f.get("message")); ok && string(piText(m.get("role"))) == "assistant" {
			fin, _ := w.final(m, false, false)
			w.last = &fin
		}
	case "tool_execution_start":
		w.toolStarted(piText(f.get("toolCallId")))
	case "tool_execution_update":
		w.setPhase(pilot.PhaseToolRunning, reason, w.pending)
	case "tool_execution_end":
		w.toolEnded(piText(f.get("toolCallId")), reason)
	case "agent_end":
		// The line is valid JSON (piDecisive): its messages, when an
		// array, are one that decodes.
		if raw := f.get("messages"); len(raw) > 0 && raw[0] == '[' {
			w.elems[0], _ = jsonskim.Elements(w.elems[0][:0], raw)
			msgs := w.elems[0]
			for i := len(msgs) - 1; i >= 0; i-- {
				if m, ok := w.object(1, msgs[i]); ok && string(piText(m.get("role"))) == "assistant" {
					fin, _ := w.final(m, true, false)
					w.last = &fin
					break
				}
			}
		}
		retry, _ := piBool(f.get("willRetry"))
		w.done = !retry
		w.pending = nil
		w.setPhase(w.endPhase(), reason, nil)
	case "agent_settled":
		w.done = true
		w.pending = nil
		w.setPhase(w.endPhase(), reason, nil)
	case "auto_retry_start":
		// The last error is not final: pi calls the model again after
		// delayMs, and that call's message is the outcome.
		w.done = false
		if msg := piString(f.get("errorMessage")); msg != "" {
			w.retrying(RunnerPi+":stdout", msg, piCallError(msg))
		} else {
			w.retrying(RunnerPi+":stdout", "auto_retry_start", pilot.Classification{Class: pilot.FailGeneric})
		}
		if ms, ok := piFloat(f.get("delayMs")); ok && ms > 0 && ms < float64(24*time.Hour/time.Millisecond) {
			w.quiet(time.Duration(ms * float64(time.Millisecond)))
		}
		w.setPhase(pilot.PhaseAwaitingModel, reason, nil)
	case "auto_retry_end":
		if ok, _ := piBool(f.get("success")); !ok {
			w.retryFailed, w.done = true, true
			w.finalError = piString(f.get("finalError"))
			w.quiet(0)
			w.setPhase(pilot.PhaseErrored, reason, nil)
		}
	case "auto_compaction_end", "compaction_end":
		if retry, _ := piBool(f.get("willRetry")); retry {
			w.done = false
			w.setPhase(pilot.PhaseAwaitingModel, reason, nil)
			return
		}
		w.setPhase(w.endPhase(), reason, nil)
	}
}

// messageEdge follows the start of a message, or the end of one that is
// not the assistant's: role is the message's, id a tool result's
// toolCallId at its end.
func (w *piWatcher) messageEdge(typ string, role, id []byte) {
	reason := piReason(typ)
	switch string(role) {
	case "assistant": // its start
		w.setPhase(pilot.PhaseAwaitingModel, reason, nil)
	case "toolResult":
		if typ == "message_end" {
			w.toolEnded(id, reason)
		}
	case "user":
		w.pending = nil
		w.setPhase(pilot.PhaseAwaitingModel, reason, nil)
	}
}

// toolStarted records the start of tool call id (a tool_execution_start):
// the model answered.
func (w *piWatcher) toolStarted(id []byte) {
	w.retryOver()
	if len(id) > 0 && !slices.ContainsFunc(w.pending, func(p string) bool { return p == string(id) }) {
		w.pending = append(w.pending, string(id))
	}
	w.setPhase(pilot.PhaseToolRunning, "stream:tool_execution_start", w.pending)
}

// truncatedEvent handles an event whose line pilot holds only the start of.
func (w *piWatcher) truncatedEvent(typ string, prefix []byte) {
	switch typ {
	case "message_end":
		// The role is the message's first key.
		switch {
		case bytes.HasPrefix(prefix, []byte(`{"type":"message_end","message":{"role":"assistant"`)):
			w.last = &piFinal{truncated: true}
			w.pending = nil
			w.setPhase(pilot.PhaseUnknown, "stream:message_end-too-long", nil)
		case bytes.HasPrefix(prefix, []byte(`{"type":"message_end","message":{"role":"toolResult"`)):
			if id, ok := piPrefixString(prefix, "toolCallId"); ok {
				w.toolEnded([]byte(id), "stream:message_end")
			}
		}
	case "agent_end":
		// willRetry, after the messages, is lost: a retry shows itself
		// by the events that follow.
		w.done = true
		w.pending = nil
		w.setPhase(w.endPhase(), "stream:agent_end", nil)
	case "message_update", "tool_execution_update":
		w.event(typ, nil)
	case "tool_execution_end":
		// {"type":"tool_execution_end","toolCallId":"…",…: the id comes
		// before the (large) result.
		if id, ok := piPrefixString(prefix, "toolCallId"); ok {
			w.toolEnded([]byte(id), "stream:tool_execution_end")
		}
	}
}

// piPrefixString returns the string value of key in the first part of a
// line pilot holds only the start of, when it is there and plain.
func piPrefixString(prefix []byte, key string) (string, bool) {
	if len(prefix) > 512 {
		prefix = prefix[:512]
	}
	_, rest, ok := bytes.Cut(prefix, []byte(`"`+key+`":"`))
	if !ok {
		return "", false
	}
	i := bytes.IndexByte(rest, '"')
	if i <= 0 || bytes.IndexByte(rest[:i], '\\') >= 0 {
		return "", false
	}
	return string(rest[:i]), true
}

// afterAssistant sets the phase an assistant message_end leaves.
func (w *piWatcher) afterAssistant(reason string) {
	if len(w.pending) > 0 {
		w.setPhase(pilot.PhaseToolRunning, reason, w.pending)
		return
	}
	w.setPhase(w.endPhase(), reason, nil)
}

// toolEnded records the end of tool call id.
func (w *piWatcher) toolEnded(id []byte, reason string) {
	if i := slices.IndexFunc(w.pending, func(p string) bool { return p == string(id) }); i >= 0 {
		w.pending = slices.Delete(w.pending, i, i+1)
	}
	if len(w.pending) > 0 {
		w.setPhase(pilot.PhaseToolRunning, reason, w.pending)
		return
	}
	w.setPhase(pilot.PhaseAwaitingModel, reason, nil)
}

// endPhase is the phase of a run whose last model call ended.
func (w *piWatcher) endPhase() pilot.SessionPhase {
	if w.last != nil && (w.last.stopReason == "error" || w.last.stopReason == "aborted") {
		return pilot.PhaseErrored
	}
	if w.last != nil && w.last.truncated {
		return pilot.PhaseUnknown
	}
	return pilot.PhaseFinished
}

// Reports is the usage method of pilot.Watcher: every assistant message (one model
// call) carries its tokens and cost as the run goes.
func (w *piWatcher) Reports() (tokens, cost bool) { return true, true }

// addUsage adds one assistant message's usage (one model call) to the
// run's.
func (w *piWatcher) addUsage(raw json.RawMessage) {
	u, ok := w.object(2, raw)
	if !ok {
		return
	}
	if w.usage == nil {
		w.usage = &pilot.Usage{}
	}
	add := func(dst *int64, key string) {
		if n, ok := piFloat(u.get(key)); ok && n > 0 && n < 1<<53 {
			*dst += int64(n)
		}
	}
	add(&w.usage.InputTokens, "input")
	add(&w.usage.OutputTokens, "output")
	add(&w.usage.CacheReadTokens, "cacheRead")
	add(&w.usage.CacheWriteTokens, "cacheWrite")
	if c, ok := w.object(3, u.get("cost")); ok {
		if total, ok := piFloat(c.get("total")); ok {
			if w.usage.CostUSD == nil {
				w.usage.CostUSD = new(float64)
			}
			*w.usage.CostUSD += total
		}
	}
}

// Finish implements Watcher. In JSON mode pi exits 0 even when the model
// call failed, so the last assistant message decides, not the exit status.
func (w *piWatcher) Finish(e pilot.Exit) pilot.Result {
	last := w.last
	switch {
	case ended(e):
		return w.session(pilot.JudgeExit(e))
	case last == nil && e.Code != 0:
		// pi's pre-flight errors ("No API key found", "No models
		// available") go to stderr before any model call.
		return w.session(pilot.JudgeExit(e))
	case last == nil:
		return w.session(incomplete(RunnerPi, "a final assistant message"))
	case last.truncated:
		return w.session(failed(pilot.FailGeneric, RunnerPi+":stdout",
			"pi's last assistant message is longer than the Dispatcher's MaxLineBytes: pilot cannot read how it ended"))
	case last.stopReason == "error", last.stopReason == "aborted":
		// pi exits 0 in JSON mode when the model call failed; the
		// message says why.
		return w.session(w.failure(e, last))
	case e.Code != 0:
		return w.session(pilot.JudgeExit(e))
	case !w.done:
		return w.session(incomplete(RunnerPi, "agent_end"))
	}
	switch last.stopReason {
	case "stop":
		if last.text {
			return w.session(pilot.Result{Outcome: pilot.Completed})
		}
		return w.session(pilot.Result{Outcome: pilot.Empty})
	case "length":
		// The model hit its output-token cap mid-answer. pi has no turn
		// or step cap of its own; this is the nearest thing.
		return w.session(pilot.Result{Outcome: pilot.StepCappedPartial})
	case "toolUse":
		return w.session(incomplete(RunnerPi, "a final answer (its last assistant message asked for tools)"))
	}
	return w.session(failed(pilot.FailGeneric, RunnerPi+":stdout",
		fmt.Sprintf("pi's last assistant message has stopReason %q", last.stopReason)))
}

// failure is the Result of a run whose last assistant message failed:
// the class its errorMessage proves. Only that message counts: errors pi
// retried earlier (which the Dispatcher's diagnostic may hold) do not.
func (w *piWatcher) failure(e pilot.Exit, last *piFinal) pilot.Result {
	text := last.errorMessage
	if text == "" {
		text = w.finalError
	}
	if text == "" {
		// What pi's text mode prints then.
		text = "Request " + last.stopReason
	}
	e.Diagnostic = nil
	return reportedFailure(streamDiagnostic(e, RunnerPi, piCallError(text)), RunnerPi, text)
}

// piFields are a JSON object's members, their values raw and aliasing the
// line they were read from (internal/jsonskim: nothing decoded).
type piFields []jsonskim.Member

// get returns the raw value of member key (the last of duplicates, as
// encoding/json decodes them), or nil.
func (f piFields) get(key string) json.RawMessage { return jsonskim.Get(f, key) }

// object reads a JSON object's members, leaving their values raw, into
// the buffer for objects at depth (0 the line, 1 its message, 2 and 3
// within): the fields alias the buffer until the next object at that
// depth.
func (w *piWatcher) object(depth int, raw []byte) (piFields, bool) {
	ms, ok := jsonskim.Members(w.objs[depth][:0], raw)
	w.objs[depth] = ms
	return ms, ok
}

// validObject is object for a line that must be valid JSON
// (jsonskim.ValidMembers).
func (w *piWatcher) validObject(data []byte) (piFields, bool) {
	ms, ok := jsonskim.ValidMembers(w.objs[0][:0], data)
	w.objs[0] = ms
	return ms, ok
}

// final reads how an assistant message ended, and with ids the ids of
// its toolCall blocks (content). valid says the message is known to be
// valid JSON.
func (w *piWatcher) final(m piFields, valid, ids bool) (piFinal, []string) {
	f := piFinal{stopReason: piString(m.get("stopReason")), errorMessage: piString(m.get("errorMessage"))}
	var calls []string
	f.text, calls = w.content(m.get("content"), valid, ids)
	return f, calls
}

// content reads an assistant message's content as decoding it does
// (piContentText, piToolCallIDs), without decoding it: whether it holds
// non-blank text, a string or a text block (a block whose type is "text"
// with a string text), and, with ids, the ids of its toolCall blocks.
// valid says the content is known to be valid JSON. A block whose keys
// encoding/json could match otherwise than jsonskim.Get (exactKeys)
// leaves the content to those decodings.
func (w *piWatcher) content(raw []byte, valid, ids bool) (text bool, calls []string) {
	if raw == nil || !valid && !jsonskim.Valid(raw) {
		return false, nil // neither decodes
	}
	raw = bytes.Trim(raw, " \t\r\n") // JSON's white space (none, as Members delimits a value)
	switch raw[0] {
	case '"':
		t, _ := jsonskim.Text(raw)
		return len(bytes.TrimSpace(t)) > 0, nil
	case '[':
	default:
		return false, nil // null (an empty string, no blocks), or neither decodes
	}
	w.elems[1], _ = jsonskim.Elements(w.elems[1][:0], raw)
	blocksOK := true // every block decodes into {Type string; Text any}
	for _, e := range w.elems[1] {
		if string(e) == "null" {
			continue
		}
		if e[0] != '{' {
			return false, nil // no block decodes
		}
		b, _ := w.object(2, e)
		if !exactKeys(b, piBlockFields) {
			return piContentText(raw), piToolCallIDsIf(ids, raw)
		}
		typ, ok := skimString(b.get("type"))
		if !ok {
			blocksOK = false
			if !ids {
				break
			}
		}
		switch string(typ) {
		case "text":
			if t := b.get("text"); len(t) > 0 && t[0] == '"' {
				t, _ = jsonskim.Text(t)
				text = text || len(bytes.TrimSpace(t)) > 0
			}
		case "toolCall":
			if id := piString(b.get("id")); ids && id != "" && !slices.Contains(calls, id) {
				calls = append(calls, id)
			}
		}
	}
	return text && blocksOK, calls
}

// piBlockFields are the keys of a content block content reads: the fields
// of piContentText's blocks, and the id piToolCallIDs reads.
var piBlockFields = newFieldSet("type", "text", "id")

// piContentText is content's text by decoding the content: a string, or
// blocks {Type string; Text any}.
func piContentText(content json.RawMessage) bool {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return strings.TrimSpace(s) != ""
	}
	var blocks []struct {
		Type string `json:"type"`
		Text any    `json:"text"`
	}
	if json.Unmarshal(content, &blocks) == nil {
		for _, b := range blocks {
			if t, ok := b.Text.(string); ok && b.Type == "text" && strings.TrimSpace(t) != "" {
				return true
			}
		}
	}
	return false
}

// piToolCallIDsIf is piToolCallIDs(content) when ids, else nil.
func piToolCallIDsIf(ids bool, content json.RawMessage) []string {
	if !ids {
		return nil
	}
	return piToolCallIDs(content)
}

// piToolCallIDs returns the ids of an assistant message's toolCall blocks.
func piToolCallIDs(content json.RawMessage) []string {
	var blocks []map[string]json.RawMessage
	if json.Unmarshal(content, &blocks) != nil {
		return nil
	}
	var ids []string
	for _, b := range blocks {
		if piString(b["type"]) == "toolCall" {
			if id := piString(b["id"]); id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// piText returns what decoding the raw value of a string field gives: its
// text, nil when it is no string. Plain text (plainText) is returned in
// place.
func piText(raw json.RawMessage) []byte {
	if raw == nil {
		return nil // a missing member: no string
	}
	if len(raw) >= 2 && raw[0] == '"' {
		if n, ok := plainText(raw[1:]); ok && n == len(raw)-2 {
			return raw[1 : len(raw)-1]
		}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	return []byte(s)
}

func piString(raw json.RawMessage) string { return string(piText(raw)) }

func piBool(raw json.RawMessage) (bool, bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		return false, false
	}
	return b, true
}

func piFloat(raw json.RawMessage) (float64, bool) {
	if raw == nil {
		return 0, false // json.Unmarshal fails on no input
	}
	var n float64
	return n, decodeFloat(raw, &n)
}

// Diagnose is pilot.Watcher's optional Diagnose: a stderr line in pi's words or
// any API's, and the errorMessage of an event that ends a model call in
// error (piEventError).
func (w *piWatcher) Diagnose(s pilot.Stream, line string) (pilot.Classification, bool) {
	switch s {
	case pilot.Stderr:
		return piWords(line)
	case pilot.Stdout:
		if t, ok := eventLine(line); ok {
			if msg, ok := piEventError(t); ok {
				return proved(piCallError(msg))
			}
		}
	}
	return pilot.Classification{}, false
}

// piExact are pi's errorMessage texts that prove a class as the whole
// line (pi's text mode prints them alone on stderr): the OpenAI and
// Anthropic SDKs' connection errors and undici's. "terminated" counts only
// in lower case: a shell's "Terminated" reports a signal.
var piExact = map[string]pilot.FailureClass{
	"connection error.":  pilot.FailProviderConnection,
	"request timed out.": pilot.FailProviderConnection,
	"fetch failed":       pilot.FailProviderConnection,
	"other side closed":  pilot.FailProviderStreamDisconnect,
}

// piPhrases are pi's own failure texts: its pre-flight errors (`No API key
// found for <provider>`, `Authentication failed for "<provider>"` — git
// says 'url', psql "for user"), and a stream that produced nothing.
var piPhrases = []phrase{
	{word: "no api key found for", class: pilot.FailProviderAuth},
	{word: `authentication failed for "`, class: pilot.FailProviderAuth},
	{word: "credentials may have expired", class: pilot.FailProviderAuth},
	{word: "request ended without sending any chunks", class: pilot.FailProviderStreamDisconnect},
	{word: "no model selected", class: pilot.FailGeneric},
	{word: "no models available", class: pilot.FailGeneric},
}

// piExactClass is the class of a line that is one of pi's exact texts.
func piExactClass(line string) (pilot.FailureClass, bool) {
	t := strings.TrimSpace(line)
	if t == "terminated" {
		return pilot.FailProviderStreamDisconnect, true
	}
	c, ok := piExact[strings.ToLower(t)]
	return c, ok
}

// piWords classifies text in pi's words and the APIs'.
func piWords(text string) (pilot.Classification, bool) {
	if class, ok := piExactClass(text); ok {
		return classified(class, text, ""), true
	}
	return ownWords(text, piPhrases)
}

// piCallError classifies an errorMessage of pi's model call. pi writes an
// HTTP failure as "<status> <body>", whose body ("500 upstream boom") may
// name no provider: the message is the model call's, so the status counts.
// pi 1.x appends the deepest cause to the SDK's message ("Connection
// error.: connect ECONNREFUSED …", "terminated: other side closed"), where
// pi 0.x wrote the exact text alone: after such a head, the cause decides.
// Generic, without evidence, when nothing proves a class.
func piCallError(msg string) pilot.Classification {
	if c, ok := piWords(msg); ok {
		return c
	}
	head, _, cut := strings.Cut(msg, ": ")
	_, exactHead := piExactClass(head)
	if rePiStatusLead.MatchString(strings.ToLower(msg)) || cut && exactHead {
		return pilot.ClassifyProviderError(msg, 0)
	}
	return pilot.Classification{Class: pilot.FailGeneric}
}

// rePiStatusLead matches an error message that begins with an HTTP error
// status ("500 upstream boom", "error: 429 ...").
var rePiStatusLead = regexp.MustCompile(`^\s*(?:error:\s*)?([45]\d\d)\b(.*)$`)

// piStopError reports whether line holds "stopReason":"error". It looks
// for the needle's rarer tail first: a quote, which the whole needle
// starts with, is in every few bytes of an event.
func piStopError(line string) bool {
	for {
		i := strings.Index(line, `Reason":"error"`)
		if i < 0 {
			return false
		}
		if strings.HasSuffix(line[:i], `"stop`) {
			return true
		}
		line = line[i+1:]
	}
}

// piMessage is the part of a pi AgentMessage that tells an error.
type piMessage struct {
	Role         string `json:"role"`
	StopReason   string `json:"stopReason"`
	ErrorMessage string `json:"errorMessage"`
}

// callError returns the error a message ended its model call with.
func (m piMessage) callError() (string, bool) {
	if m.Role != "assistant" || m.StopReason != "error" {
		return "", false
	}
	if m.ErrorMessage == "" {
		return "Request error", true
	}
	return m.ErrorMessage, true
}

// piEventError returns the error of an event that ends a model call in
// error: message_end, turn_end, a session file's message entry, or the
// last assistant message of agent_end, with stopReason "error" (its
// errorMessage, "Request error" when empty, as pi's text mode prints); an
// unsuccessful auto_retry_end (its finalError). Anything else on pi's
// stdout is the model's stream, where a model may write any words.
func piEventError(line string) (string, bool) {
	// Skip the (often huge) streaming events without decoding them.
	// pi writes its JSON with JSON.stringify, so without spaces. A
	// message is one only with stopReason error, a retry's end only
	// unsuccessful.
	typ, typed := leadingType(line)
	switch {
	case typ == "auto_retry_end":
	case typ == "message_end", typ == "turn_end", typ == "message", typ == "agent_end":
		if !piStopError(line) {
			return "", false
		}
	case typed:
		return "", false // an event that never reports an error
	default:
		if !piStopError(line) && !strings.Contains(line, `"auto_retry_end"`) {
			return "", false
		}
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
		return m.callError()
	case "agent_end":
		var ms []piMessage
		if json.Unmarshal(ev.Messages, &ms) != nil {
			return "", false
		}
		for i := len(ms) - 1; i >= 0; i-- {
			if ms[i].Role == "assistant" {
				return ms[i].callError()
			}
		}
	case "auto_retry_end":
		if ev.Success != nil && !*ev.Success {
			return ev.FinalError, true
		}
	}
	return "", false
}
