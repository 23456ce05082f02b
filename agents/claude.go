package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/sandbox"

	"github.com/pilotworkers/pilot/internal/jsonskim"
)

// RunnerClaude is the claude runner's name, as providers files give it.
const RunnerClaude = "claude"

// claudeProviders are the built-in providers of the claude runner ([Providers]).
var claudeProviders = []pilot.Provider{{Name: "claude", Runner: RunnerClaude, CredentialEnv: "ANTHROPIC_API_KEY"}}

// ClaudeRunner runs Claude Code (the claude CLI) headless, one prompt per
// worker, the prompt on stdin (out of the argument parser and process
// listings):
//
//	claude -p --output-format stream-json --verbose [--model M]
//	       <permission flags> [--resume=ID] [Provider.Args...]
//
// Code, test and resume run with --allowedTools Bash --permission-mode
// acceptEdits; explore and review with --disallowedTools
// Edit,Write,NotebookEdit --permission-mode dontAsk. README's "The agent
// CLIs" gives isolation (CLAUDE_CONFIG_DIR), the key, resume and exits;
// claudeWatcher reads the stream.
type ClaudeRunner struct{}

// Name implements Runner.
func (ClaudeRunner) Name() string { return RunnerClaude }

// SandboxNeeds tells pilot's sandbox what the CLI needs (see pilot.Runner). Claude Code keeps its
// settings, login, transcripts and caches in ~/.claude and its global
// state in ~/.claude.json; CLAUDE_CONFIG_DIR moves both (the state file
// into the dir), as it does for an isolated worker, whose dir is in its run
// directory. Its default endpoint is Anthropic's API; ANTHROPIC_BASE_URL in
// the provider's env moves it.
func (ClaudeRunner) SandboxNeeds(p pilot.Provider, home string) sandbox.Needs {
	n := sandbox.Needs{Connect: []string{"api.anthropic.com:443"}}
	if hp, ok := endpointOf(p, "ANTHROPIC_BASE_URL"); ok {
		n.Connect = hp
	}
	switch {
	case isolated(p):
	case filepath.IsAbs(p.Env["CLAUDE_CONFIG_DIR"]):
		n.Own = []string{filepath.Clean(p.Env["CLAUDE_CONFIG_DIR"])}
		n.Write = n.Own
	default:
		// ~/.claude.json is written through a temp file beside it,
		// which a confined worker cannot create in $HOME; Claude Code
		// then writes it in place, which needs it to exist.
		n.Own = []string{filepath.Join(home, ".claude"), filepath.Join(home, ".claude.json")}
		n.Write = n.Own[:1]
	}
	return n
}

// claudeKeyEnv lists the variables Claude Code reads a credential from.
var claudeKeyEnv = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}

// claudeReadOnlyDenied are the tools an explore or review worker does not
// get: every built-in tool that writes a file. It runs in dontAsk mode,
// which denies whatever would prompt; plan mode would have the model write
// a plan for approval, and no one is there to approve it.
const claudeReadOnlyDenied = "Edit,Write,NotebookEdit"

// Command implements Runner.
func (ClaudeRunner) Command(_ context.Context, a pilot.Attempt) (*pilot.Command, error) {
	if strings.TrimSpace(a.Prompt) == "" {
		return nil, errors.New("the task text is empty, and claude -p fails without a prompt: give the task some text")
	}
	if u := strings.TrimRight(a.Provider.BaseURL, "/"); strings.HasSuffix(u, "/v1") {
		return nil, fmt.Errorf("provider %q: base_url %s ends in /v1, and claude appends /v1/messages itself: give the gateway's root (%s)", a.Provider.Name, a.Provider.BaseURL, strings.TrimSuffix(u, "/v1"))
	}
	cfg, err := isolatedDir(a, "claude-config")
	if err != nil {
		return nil, err
	}
	argv := []string{program(a.Provider, RunnerClaude), "-p", "--output-format", "stream-json", "--verbose"}
	if a.Provider.Model != "" {
		argv = append(argv, "--model", a.Provider.Model)
	}
	// The tool lists are variadic options: a value that follows them
	// would be read as another tool, so a single-valued option comes last.
	switch a.Task.Mode {
	case pilot.ModeExplore, pilot.ModeReview:
		argv = append(argv, "--disallowedTools", claudeReadOnlyDenied, "--permission-mode", "dontAsk")
	default:
		argv = append(argv, "--allowedTools", "Bash", "--permission-mode", "acceptEdits")
	}
	if r := a.Task.Resume; r != "" {
		id, err := claudeResume(a, cfg, r)
		if err != nil {
			return nil, err
		}
		argv = append(argv, "--resume="+id)
	}
	argv = append(argv, a.Provider.Args...)

	cmd := &pilot.Command{
		Argv:    argv,
		Stdin:   []byte(a.Prompt),
		Watcher: &claudeWatcher{configDir: cfg},
	}
	env := map[string]string{}
	if cfg != "" {
		env["CLAUDE_CONFIG_DIR"] = cfg
		env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
	}
	if a.Provider.BaseURL != "" {
		env["ANTHROPIC_BASE_URL"] = a.Provider.BaseURL
	}
	if len(env) > 0 {
		cmd.Env = env
	}
	if c := a.Provider.CredentialEnv; c != "" && !slices.Contains(claudeKeyEnv, c) {
		cmd.SecretEnv = []string{"ANTHROPIC_API_KEY"}
	}
	return cmd, nil
}

