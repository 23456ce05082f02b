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
	"strings"
	"unicode/utf8"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/sandbox"
)

// RunnerCodex is the codex runner's name, as providers files give it.
const RunnerCodex = "codex"

// codexProviders are the built-in providers of the codex runner ([Providers]).
var codexProviders = []pilot.Provider{{Name: "codex", Runner: RunnerCodex, CredentialEnv: "CODEX_API_KEY"}}

// CodexRunner runs OpenAI's codex CLI non-interactively, one turn per
// worker, and reads its JSONL event stream:
//
//	codex exec --json --skip-git-repo-check -C WORKDIR -s SANDBOX [-m MODEL] [ARGS...] -- PROMPT
//	codex exec --json --skip-git-repo-check -C WORKDIR -s SANDBOX [-m MODEL] [ARGS...] resume -- THREAD PROMPT
//
// SANDBOX is read-only for explore and review, workspace-write otherwise,
// and danger-full-access inside pilot's sandbox, where codex's cannot run.
// Stdin is /dev/null (codex would wait on it) unless the prompt is too long
// for one argument. README's "The agent CLIs" gives isolation (CODEX_HOME),
// the key (CODEX_API_KEY), resume and exits; codexWatcher reads the stream.
type CodexRunner struct{}

// Name implements Runner.
func (CodexRunner) Name() string { return RunnerCodex }

// SandboxNeeds tells pilot's sandbox what the CLI needs (see pilot.Runner). codex keeps its login,
// config, threads and logs in CODEX_HOME (~/.codex); an isolated worker's
// is in its run directory. Its default endpoints are OpenAI's API and,
// with a ChatGPT login, chatgpt.com and its token refresh at
// auth.openai.com; OPENAI_BASE_URL in the provider's env moves the API.
func (CodexRunner) SandboxNeeds(p pilot.Provider, home string) sandbox.Needs {
	n := sandbox.Needs{Connect: []string{"api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443"}}
	if hp, ok := endpointOf(p, "OPENAI_BASE_URL"); ok {
		n.Connect = hp
	}
	if !isolated(p) {
		n.Own = []string{userDir(p, home, "CODEX_HOME", ".codex")}
		n.Write = n.Own
	}
	return n
}

// codexMaxPromptArg is the longest prompt passed as an argument; Linux
// refuses a single argument of 128 KiB or more (MAX_ARG_STRLEN).
const codexMaxPromptArg = 96 << 10

// codexKeyEnv is the variable codex exec reads an API key from.
const codexKeyEnv = "CODEX_API_KEY"