// claudeResume returns the session id to pass to --resume. resume is the
// earlier verdict's "resume" value: a session id, or the transcript of an
// isolated worker, which claudeResume copies into cfg, this worker's config
// dir.
func claudeResume(a pilot.Attempt, cfg, resume string) (string, error) {
	if !claudeTranscriptPath(resume) {
		if cfg != "" {
			return "", fmt.Errorf("provider %q is isolated, so claude starts with an empty config dir and cannot find session %q: resume with the earlier verdict's \"resume\" value, the transcript path pilot reports for an isolated worker", a.Provider.Name, resume)
		}
		return resume, nil
	}
	if cfg == "" {
		return "", fmt.Errorf("session %s was recorded in an isolated worker's config dir, which claude cannot see from the user's own: resume it with a provider that sets isolated (or base_url)", resume)
	}
	id := strings.TrimSuffix(filepath.Base(resume), ".jsonl")
	if id == "" || strings.HasPrefix(id, ".") {
		return "", fmt.Errorf("%s does not name a claude session transcript (<session id>.jsonl)", resume)
	}
	st, err := os.Stat(resume)
	if err != nil {
		return "", fmt.Errorf("reading the transcript of the session to resume: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a claude session transcript (not a regular file)", resume)
	}
	project := claudeProjectDir(a.Workdir)
	if project == "" {
		// Too long a workdir: Claude Code names its project dir with a
		// hash pilot cannot compute. The earlier worker's project dir
		// is right when the workdir did not change.
		project = filepath.Base(filepath.Dir(resume))
	}
	dst := filepath.Join(cfg, "projects", project)
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return "", fmt.Errorf("copying the transcript to resume: %w", err)
	}
	if err := copyFile(filepath.Join(dst, id+".jsonl"), resume); err != nil {
		return "", fmt.Errorf("copying the transcript to resume: %w", err)
	}
	// Subagent transcripts and spilled tool results live beside it, in a
	// directory named after the session.
	if err := claudeCopyTree(strings.TrimSuffix(resume, ".jsonl"), filepath.Join(dst, id)); err != nil {
		return "", fmt.Errorf("copying the session's files to resume: %w", err)
	}
	return id, nil
}

// claudeTranscriptPath reports whether a resume value is a transcript path
// (as an isolated worker's verdict gives) rather than a session id.
func claudeTranscriptPath(s string) bool {
	return filepath.IsAbs(s) && strings.HasSuffix(s, ".jsonl")
}

// maxClaudeProjectName is the longest project dir name Claude Code uses as
// is; longer ones are cut and get a hash suffix.
const maxClaudeProjectName = 200

// claudeProjectDir is the name Claude Code gives the directory under
// <config>/projects that holds the sessions run in workdir: the real path
// with every character other than an ASCII letter or digit replaced by "-"
// (two for a character outside the Basic Multilingual Plane, which
// JavaScript counts as two). It returns "" when the name would be longer
// than 200 characters, which Claude Code shortens with a hash of its own.
func claudeProjectDir(workdir string) string {
	if p, err := filepath.EvalSymlinks(workdir); err == nil {
		workdir = p
	}
	var b strings.Builder
	for _, r := range workdir {
		switch {
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		case r > 0xFFFF:
			b.WriteString("--")
		default:
			b.WriteByte('-')
		}
	}
	if b.Len() > maxClaudeProjectName {
		return ""
	}
	return b.String()
}

// claudeCopyTree copies the regular files and directories under src to dst (files
// 0600, directories 0700); symbolic links and other special files are left
// out. A missing src copies nothing.
func claudeCopyTree(src, dst string) error {
	if st, err := os.Lstat(src); err != nil || !st.IsDir() {
		return nil
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o700)
		case d.Type().IsRegular():
			return copyFile(target, p)
		}
		return nil
	})
}

// claudeSessionGone begins what Claude Code says, on stderr or in its
// result's errors, when the session it was asked to resume does not exist.
const claudeSessionGone = "No conversation found"

// claudeWatcher follows one Claude Code worker's stream-json output. The
// final result event decides; its api_retry notices are retries, not
// failures, and tell the stall policy how long the silence will last.
type claudeWatcher struct {
	streamWatch
	configDir string // the worker's isolated CLAUDE_CONFIG_DIR, or ""

	initSeen bool
	pending  []string // tool_use ids without a tool_result yet, in order
	answered bool     // the model wrote text to the user
	// msgUsage is each assistant message's latest usage, by message id,
	// for a run that ends without a result.
	msgUsage map[string]pilot.Usage
	msgOrder []string

	result     *claudeEvent // the last result event
	resultLine string

	skim []byte // decode buffer for long lines
	// What reading a line reuses: the content's elements, a block's
	// members, the blocks read, and the last message id and model.
	elems           [][]byte
	blockSkim       skim
	blockBuf        []claudeContentBlock
	blocksRead      bool // blockBuf holds the blocks of the line read last
	msgID, msgModel string
	// What a line's event points to, valid while Line reads it.
	scratch struct {
		msg   claudeMessage
		usage [2]claudeUsage // the event's, its message's
	}
}

// claudeSkimBytes is the line length from which the watcher decodes a copy
// of the line with its long string values cut (jsonskim): it needs only
// short fields, and decoding a megabyte-long message whole costs many
// times more than reading it.
const claudeSkimBytes = 16 << 10

// decode decodes one stream-json line into ev. A long assistant or user
// line is decoded from its skimmed copy; anything else (a result, whose
// text is kept, or a line the copy does not decode) is decoded whole.
func (w *claudeWatcher) decode(data []byte, ev *claudeEvent) bool {
	if len(data) >= claudeSkimBytes {
		w.skim = jsonskim.Shrink(w.skim[:0], data, 1024)
		ok := w.read(w.skim, ev)
		if cap(w.skim) > 64<<10 {
			w.skim = nil // do not keep a big buffer for the next lines
		}
		if ok && (ev.Type == "assistant" || ev.Type == "user") {
			return true
		}
		*ev = claudeEvent{}
	}
	return w.read(data, ev)
}