// Command implements Runner.
func (CodexRunner) Command(_ context.Context, a pilot.Attempt) (*pilot.Command, error) {
	p := a.Provider
	var own string // codex's own sandbox
	switch a.Task.Mode {
	case pilot.ModeExplore, pilot.ModeReview:
		own = "read-only"
	case pilot.ModeCode, pilot.ModeTest, pilot.ModeResume:
		own = "workspace-write"
	default:
		return nil, fmt.Errorf("pilot: the codex runner does not know mode %q", a.Task.Mode)
	}
	var sandboxArgs []string
	switch {
	case a.Sandbox != "" && a.Sandbox != sandbox.Off:
		// codex's sandbox is bubblewrap, whose mounts Landlock forbids
		// a confined process ("bwrap: Failed to make / slave:
		// Operation not permitted"; its legacy Landlock mode refuses a
		// filesystem policy without bubblewrap): every command would
		// fail. pilot's sandbox confines the commands instead.
		sandboxArgs = []string{"-s", "danger-full-access"}
	case own == "workspace-write":
		// Not /tmp: codex would make it writable, and mount points in
		// it (/tmp/.git, .codex, .aws, .agents) that a killed codex
		// leaves behind. Its TMPDIR, in the run directory, stays
		// writable.
		sandboxArgs = []string{"-s", own, "-c", "sandbox_workspace_write.exclude_slash_tmp=true"}
	default:
		sandboxArgs = []string{"-s", own}
	}
	if strings.TrimSpace(a.Prompt) == "" {
		return nil, fmt.Errorf("pilot: provider %q: the task is empty: codex needs a prompt", p.Name)
	}
	if p.BaseURL != "" && p.Model == "" {
		return nil, fmt.Errorf("pilot: provider %q: codex with base_url needs a model: set \"model\" to the model name the endpoint serves", p.Name)
	}
	if p.BaseURL == "" && p.Isolated && p.CredentialEnv == "" {
		return nil, fmt.Errorf("pilot: provider %q: an isolated codex worker has a CODEX_HOME of its own with no login: set credential_env to the variable holding the API key", p.Name)
	}
	for _, v := range []struct{ what, s string }{{"model", p.Model}, {"base_url", p.BaseURL}} {
		if !utf8.ValidString(v.s) {
			return nil, fmt.Errorf("pilot: provider %q: %s is not valid UTF-8", p.Name, v.what)
		}
	}

	home, err := isolatedDir(a, "codex-home")
	if err != nil {
		return nil, err
	}
	thread := a.Task.Resume
	if thread != "" {
		if thread, err = codexResumeThread(home, thread); err != nil {
			return nil, fmt.Errorf("pilot: provider %q: %w", p.Name, err)
		}
	}
	cmd := &pilot.Command{Watcher: &codexWatcher{home: home}}
	if home != "" {
		cmd.Env = map[string]string{"CODEX_HOME": home}
		if p.BaseURL != "" {
			if err := writeCodexConfig(filepath.Join(home, "config.toml"), p); err != nil {
				return nil, err
			}
		}
	}
	if p.BaseURL == "" && p.CredentialEnv != "" && p.CredentialEnv != codexKeyEnv {
		cmd.SecretEnv = []string{codexKeyEnv}
	}

	argv := []string{program(p, RunnerCodex), "exec", "--json", "--skip-git-repo-check",
		"-C", a.Workdir}
	argv = append(argv, sandboxArgs...)
	if p.Model != "" {
		argv = append(argv, "-m", p.Model)
	}
	argv = append(argv, p.Args...)
	if thread != "" {
		argv = append(argv, "resume")
	}
	argv = append(argv, "--")
	if thread != "" {
		argv = append(argv, thread)
	}
	prompt := a.Prompt
	if len(prompt) > codexMaxPromptArg || prompt == "-" {
		cmd.Stdin = []byte(prompt)
		prompt = "-"
	}
	cmd.Argv = append(argv, prompt)
	return cmd, nil
}

// codexRolloutName matches the file name codex gives a thread's rollout:
// rollout-<date>T<time>-<thread id>.jsonl.
var codexRolloutName = regexp.MustCompile(`^rollout-(\d{4})-(\d{2})-(\d{2})T[0-9-]+-([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})\.jsonl$`)

// codexResumeThread returns the thread a worker with CODEX_HOME home ("" for
// the user's own) resumes for Task.Resume: a thread id (or name) as it is,
// or, for an isolated worker, a rollout file of an earlier isolated worker,
// which it copies into home/sessions first.
func codexResumeThread(home, resume string) (string, error) {
	if !filepath.IsAbs(resume) {
		if home != "" {
			return "", fmt.Errorf("cannot resume codex thread %q: an isolated worker's CODEX_HOME is new and holds no threads; resume with the earlier verdict's \"resume\" value, the thread's rollout file", resume)
		}
		return resume, nil
	}
	m := codexRolloutName.FindStringSubmatch(filepath.Base(resume))
	if m == nil {
		return "", fmt.Errorf("cannot resume %q: a path is resumable only as a codex rollout file (rollout-<time>-<thread id>.jsonl)", resume)
	}
	if home == "" {
		return "", fmt.Errorf("cannot resume %q: a rollout file comes from an isolated codex worker, and only an isolated provider (isolated or base_url) can resume it; or resume thread %s with a provider that shares its CODEX_HOME", resume, m[4])
	}
	dir := filepath.Join(home, "sessions", m[1], m[2], m[3])
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("copying the rollout to resume: %w", err)
	}
	if err := copyFile(filepath.Join(dir, filepath.Base(resume)), resume); err != nil {
		return "", fmt.Errorf("copying the rollout to resume: %w", err)
	}
	return m[4], nil
}