// claudeEvent is the part of a stream-json line the watcher reads.
type claudeEvent struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`

	// system/api_retry (and Error, a category such as "rate_limit")
	RetryDelayMS *float64        `json:"retry_delay_ms"`
	ErrorStatus  json.RawMessage `json:"error_status"`

	// assistant, user
	Message         *claudeMessage  `json:"message"`
	ParentToolUseID *string         `json:"parent_tool_use_id"`
	Error           json.RawMessage `json:"error"`

	// result
	IsError        bool         `json:"is_error"`
	Result         string       `json:"result"`
	TerminalReason string       `json:"terminal_reason"`
	TotalCostUSD   *float64     `json:"total_cost_usd"`
	Usage          *claudeUsage `json:"usage"`
}

type claudeMessage struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
	Usage   *claudeUsage    `json:"usage"`
}

type claudeBlock struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	ToolUseID string `json:"tool_use_id"`
	Text      string `json:"text"`
}

type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

func (u claudeUsage) usage() pilot.Usage {
	return pilot.Usage{
		InputTokens:      u.InputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
}

// claudeDecode decodes a JSON object into v, keeping what fits when some
// value has an unexpected type (a later CLI version's change to one field
// must not hide the rest of the event).
func claudeDecode(data []byte, v any) bool {
	err := json.Unmarshal(data, v)
	var te *json.UnmarshalTypeError
	return err == nil || errors.As(err, &te)
}

// Line implements Watcher.
func (w *claudeWatcher) Line(l pilot.Line) {
	if l.Stream == pilot.Stderr && !l.Truncated {
		w.noteGone(l.Data, claudeSessionGone)
	}
	if l.Stream != pilot.Stdout || l.Truncated {
		return
	}
	data := bytes.TrimSpace(l.Data)
	if len(data) == 0 || data[0] != '{' {
		return
	}
	var ev claudeEvent
	if !w.decode(data, &ev) {
		return
	}
	if ev.SessionID != "" {
		w.sessionID = ev.SessionID
	}
	switch ev.Type {
	case "system":
		w.system(ev, data)
	case "assistant":
		w.assistant(ev)
	case "user":
		w.user(ev)
	case "result":
		w.noteGone(data, claudeSessionGone)
		w.retryOver()
		r := ev
		// Finish reads the result's own fields; what aliases the line
		// or a buffer reused for the next one is not kept.
		r.Message, r.Usage, r.Error, r.ErrorStatus = nil, nil, nil, nil
		w.result = &r
		w.resultLine = string(data)
		w.pending = nil
		w.quiet(0)
		if ev.Usage != nil {
			u := ev.Usage.usage()
			w.usage = &u
		}
		if ev.TotalCostUSD != nil && !math.IsNaN(*ev.TotalCostUSD) {
			if w.usage == nil {
				w.usage = &pilot.Usage{}
			}
			c := *ev.TotalCostUSD
			w.usage.CostUSD = &c
		}
		phase := pilot.PhaseFinished
		if ev.IsError || strings.HasPrefix(ev.Subtype, "error") {
			phase = pilot.PhaseErrored
		}
		w.setPhase(phase, "stream:result/"+ev.Subtype, nil)
	}
}

func (w *claudeWatcher) system(ev claudeEvent, data []byte) {
	reason := "stream:system/" + ev.Subtype
	switch ev.Subtype {
	case "init":
		w.initSeen = true
		if len(w.pending) == 0 {
			w.setPhase(pilot.PhaseAwaitingModel, reason, nil)
		}
	case "api_retry":
		// The model call failed and is retried after retry_delay_ms:
		// silence until then is expected.
		w.retrying(RunnerClaude+":stdout", string(data), claudeRetryReason(ev))
		if d := ev.RetryDelayMS; d != nil && *d > 0 && *d < float64(maxRetryDelay/time.Millisecond) {
			w.quiet(time.Duration(*d * float64(time.Millisecond)))
		}
		if len(w.pending) == 0 {
			w.setPhase(pilot.PhaseAwaitingModel, reason, nil)
		}
	default:
		// Hook events and the like may come before init: the worker is
		// still starting.
		if !w.initSeen && w.result == nil {
			w.setPhase(pilot.PhaseStarting, reason, nil)
		}
	}
}

func (w *claudeWatcher) assistant(ev claudeEvent) {
	m := ev.Message
	if m == nil {
		return
	}
	w.quiet(0)
	w.retryOver()
	// A synthetic message carries an API error's text, not the model's.
	synthetic := m.Model == "<synthetic>" || claudeErrorCategory(ev.Error) != ""
	if m.Usage != nil && m.ID != "" && !synthetic {
		if w.msgUsage == nil {
			w.msgUsage = map[string]pilot.Usage{}
		}
		if _, ok := w.msgUsage[m.ID]; !ok {
			w.msgOrder = append(w.msgOrder, m.ID)
		}
		w.msgUsage[m.ID] = m.Usage.usage()
	}
	if !synthetic {
		for _, b := range w.messageBlocks(m) {
			switch string(b.typ) {
			case "tool_use":
				if len(b.id) > 0 && indexOf(w.pending, b.id) < 0 {
					w.pending = append(w.pending, string(b.id))
				}
			case "text":
				if ev.ParentToolUseID == nil && b.text {
					w.answered = true
				}
			}
		}
	}
	if len(w.pending) > 0 {
		w.setPhase(pilot.PhaseToolRunning, "stream:assistant/tool_use", w.pending)
		return
	}
	w.setPhase(pilot.PhaseAwaitingModel, "stream:assistant", nil)
}

func (w *claudeWatcher) user(ev claudeEvent) {
	if ev.Message == nil {
		return
	}
	closed := false
	for _, b := range w.messageBlocks(ev.Message) {
		if string(b.typ) != "tool_result" {
			continue
		}
		closed = true
		if i := indexOf(w.pending, b.toolUseID); i >= 0 {
			w.pending = slices.Delete(w.pending, i, i+1)
		}
	}
	if !closed {
		return
	}
	w.quiet(0)
	if len(w.pending) > 0 {
		w.setPhase(pilot.PhaseToolRunning, "stream:user/tool_result", w.pending)
		return
	}
	w.setPhase(pilot.PhaseAwaitingModel, "stream:user/tool_result", nil)
}

// claudeRetryReason classifies the failed call an api_retry event
// reports, by its HTTP status, when there was one, and its error category
// ("rate_limit", "server_error", "authentication_failed", "unknown").
func claudeRetryReason(ev claudeEvent) pilot.Classification {
	status, _ := strconv.Atoi(strings.TrimSpace(string(ev.ErrorStatus)))
	return claudeAPIError("", claudeErrorCategory(ev.Error), status)
}

// claudeErrorCategory returns an assistant message's error category
// ("authentication_failed", "rate_limit", ...), or "".
func claudeErrorCategory(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "" // without s, which would be made on the heap
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// Reports is the usage method of pilot.Watcher: each assistant message carries
// its tokens as the run goes; the cost comes only with the final result.
func (w *claudeWatcher) Reports() (tokens, cost bool) { return true, false }

// Usage is the usage method of pilot.Watcher: the result's, once it came, else
// the sum of the messages' latest usage.
func (w *claudeWatcher) Usage() pilot.Usage {
	if w.usage != nil {
		return w.streamWatch.Usage()
	}
	var u pilot.Usage
	for _, id := range w.msgOrder {
		m := w.msgUsage[id]
		u.InputTokens += m.InputTokens
		u.OutputTokens += m.OutputTokens
		u.CacheReadTokens += m.CacheReadTokens
		u.CacheWriteTokens += m.CacheWriteTokens
	}
	return u
}

// Finish implements Watcher. Claude Code reports an API failure as a
// result with subtype "success" and is_error true (then exits 1), so the
// result decides, whatever the exit; max turns or budget is the caller's
// limit, step_capped_partial.
func (w *claudeWatcher) Finish(e pilot.Exit) pilot.Result {
	if w.usage == nil && len(w.msgOrder) > 0 {
		// No result: the run's usage is what its messages reported.
		u := w.Usage()
		w.usage = &u
	}
	w.resume = w.transcript()
	if ended(e) {
		return w.session(pilot.JudgeExit(e))
	}
	r := w.result
	switch {
	case r == nil && e.Code != 0:
		return w.session(pilot.JudgeExit(e))
	case r == nil:
		return w.session(incomplete(RunnerClaude, "a result event"))
	case r.Subtype == "error_max_turns" || r.TerminalReason == "max_turns" || r.Subtype == "error_max_budget_usd":
		return w.session(pilot.Result{Outcome: pilot.StepCappedPartial})
	case r.IsError || strings.HasPrefix(r.Subtype, "error") || strings.HasPrefix(r.TerminalReason, "aborted"):
		return w.session(reportedFailure(e, RunnerClaude, w.resultLine))
	case strings.TrimSpace(r.Result) == "" && !w.answered:
		return w.session(pilot.Result{Outcome: pilot.Empty})
	}
	return w.session(pilot.Result{Outcome: pilot.Completed})
}

// claudeSessionID matches the session ids whose transcript the watcher
// looks up: a UUID in practice, never a path.
var claudeSessionID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// transcript returns the path of the session's transcript in the worker's
// isolated config dir, which is what resuming it needs; "" when the worker
// is not isolated or wrote none.
func (w *claudeWatcher) transcript() string {
	if w.configDir == "" || !claudeSessionID.MatchString(w.sessionID) {
		return ""
	}
	matches, _ := filepath.Glob(filepath.Join(w.configDir, "projects", "*", w.sessionID+".jsonl"))
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil && st.Mode().IsRegular() {
			return m
		}
	}
	return ""
}

// Diagnose is pilot.Watcher's optional Diagnose: a stderr line in Claude Code's
// words or any API's, a result with is_error, and the synthetic assistant
// message that carries an API error.
func (w *claudeWatcher) Diagnose(s pilot.Stream, line string) (pilot.Classification, bool) {
	switch s {
	case pilot.Stderr:
		return claudeWords(line)
	case pilot.Stdout:
		if t, ok := eventLine(line); ok {
			return claudeEventError(t)
		}
	}
	return pilot.Classification{}, false
}

// claudePhrases are Claude Code's own failure texts.
var claudePhrases = []phrase{
	{word: "please run /login", class: pilot.FailProviderAuth},
	{word: "authentication_failed", class: pilot.FailProviderAuth},
	{word: "[claude-code:unrecognized_model]", class: pilot.FailGeneric},
	{word: "requires --verbose", class: pilot.FailGeneric},
}

// claudeWords classifies text in Claude Code's words and the APIs'.
func claudeWords(text string) (pilot.Classification, bool) {
	return ownWords(text, claudePhrases)
}

// claudeCategories are the classes of the error categories Claude Code
// gives an API error (an assistant message's "error", api_retry's);
// invalid_request and unknown prove only an API error.
var claudeCategories = map[string]pilot.FailureClass{
	"authentication_failed": pilot.FailProviderAuth,
	"billing_error":         pilot.FailProviderQuota,
	"rate_limit":            pilot.FailProviderRateLimit,
	"server_error":          pilot.FailProviderServerError,
}

// claudeAPIError classifies an API error Claude Code reports: its text,
// its category and its HTTP status (0 when not given). A text that proves
// a class by itself keeps it: the category is coarse (server_error for a
// refused connection and a dropped stream alike).
func claudeAPIError(text, category string, status int) pilot.Classification {
	if c, ok := claudeWords(text); ok {
		return c
	}
	c := pilot.ClassifyProviderError(text, status)
	if category == "" {
		return c
	}
	class, ok := claudeCategories[category]
	if !ok {
		class = pilot.FailGeneric
	}
	ev := text
	if ev == "" {
		ev = category
	}
	return pilot.Strongest(c, classified(class, ev, "api error category: "+category))
}

// claudeEventError classifies an error event of Claude Code's: a result
// with is_error (its text, or its errors; its api_error_status; a
// terminal_reason blocking_limit is a context limit), and an assistant
// message with an error category.
func claudeEventError(line string) (pilot.Classification, bool) {
	// Most lines are the model's messages: skip them without decoding.
	// An assistant message (often long) is one only with an error member;
	// a result only with is_error.
	typ, typed := leadingType(line)
	switch {
	case typed && typ != "result" && typ != "assistant":
		return pilot.Classification{}, false
	case typ == "assistant":
		if !strings.Contains(line, `"error"`) || !claudeMayHaveError(line) {
			return pilot.Classification{}, false
		}
	case !strings.Contains(line, `"is_error"`) && !strings.Contains(line, `"error"`):
		return pilot.Classification{}, false
	}
	return claudeDecodedError(line)
}

// claudeDecodedError is claudeEventError of a line it decodes.
func claudeDecodedError(line string) (pilot.Classification, bool) {
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
		return pilot.Classification{}, false
	}
	switch {
	case ev.Type == "result" && ev.IsError:
		return proved(claudeResultError(claudeResultText(ev.Result, ev.Errors, ev.Subtype), ev.APIErrorStatus, ev.TerminalReason))
	case ev.Type == "assistant":
		category := claudeErrorCategory(ev.Error)
		if category == "" {
			return pilot.Classification{}, false
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
		return proved(claudeAPIError(strings.Join(texts, " "), category, 0))
	}
	return pilot.Classification{}, false
}

// claudeMayHaveError reports whether decoding an assistant line may give
// it an error category: whether the line is an object (as far as
// jsonskim.Members checks) with a member whose key is "error" in any
// letter case, or escaped or not ASCII (which encoding/json may match
// too), and whose value is a string that is not empty. Another line is
// left undecoded: an "error" in the text of a message is common.
func claudeMayHaveError(line string) bool {
	// Members only reads the line: no copy of it (often long).
	var buf [32]jsonskim.Member
	ms, ok := jsonskim.Members(buf[:0], unsafe.Slice(unsafe.StringData(line), len(line)))
	if !ok {
		return false
	}
	for _, m := range ms {
		if (len(m.Key) == len("error") && asciiEqualFold(m.Key, "error") || !allPlain(m.Key)) &&
			len(m.Value) > 2 && m.Value[0] == '"' {
			return true
		}
	}
	return false
}

// claudeResultText is the text of a result with is_error: its result
// text, else its errors, else its subtype.
func claudeResultText(result string, rawErrors []json.RawMessage, subtype string) string {
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
	return strings.TrimSpace(text)
}

// claudeResultError classifies a result's error text, with its
// api_error_status when set (the note then gives it). terminal_reason blocking_limit is Claude
// Code stopping a conversation too long to continue: a context limit.
func claudeResultError(text string, status *int, reason string) pilot.Classification {
	var c pilot.Classification
	if status != nil {
		c = pilot.ClassifyProviderError(text, *status)
		c.Note = "api_error_status: " + strconv.Itoa(*status)
	} else {
		c, _ = claudeWords(text)
	}
	if reason == "blocking_limit" {
		c = pilot.Strongest(c, classified(pilot.FailContextLimit, text, "terminal_reason: blocking_limit"))
	}
	return c
}

// read decodes one stream-json line into ev (zero) exactly as
// claudeDecode does, and reports what it reports: the line must be valid
// JSON, and a value of the wrong type leaves its field as decoding leaves
// it. It reads the line once, through a jsonskim.Reader (claudeReader); a
// line whose keys encoding/json could match otherwise than exactly
// (fieldKeys: escaped, in another letter case, twice) is decoded by
// claudeDecode itself.
func (w *claudeWatcher) read(data []byte, ev *claudeEvent) bool {
	w.blocksRead = false
	d := claudeReader{skimReader: skimReader{r: jsonskim.NewReader(data)}, w: w}
	if d.r.Enter() {
		d.event(ev)
		if !d.unsure {
			return d.r.Done()
		}
	}
	w.blocksRead = false
	var whole claudeEvent // not ev, which then need not live on the heap
	ok := claudeDecode(data, &whole)
	*ev = whole
	return ok
}

// claudeReader decodes an event as json.Unmarshal decodes it into a
// claudeEvent (skimReader).
type claudeReader struct {
	skimReader
	w *claudeWatcher
}

// The names of the fields of claudeEvent, claudeMessage, claudeUsage and
// claudeBlock, in the order claudeReader and blocks number them.
var (
	claudeEventFields = newFieldSet("type", "subtype", "session_id", "retry_delay_ms", "error_status", "message",
		"parent_tool_use_id", "error", "is_error", "result", "terminal_reason", "total_cost_usd", "usage")
	claudeMessageFields = newFieldSet("id", "model", "content", "usage")
	claudeUsageFields   = newFieldSet("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
	claudeBlockFields   = newFieldSet("type", "id", "tool_use_id", "text")
)

// text reads a string field's value: ok is false for null and for a value
// of another type, which leave the field as it is.
func (d *claudeReader) text() ([]byte, bool) {
	raw := d.r.Raw()
	if len(raw) == 0 || raw[0] != '"' {
		return nil, false
	}
	return jsonskim.Text(raw)
}

// pointer reads the value of a pointer field that is not an object: null
// sets the field to nil (isNull); anything else makes it point to a new
// zero value, which the caller sets from raw when the value fits.
func (d *claudeReader) pointer() (raw []byte, isNull bool) {
	raw = d.r.Raw()
	return raw, string(raw) == "null"
}

// float reads a *float64 field's value.
func (d *claudeReader) float(dst **float64) {
	raw, isNull := d.pointer()
	switch {
	case raw == nil: // invalid: the reading fails
	case isNull:
		*dst = nil
	default:
		f := new(float64)
		if raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9' {
			decodeFloat(raw, f)
		}
		*dst = f
	}
}

func (d *claudeReader) event(ev *claudeEvent) {
	var keys fieldKeys
	for {
		i, ok := d.next(&keys, claudeEventFields)
		if !ok {
			return
		}
		switch i {
		case 0:
			if t, ok := d.text(); ok {
				ev.Type = claudeType(t)
			}
		case 1:
			if t, ok := d.text(); ok {
				ev.Subtype = claudeSubtype(t)
			}
		case 2:
			if t, ok := d.text(); ok {
				ev.SessionID = d.w.sessionString(t)
			}
		case 3:
			d.float(&ev.RetryDelayMS)
		case 4:
			ev.ErrorStatus = d.r.Raw()
		case 5:
			if d.r.Enter() {
				ev.Message = d.w.newMessage()
				d.message(ev.Message)
			} else if raw, isNull := d.pointer(); isNull {
				ev.Message = nil
			} else if raw != nil {
				ev.Message = d.w.newMessage()
			}
		case 6:
			raw, isNull := d.pointer()
			switch {
			case isNull:
				ev.ParentToolUseID = nil
			case raw != nil:
				t, _ := jsonskim.Text(raw)
				s := string(t)
				ev.ParentToolUseID = &s
			}
		case 7:
			ev.Error = d.r.Raw()
		case 8:
			switch string(d.r.Raw()) {
			case "true":
				ev.IsError = true
			case "false":
				ev.IsError = false
			}
		case 9:
			if t, ok := d.text(); ok {
				ev.Result = string(t)
			}
		case 10:
			if t, ok := d.text(); ok {
				ev.TerminalReason = string(t)
			}
		case 11:
			d.float(&ev.TotalCostUSD)
		case 12:
			d.usage(&ev.Usage, &d.w.scratch.usage[0])
		}
	}
}

func (d *claudeReader) message(m *claudeMessage) {
	var keys fieldKeys
	for {
		i, ok := d.next(&keys, claudeMessageFields)
		if !ok {
			return
		}
		switch i {
		case 0:
			if t, ok := d.text(); ok {
				if string(t) != d.w.msgID {
					d.w.msgID = string(t)
				}
				m.ID = d.w.msgID
			}
		case 1:
			if t, ok := d.text(); ok {
				if string(t) != d.w.msgModel {
					d.w.msgModel = string(t)
				}
				m.Model = d.w.msgModel
			}
		case 2:
			start := d.r.Offset()
			if !d.r.EnterArray() {
				m.Content = d.r.Raw()
				continue
			}
			d.blocks()
			// The list as decoding gives it: without the white space after it.
			m.Content = bytes.TrimRight(d.r.Data()[start:d.r.Offset()], " \t\r\n")
		case 3:
			d.usage(&m.Usage, &d.w.scratch.usage[1])
		}
	}
}

// blocks reads the elements of a message's content, a list entered, as
// claudeWatcher.blocks reads them, into the watcher's blocks (blocksRead).
func (d *claudeReader) blocks() {
	out := d.w.blockBuf[:0]
	for d.r.Elem() {
		if !d.r.Enter() {
			d.r.Raw() // not an object: an empty block
			continue
		}
		var b claudeContentBlock
		var text []byte
		var keys fieldKeys
		for {
			i, ok := d.next(&keys, claudeBlockFields)
			if !ok {
				break
			}
			switch i {
			case 0:
				if t, ok := d.text(); ok {
					b.typ = t
				}
			case 1:
				if t, ok := d.text(); ok {
					b.id = t
				}
			case 2:
				if t, ok := d.text(); ok {
					b.toolUseID = t
				}
			case 3:
				text = d.r.Raw()
			}
		}
		b.text = string(b.typ) == "text" && claudeNonBlank(text)
		out = append(out, b)
	}
	d.w.blockBuf, d.w.blocksRead = out, true
}

// messageBlocks returns the blocks of m, the message of the line read
// last: those read with it, else its content's (blocks).
func (w *claudeWatcher) messageBlocks(m *claudeMessage) []claudeContentBlock {
	if w.blocksRead {
		return w.blockBuf
	}
	return w.blocks(m.Content)
}

// newMessage returns the watcher's message for a line's event, zero.
func (w *claudeWatcher) newMessage() *claudeMessage {
	w.scratch.msg = claudeMessage{}
	return &w.scratch.msg
}

// usage reads a *claudeUsage field's value, made in u.
func (d *claudeReader) usage(dst **claudeUsage, u *claudeUsage) {
	*u = claudeUsage{}
	if !d.r.Enter() {
		if raw, isNull := d.pointer(); isNull {
			*dst = nil
		} else if raw != nil {
			*dst = u
		}
		return
	}
	*dst = u
	var keys fieldKeys
	for {
		i, ok := d.next(&keys, claudeUsageFields)
		if !ok {
			return
		}
		n := [...]*int64{&u.InputTokens, &u.OutputTokens, &u.CacheReadInputTokens, &u.CacheCreationInputTokens}[i]
		if v, ok := decodeInt(d.r.Raw()); ok {
			*n = v
		}
	}
}

// decodeInt parses the raw JSON value of an int64 field as encoding/json
// does: ok is false for anything but an integer in range (which leaves the
// field as it is).
func decodeInt(raw []byte) (int64, bool) {
	if len(raw) == 0 || raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, false
	}
	if len(raw) <= 18 && raw[0] != '-' {
		var n int64
		for _, c := range raw {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int64(c-'0')
		}
		return n, true
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

// claudeType and claudeSubtype return an event's type or subtype as a
// string, without allocating for the usual ones.
func claudeType(b []byte) string {
	for _, t := range [...]string{"assistant", "user", "system", "result", "stream_event"} {
		if string(b) == t {
			return t
		}
	}
	return string(b)
}

func claudeSubtype(b []byte) string {
	for _, t := range [...]string{"init", "api_retry", "success", "retry", "error_during_execution", "error_max_turns"} {
		if string(b) == t {
			return t
		}
	}
	return string(b)
}

// claudeContentBlock is what the watcher reads of one block of a
// message's content: its type, id and tool_use_id, as decoding it into a
// claudeBlock gives them, and, for a text block, whether its text holds
// more than white space. They alias the line or a buffer of the watcher.
type claudeContentBlock struct {
	typ, id, toolUseID []byte
	text               bool
}

// blocks reads a message's content, raw and valid JSON, when it is a list
// of blocks (a user message's content may also be a plain string), as
// decoding each element into a claudeBlock does (an element that is not an
// object reads as an empty block and is left out). A block whose keys
// encoding/json could match otherwise than exactly (exactKeys) is decoded
// by claudeDecode.
func (w *claudeWatcher) blocks(content []byte) []claudeContentBlock {
	c := bytes.TrimSpace(content)
	if len(c) == 0 || c[0] != '[' {
		return nil
	}
	var ok bool
	if w.elems, ok = jsonskim.Elements(w.elems[:0], c); !ok {
		return nil
	}
	out := w.blockBuf[:0]
	for _, e := range w.elems {
		if e[0] != '{' || !w.blockSkim.object(e) {
			continue
		}
		var b claudeContentBlock
		if !exactKeys(w.blockSkim.ms, claudeBlockFields) {
			var d claudeBlock
			claudeDecode(e, &d)
			b = claudeContentBlock{typ: []byte(d.Type), id: []byte(d.ID), toolUseID: []byte(d.ToolUseID), text: d.Type == "text" && strings.TrimSpace(d.Text) != ""}
		} else {
			b.typ, _ = skimString(w.blockSkim.raw("type"))
			b.id, _ = skimString(w.blockSkim.raw("id"))
			b.toolUseID, _ = skimString(w.blockSkim.raw("tool_use_id"))
			if string(b.typ) == "text" {
				b.text = claudeNonBlank(w.blockSkim.raw("text"))
			}
		}
		out = append(out, b)
	}
	w.blockBuf = out
	return out
}

// claudeNonBlank reports whether raw, a raw JSON value, is a string whose
// content, decoded, holds more than white space (strings.TrimSpace). It
// decodes only a string whose first byte that is not ASCII white space is
// an escape or not ASCII.
func claudeNonBlank(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '"' {
		return false
	}
	for _, c := range raw[1 : len(raw)-1] {
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
		case c == '\\' || c >= 0x80:
			t, _ := jsonskim.Text(raw)
			return len(bytes.TrimSpace(t)) > 0
		default:
			return true
		}
	}
	return false
}

// indexOf returns the index of the first of ids equal to id, or -1.
func indexOf(ids []string, id []byte) int {
	for i, s := range ids {
		if s == string(id) {
			return i
		}
	}
	return -1
}