// writeCodexConfig writes the config.toml that points codex at p.BaseURL: a
// model provider "pilot" that takes its key from the variable
// p.CredentialEnv names.
func writeCodexConfig(path string, p pilot.Provider) error {
	var b strings.Builder
	b.WriteString("# Written by pilot for one codex worker. The API key is read from the\n")
	b.WriteString("# environment variable env_key names; no secret is stored here.\n")
	fmt.Fprintf(&b, "model = %s\n", tomlString(p.Model))
	b.WriteString("model_provider = \"pilot\"\n\n")
	// A custom endpoint is not OpenAI's service: no plugin sync with it at
	// start-up, no analytics after the turn (both reach beyond the
	// endpoint; seen from codex 0.171).
	b.WriteString("[features]\nplugins = false\n\n")
	b.WriteString("[analytics]\nenabled = false\n\n")
	b.WriteString("[model_providers.pilot]\n")
	fmt.Fprintf(&b, "name = %s\n", tomlString("pilot "+p.Name))
	fmt.Fprintf(&b, "base_url = %s\n", tomlString(p.BaseURL))
	if p.CredentialEnv != "" {
		fmt.Fprintf(&b, "env_key = %s\n", tomlString(p.CredentialEnv))
	}
	b.WriteString("wire_api = \"responses\"\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("writing the codex config: %w", err)
	}
	return nil
}

// tomlString quotes s as a TOML basic string. s must be valid UTF-8.
func tomlString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// codexItemPrefix reads the start of an item event cut short by the line
// limit (a command's whole output in aggregated_output, a very long
// agent_message): codex writes the event type, then the item's id and type.
var codexItemPrefix = regexp.MustCompile(`^\s*\{"type":"(item\.started|item\.completed)","item":\{"id":"((?:[^"\\]|\\.)*)","type":"([a-z_]+)"`)

// codexWatcher follows one codex exec --json worker. thread.started gives
// the session id; a tool item is running from item.started to the
// item.completed with its id (several may be open; a sub-agent wait is one);
// "Reconnecting..." error events are retries, and codex retries a refused
// endpoint forever, so StallPolicy.RetryLoop ends it as provider-connection.
// codex prints an agent_message only whole, so long silences are normal.
// turn.completed's usage is the thread's running total: the last one wins.
type codexWatcher struct {
	streamWatch
	home string // the worker's own CODEX_HOME, or ""

	open   []string // tool items started and not completed
	waits  CodexSubagentWaits
	answer bool // an agent_message had text

	terminal string // "turn.completed", "turn.failed", or ""
	failLine string // the turn.failed event, or a fatal top-level error

	skim, itemSkim skim // the event's fields, its item's
}

// itemFields reads the id, type and text of an item event's item, as
// decoding it into a struct of three strings would (nothing for a null
// item; ok false for one that is not an object or holds another type
// where a string belongs).
func (w *codexWatcher) itemFields(raw []byte) (id, typ, text []byte, ok bool) {
	if string(raw) == "null" {
		return nil, nil, nil, true
	}
	if !w.itemSkim.object(raw) {
		return nil, nil, nil, false
	}
	if id, ok = w.itemSkim.str("id"); !ok {
		return
	}
	if typ, ok = w.itemSkim.str("type"); !ok {
		return
	}
	text, ok = w.itemSkim.str("text")
	return
}

// codexEventType returns the event type as a string, without allocating
// for the types the watcher knows.
func codexEventType(b []byte) string {
	for _, t := range codexEventTypes {
		if string(b) == t {
			return t
		}
	}
	return string(b)
}

var codexEventTypes = []string{"item.started", "item.updated", "item.completed", "thread.started", "turn.started", "turn.completed", "turn.failed", "error"}

// Line implements Watcher.
func (w *codexWatcher) Line(l pilot.Line) {
	if l.Stream != pilot.Stdout {
		return
	}
	data := bytes.TrimSpace(l.Data)
	if len(data) == 0 || data[0] != '{' {
		return
	}
	if l.Truncated {
		w.truncatedItem(data)
		return
	}
	if w.leadingItem(data) {
		return
	}
	// The event's fields as decoding it into {type string; thread_id,
	// message, item, usage json.RawMessage} gives them, without decoding
	// it.
	var ev struct {
		Type                           string
		ThreadID, Message, Item, Usage []byte
	}
	if !w.skim.object(data) {
		return
	}
	typ, ok := w.skim.str("type")
	if !ok {
		return
	}
	ev.Type = codexEventType(typ)
	switch ev.Type {
	case "turn.completed", "turn.failed", "error", "thread.started":
		// The verdict and the resume token rest on these: they count
		// only as valid JSON (skim checks the structure, not every
		// literal).
		if !json.Valid(data) {
			return
		}
	}
	ev.ThreadID, ev.Message, ev.Item, ev.Usage = w.skim.raw("thread_id"), w.skim.raw("message"), w.skim.raw("item"), w.skim.raw("usage")
	if strings.HasPrefix(ev.Type, "turn.") || (strings.HasPrefix(ev.Type, "item.") && bytes.Contains(ev.Item, []byte(`"collab_tool_call"`))) {
		// A sub-agent wait's start or end, or the turn's end that ends
		// every wait (the lines Observe acts on).
		w.waits.Observe(data)
	}
	switch ev.Type {
	case "item.started", "item.updated", "item.completed", "turn.completed", "turn.failed":
		// The model answered, or codex gave up itself.
		w.retryOver()
	}
	switch ev.Type {
	case "thread.started":
		var id string
		if json.Unmarshal(ev.ThreadID, &id) == nil && id != "" {
			w.sessionID = id
		}
		w.setPhase(pilot.PhaseStarting, "stream:thread.started", nil)
	case "turn.started":
		w.terminal, w.failLine = "", ""
		w.open = w.open[:0]
		w.setPhase(pilot.PhaseAwaitingModel, "stream:turn.started", nil)
	case "item.started", "item.updated", "item.completed":
		id, typ, text, ok := w.itemFields(ev.Item)
		if !ok {
			return
		}
		w.item(ev.Type, id, typ, len(bytes.TrimSpace(text)) > 0)
	case "turn.completed":
		var u struct {
			Input  int64 `json:"input_tokens"`
			Cached int64 `json:"cached_input_tokens"`
			Output int64 `json:"output_tokens"`
		}
		if len(ev.Usage) > 0 && json.Unmarshal(ev.Usage, &u) == nil {
			w.usage = &pilot.Usage{InputTokens: u.Input, CacheReadTokens: u.Cached, OutputTokens: u.Output}
		}
		w.terminal, w.failLine = ev.Type, ""
		w.open = w.open[:0]
		w.setPhase(pilot.PhaseFinished, "stream:turn.completed", nil)
	case "turn.failed":
		w.terminal, w.failLine = ev.Type, string(data)
		w.open = w.open[:0]
		w.setPhase(pilot.PhaseErrored, "stream:turn.failed", nil)
	case "error":
		var msg string
		json.Unmarshal(ev.Message, &msg)
		if codexRetrying(msg) {
			// A retry in progress: the phase stands.
			w.retrying(RunnerCodex+":stdout", msg, codexRetryReason(msg))
			if w.seen {
				w.setPhase(w.state.Phase, "stream:error(retrying)", w.state.PendingToolCallIDs)
			}
			return
		}
		if w.terminal == "" {
			w.failLine = string(data)
			w.setPhase(pilot.PhaseErrored, "stream:error", nil)
		}
	}
}

// leadingItem follows an item event from its leading members, the way
// codex writes them, {"type":"item.started","item":{"id":"item_1",
// "type":"command_execution",…, without reading the rest of the line: such
// an event only moves the phase. It returns false, leaving the line to be
// read whole, when the line is not in that shape (an id or type that is
// not plain text included) and when the rest of the item matters: an
// agent_message until one had text (its text decides completed or empty)
// and a collab_tool_call (a sub-agent wait's tool).
func (w *codexWatcher) leadingItem(data []byte) bool {
	typ, ok := leadingType(data)
	if !ok {
		return false
	}
	event := codexEventType(typ)
	switch event {
	case "item.started", "item.updated", "item.completed":
	default:
		return false
	}
	id, itemType, ok := codexItemHead(data, data[len(`{"type":"`)+len(typ)+1:])
	if !ok {
		return false
	}
	switch string(itemType) {
	case "collab_tool_call":
		return false
	case "agent_message":
		if !w.answer {
			return false
		}
	}
	w.retryOver() // the model answered
	w.item(event, id, itemType, false)
	return true
}

// codexItemHead reads the id and type of an item event's item from the
// leading members of the line, data, and of its item, when both are plain
// text. rest is what follows the event's leading type in data.
func codexItemHead(data, rest []byte) (id, typ []byte, ok bool) {
	// In place, when the line goes on as codex writes it; else wherever
	// they are among the leading members.
	if rest, ok := bytes.CutPrefix(rest, []byte(`,"item":{"id":"`)); ok {
		if id, rest, ok := cutPlain(rest, `,"type":"`); ok {
			if typ, _, ok := cutPlain(rest, ""); ok {
				return id, typ, true
			}
		}
	}
	item, ok := leadingObject(data, "item")
	if !ok {
		return nil, nil, false
	}
	if id, ok = leadingString(item, "id"); !ok {
		return nil, nil, false
	}
	typ, ok = leadingString(item, "type")
	return id, typ, ok
}

// truncatedItem reads what it can of an item event cut short.
func (w *codexWatcher) truncatedItem(data []byte) {
	m := codexItemPrefix.FindSubmatch(data)
	if m == nil {
		return
	}
	var id string
	if json.Unmarshal(append(append([]byte{'"'}, m[2]...), '"'), &id) != nil {
		return
	}
	// A cut-short agent_message is long, so it has text.
	w.item(string(m[1]), []byte(id), m[3], string(m[3]) == "agent_message")
}

// item follows one item event. id and typ may alias the line: the id is
// copied only when the watcher keeps it.
func (w *codexWatcher) item(event string, id, typ []byte, hasText bool) {
	if len(id) == 0 {
		id = typ
	}
	// The item types that run something between their item.started and
	// item.completed: while one is open, the worker's silence is a tool's.
	var tool bool
	switch string(typ) {
	case "command_execution", "mcp_tool_call", "collab_tool_call", "web_search", "file_change":
		tool = true
	}
	switch {
	case event == "item.started" && tool:
		if !slices.ContainsFunc(w.open, func(o string) bool { return o == string(id) }) {
			w.open = append(w.open, string(id))
		}
	case event == "item.completed":
		if i := slices.IndexFunc(w.open, func(o string) bool { return o == string(id) }); i >= 0 {
			w.open = slices.Delete(w.open, i, i+1) // an id is open once
		}
		if string(typ) == "agent_message" && hasText {
			w.answer = true
		}
	default:
		return // item.updated, and items that run nothing: no change
	}
	if w.terminal != "" {
		return
	}
	switch {
	case len(w.open) > 0:
		w.setPhase(pilot.PhaseToolRunning, codexReason(event), w.open)
	case w.waits.Waiting():
		w.setPhase(pilot.PhaseToolRunning, "stream:subagent-wait", nil)
	default:
		w.setPhase(pilot.PhaseAwaitingModel, codexReason(event), nil)
	}
}

// codexReason is the phase reason of an item event ("stream:" and its
// type), without building the string for the frequent ones.
func codexReason(event string) string {
	switch event {
	case "item.started":
		return "stream:item.started"
	case "item.completed":
		return "stream:item.completed"
	}
	return "stream:" + event
}

// Finish implements Watcher. The stream decides before the exit status;
// codex prints no terminal event for an interrupted turn, and has no turn
// cap, so it is never step_capped_partial.
func (w *codexWatcher) Finish(e pilot.Exit) pilot.Result {
	w.findRollout()
	switch {
	case ended(e):
		return w.session(pilot.JudgeExit(e))
	case w.terminal == "turn.completed" && w.answer:
		return w.session(pilot.Result{Outcome: pilot.Completed})
	case w.terminal == "turn.completed":
		return w.session(pilot.Result{Outcome: pilot.Empty})
	case w.failLine != "":
		return w.session(reportedFailure(e, RunnerCodex, w.failLine))
	case e.Code != 0:
		return w.session(pilot.JudgeExit(e))
	}
	return w.session(incomplete(RunnerCodex, "turn.completed or turn.failed"))
}

// findRollout makes an isolated worker's rollout file its resume token:
// its thread lives only in its own CODEX_HOME.
func (w *codexWatcher) findRollout() {
	if w.home == "" || w.sessionID == "" || strings.ContainsAny(w.sessionID, `*?[\/`) {
		return
	}
	paths, _ := filepath.Glob(filepath.Join(w.home, "sessions", "*", "*", "*", "rollout-*-"+w.sessionID+".jsonl"))
	if len(paths) > 0 {
		w.resume = paths[len(paths)-1]
	}
}

var _ pilot.PhaseWatcher = (*codexWatcher)(nil)

// Diagnose is pilot.Watcher's optional Diagnose: a stderr line in codex's words or
// any API's, and the message of a turn.failed or of a top-level error
// event. Reconnect notices are retries in progress, never evidence; an
// error item is a warning.
func (w *codexWatcher) Diagnose(s pilot.Stream, line string) (pilot.Classification, bool) {
	switch s {
	case pilot.Stderr:
		if !codexRetrying(line) {
			return codexWords(line)
		}
	case pilot.Stdout:
		if t, ok := eventLine(line); ok {
			if msg, ok := codexEventError(t); ok {
				return codexWords(msg)
			}
		}
	}
	return pilot.Classification{}, false
}

// codexPhrases are codex's own failure texts. Its HTTP failures
// ("unexpected status 401 Unauthorized: …", "exceeded retry limit, last
// status: 429 …") and connect failures (reqwest's "Connection failed:
// error sending request …") are a model call's errors, whose status or
// cause decides; so is "stream disconnected before completion", a
// connection failure when its cause says the request never left. A
// missing env_key is a credential only when the variable is named like a
// key or token (a missing DATABASE_URL is no provider's).
var codexPhrases = []phrase{
	{word: "unexpected status", re: regexp.MustCompile(`^\s*(?:error:\s*)?unexpected status [45]\d\d\b`)},
	{word: "exceeded retry limit, last status"},
	{word: "connection failed: ", re: regexp.MustCompile(`^\s*(?:error:\s*)?connection failed: `)},
	{word: "stream disconnected before completion"},
	{word: "error while reading the server response", class: pilot.FailProviderStreamDisconnect},
	{word: "ran out of room in the model's context window", class: pilot.FailContextLimit},
	{word: "missing environment variable: `", re: regexp.MustCompile("missing environment variable: `[^`]*(?:key|token)[^`]*`"), class: pilot.FailProviderAuth},
	{word: "error loading config.toml", class: pilot.FailGeneric},
	{word: `wire_api = "chat" is no longer supported`, class: pilot.FailGeneric},
	{word: "not inside a trusted directory", class: pilot.FailGeneric},
}

// codexWords classifies text in codex's words and the APIs'.
func codexWords(text string) (pilot.Classification, bool) {
	return ownWords(text, codexPhrases)
}

// codexEventError returns the message of a turn.failed, or of a
// top-level error event that is no reconnect notice.
func codexEventError(line string) (string, bool) {
	// Most lines are items: a line whose type is neither is not decoded.
	if typ, ok := leadingType(line); ok && typ != "turn.failed" && typ != "error" {
		return "", false
	}
	if !strings.Contains(line, `"turn.failed"`) && !strings.Contains(line, `"error"`) {
		return "", false
	}
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
		return ev.Message, !codexRetrying(ev.Message)
	}
	return "", false
}

// ---- codex sub-agent waits and reconnects ----

// CodexCollabWait reads one line of `codex exec --json` output and reports
// whether it starts or completes a collab_tool_call with tool "wait": codex
// waiting for a sub-agent, which is slow but not stalled. itemID is the
// item's id ("" if it has none). Lines that are not JSON, and other events,
// give nothing.
func CodexCollabWait(line []byte) (itemID string, started, completed bool) {
	if !bytes.Contains(line, []byte("collab_tool_call")) {
		return "", false, false
	}
	var ev struct {
		Type string `json:"type"`
		Item *struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Tool string `json:"tool"`
		} `json:"item"`
	}
	if json.Unmarshal(line, &ev) != nil || ev.Item == nil ||
		ev.Item.Type != "collab_tool_call" || ev.Item.Tool != "wait" {
		return "", false, false
	}
	switch ev.Type {
	case "item.started":
		return ev.Item.ID, true, false
	case "item.completed":
		return ev.Item.ID, false, true
	}
	return "", false, false
}

// CodexSubagentWaits follows the sub-agent waits of one codex worker: a
// wait is open from its item.started to the item.completed with the same
// item id, and every wait ends with the turn (turn.completed,
// turn.failed). While Waiting, the worker's silence is a tool run's: treat
// it as PhaseToolRunning for the StallPolicy. The zero value has no open
// wait.
type CodexSubagentWaits struct {
	open []string
}

// Observe reads one line of the worker's stdout.
func (w *CodexSubagentWaits) Observe(line []byte) {
	if id, started, completed := CodexCollabWait(line); started {
		if !slices.Contains(w.open, id) {
			w.open = append(w.open, id)
		}
		return
	} else if completed {
		w.open = slices.DeleteFunc(w.open, func(o string) bool { return o == id })
		return
	}
	if len(w.open) > 0 && bytes.Contains(line, []byte(`"turn.`)) {
		var ev struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(line, &ev) == nil && (ev.Type == "turn.completed" || ev.Type == "turn.failed") {
			w.open = w.open[:0]
		}
	}
}

// Waiting reports whether a sub-agent wait is open.
func (w *CodexSubagentWaits) Waiting() bool { return len(w.open) > 0 }

// reCodexReconnecting matches codex's notices of a retried model call:
// "Reconnecting... 2/5 (...)" and "Reconnecting... waiting for network".
var reCodexReconnecting = regexp.MustCompile(`(?i)reconnecting\.\.\.\s*(?:\d+\s*/\s*\d+|waiting for network)`)

// codexRetrying reports whether msg, a codex error event's message, is a
// retry notice rather than a failure.
func codexRetrying(msg string) bool { return reCodexReconnecting.MatchString(msg) }

// codexRetryReason classifies a reconnect notice by its reason, the model
// call's error ("Reconnecting... 2/5 (stream disconnected …)").
func codexRetryReason(notice string) pilot.Classification {
	return pilot.ClassifyProviderError(notice, 0)
}
