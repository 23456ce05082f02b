package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/jsonskim"
	"github.com/pilotworkers/pilot/sandbox"
)

// RunnerOpencode is the opencode runner's name, as providers files give it.
const RunnerOpencode = "opencode"

// opencodeProviders are the built-in providers of the opencode runner ([Providers]).
var opencodeProviders = []pilot.Provider{
	{Name: "glm", Runner: RunnerOpencode, Model: "zai-coding-plan/glm-5.2", CredentialEnv: "ZHIPU_API_KEY"},
	{Name: "kimi-k3", Runner: RunnerOpencode, Model: "moonshotai/kimi-k3", CredentialEnv: "MOONSHOT_API_KEY"},
}

// OpencodeRunner runs the opencode CLI non-interactively, the prompt on
// stdin (arguments would be joined and quoted, changing the prompt):
//
//	opencode run --format json [--agent plan] [--model M] [--session ID] [Args...] < prompt
//
// Explore and review run the "plan" agent, which denies edits but may run
// shell commands; code, test and resume the default "build" agent. M is
// opencode's "provider/model". README's "The agent CLIs" gives isolation
// (the XDG dirs), the key, resume and exits; opencodeWatcher reads the
// stream, and opencode's --print-logs log on stderr too.
type OpencodeRunner struct{}

// Name implements Runner.
func (OpencodeRunner) Name() string { return RunnerOpencode }

// SandboxNeeds tells pilot's sandbox what the CLI needs (see pilot.Runner). opencode keeps its config in
// $XDG_CONFIG_HOME/opencode, its login (auth.json), session database and
// logs in $XDG_DATA_HOME/opencode, its state in $XDG_STATE_HOME/opencode
// and the provider packages it installs in $XDG_CACHE_HOME/opencode (the
// XDG defaults: ~/.config, ~/.local/share, ~/.local/state, ~/.cache); an
// isolated worker's four are in its run directory. Its provider comes
// from its config: the defaults are its own services, the models.dev
// catalogue and the npm registry it installs provider packages from.
func (OpencodeRunner) SandboxNeeds(p pilot.Provider, home string) sandbox.Needs {
	n := sandbox.Needs{Connect: []string{"opencode.ai:443", "models.dev:443", "registry.npmjs.org:443"}}
	if !isolated(p) {
		for _, x := range [...]struct{ name, rel string }{
			{"XDG_CONFIG_HOME", ".config"}, {"XDG_DATA_HOME", ".local/share"},
			{"XDG_STATE_HOME", ".local/state"}, {"XDG_CACHE_HOME", ".cache"},
		} {
			n.Own = append(n.Own, filepath.Join(userDir(p, home, x.name, x.rel), "opencode"))
		}
		n.Write = n.Own
	}
	return n
}

// opencodeProvider is the provider name pilot gives a BaseURL endpoint in
// the opencode config it writes.
const opencodeProvider = "pilot"

// Command implements Runner.
func (OpencodeRunner) Command(_ context.Context, a pilot.Attempt) (*pilot.Command, error) {
	p := a.Provider
	// --print-logs puts opencode's log on stderr, where the watcher reads
	// what the JSON stream does not say: a model call going out, a tool
	// starting, an API error it will retry. --log-level INFO keeps an
	// inherited OPENCODE_LOG_LEVEL from hiding those lines.
	argv := []string{program(p, RunnerOpencode), "run", "--format", "json", "--print-logs", "--log-level", "INFO"}
	if a.Task.Mode == pilot.ModeExplore || a.Task.Mode == pilot.ModeReview {
		argv = append(argv, "--agent", "plan")
	}

	model := p.Model
	switch {
	case p.BaseURL != "" && p.Model == "":
		return nil, fmt.Errorf("provider %q sets base_url but no model: opencode needs the model id the endpoint serves; set \"model\"", p.Name)
	case p.BaseURL != "":
		model = opencodeProvider + "/" + p.Model
	case model != "" && !strings.Contains(strings.Trim(model, "/"), "/"):
		return nil, fmt.Errorf("provider %q: opencode takes its model as provider/model, not %q; set \"model\" like \"zai-coding-plan/glm-4.6\"", p.Name, model)
	}
	if model != "" {
		argv = append(argv, "--model", model)
	}

	store, err := isolatedDir(a, "opencode")
	if err != nil {
		return nil, err
	}
	env := map[string]string{
		// opencode takes its project directory from $PWD before its
		// working directory: never let an inherited PWD point elsewhere.
		"PWD": a.Workdir,
	}
	if store != "" {
		for _, x := range [...]struct{ name, sub string }{
			{"XDG_CONFIG_HOME", "config"}, {"XDG_DATA_HOME", "data"},
			{"XDG_CACHE_HOME", "cache"}, {"XDG_STATE_HOME", "state"},
		} {
			dir := filepath.Join(store, x.sub)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("creating the worker's %s: %w", x.name, err)
			}
			env[x.name] = dir
		}
		if p.BaseURL != "" {
			if err := writeOpencodeConfig(filepath.Join(store, "config", "opencode", "opencode.json"), p); err != nil {
				return nil, err
			}
		}
		if err := keepPluginSDKOut(filepath.Join(store, "config", "opencode")); err != nil {
			return nil, err
		}
	}

	if r := a.Task.Resume; r != "" {
		id, err := xdgResume(RunnerOpencode, p.Name, r, &store, env)
		if err != nil {
			return nil, err
		}
		argv = append(argv, "--session", id)
	}
	argv = append(argv, p.Args...)

	return &pilot.Command{
		Argv:    argv,
		Env:     env,
		Stdin:   []byte(a.Prompt),
		Watcher: &opencodeWatcher{store: store},
	}, nil
}

// keepPluginSDKOut leaves opencode nothing to install in the config dir
// dir: it installs its plugin SDK, @opencode-ai/plugin (57 MB), where
// node_modules is missing or package-lock.json lacks it, and an isolated
// worker's config dir holds no plugin to use it (README's "opencode's
// plugin SDK").
func keepPluginSDKOut(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o700); err != nil {
		return fmt.Errorf("keeping opencode's plugin install out: %w", err)
	}
	const lock = `{"lockfileVersion":3,"packages":{"":{"dependencies":{"@opencode-ai/plugin":"*"}}}}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), []byte(lock), 0o600); err != nil {
		return fmt.Errorf("keeping opencode's plugin install out: %w", err)
	}
	return nil
}

// writeOpencodeConfig writes the opencode config that makes p.BaseURL a
// provider named "pilot" serving p.Model (opencodeConfig).
func writeOpencodeConfig(path string, p pilot.Provider) error {
	return writeConfigJSON(path, opencodeConfig(p), "opencode")
}

// opencodeConfig is the opencode config that makes p.BaseURL a provider
// named "pilot" serving p.Model. The key is referenced by variable name
// ({env:NAME}), which opencode expands when it loads the file.
func opencodeConfig(p pilot.Provider) map[string]any {
	options := map[string]string{"baseURL": p.BaseURL}
	if p.CredentialEnv != "" {
		options["apiKey"] = "{env:" + p.CredentialEnv + "}"
	}
	return map[string]any{
		"provider": map[string]any{
			opencodeProvider: map[string]any{
				"npm":     "@ai-sdk/openai-compatible",
				"name":    "pilot (" + p.Name + ")",
				"options": options,
				"models":  map[string]any{p.Model: map[string]any{"name": p.Model}},
			},
		},
		"model": opencodeProvider + "/" + p.Model,
	}
}

// writeConfigJSON writes cfg to path as indented JSON, mode 0600, creating
// its directory: the config of the CLI named cli.
func writeConfigJSON(path string, cfg map[string]any, cli string) error {
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("writing the %s config: %w", cli, err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing the %s config: %w", cli, err)
	}
	return nil
}

// opencodeWatcher follows one `opencode run --format json --print-logs`
// stream: the JSON events on stdout, the log lines on stderr. The events
// say when a step's answer starts (step_start) and ends (step_finish, with
// tokens and cost, summed), and a tool only once it finished (tool_use);
// they say nothing while opencode awaits the model, runs a tool or retries,
// which is what the log is read for. Without INFO log lines a step's phase
// is unknown ("stream:opencode-step"), the stall policy's tool-sized wait.
type opencodeWatcher struct {
	streamWatch
	store  string // the isolated session store, if any
	runner string // the runner whose evidence it gives: opencode's when empty (kilo's fork shares the stream)
	// askRuns says a permission the log shows asked for is granted (kilo
	// run --auto answers every ask): the tool then starts, as when the
	// log shows it allowed.
	askRuns bool

	toolStarted bool // the log showed a tool start since the last model call went out

	logs    bool // an INFO log line was seen: the phases come from the log too
	retries int  // the current step's model calls that failed so far

	answered   bool   // a text event with text
	steps      int    // step_finish events seen
	lastReason string // the last step_finish's reason
	done       bool
	errLine    string // the first error event

	in, out, cacheRead, cacheWrite int64
	cost                           float64
	costSeen, tokensSeen           bool

	skim, part skim // the current event's fields, its part's
	// scratch holds what a decoded event's pointers point to (Line
	// reads the event before the next).
	scratch struct {
		cost   float64
		tokens opencodeTokens
	}
}

// opencodeEvent is the part of an opencode run event pilot reads.
type opencodeEvent struct {
	Type      string            `json:"type"`
	SessionID string            `json:"sessionID"`
	Part      opencodeEventPart `json:"part"`
}

// opencodeEventPart is the part of an event's part pilot reads.
type opencodeEventPart struct {
	SessionID string          `json:"sessionID"`
	Text      string          `json:"text"`
	Reason    string          `json:"reason"`
	Cost      *float64        `json:"cost"`
	Tokens    *opencodeTokens `json:"tokens"`
}

// decode reads the event on line into ev. The parts of the answer (text,
// reasoning, tools, a step's start), most of a stream, are read through
// skim: the type, the session ids and the part's text, as decoding would
// give them; the others (a step's end with its usage, errors, done) are
// decoded whole.
func (w *opencodeWatcher) decode(line []byte, ev *opencodeEvent) bool {
	if t, ok := leadingType(line); ok && !opencodePart(string(t)) {
		// Decoded whole at once, without skim's pass over the line
		// first; read below, as before, when it is a part after all
		// (a second type member) or does not decode.
		if w.decodeWhole(line, ev) && !opencodePart(ev.Type) {
			return true
		}
		*ev = opencodeEvent{}
	}
	if !w.skim.object(line) {
		return false
	}
	typ, ok := w.skim.str("type")
	if !ok {
		return false
	}
	switch string(typ) {
	case "text", "reasoning", "tool_use", "step_start":
	default:
		return w.decodeWhole(line, ev)
	}
	sid, ok := w.skim.str("sessionID")
	if !ok {
		return false
	}
	part := w.skim.raw("part")
	if part != nil && string(part) != "null" {
		if !w.part.object(part) {
			return false
		}
		psid, ok1 := w.part.str("sessionID")
		text, ok2 := w.part.str("text")
		if !ok1 || !ok2 {
			return false
		}
		if len(sid) == 0 && w.sessionID == "" {
			ev.Part.SessionID = string(psid) // Line reads it only then
		}
		if len(bytes.TrimSpace(text)) > 0 {
			ev.Part.Text = string(text) // Line reads only whether it is blank
		}
	}
	ev.Type = opencodeType(typ)
	if string(sid) == w.sessionID {
		ev.SessionID = w.sessionID // the same id, not allocated again
	} else {
		ev.SessionID = string(sid)
	}
	return true
}

// opencodeType returns an event type as a string, without allocating for
// the ones the watcher reads.
func opencodeType(b []byte) string {
	switch string(b) {
	case "text":
		return "text"
	case "reasoning":
		return "reasoning"
	case "tool_use":
		return "tool_use"
	case "step_start":
		return "step_start"
	case "step_finish":
		return "step_finish"
	case "error":
		return "error"
	case "done":
		return "done"
	}
	return string(b)
}

// opencodePart reports whether an event of type typ is a part of the
// answer, read through skim (decode).
func opencodePart(typ string) bool {
	switch typ {
	case "text", "reasoning", "tool_use", "step_start":
		return true
	}
	return false
}

// decodeWhole decodes the event on line into ev (zero) exactly as
// json.Unmarshal does, and reports whether json.Unmarshal would succeed:
// the line must be valid JSON and every field opencodeEvent reads must
// hold its type. It reads the line once, through a jsonskim.Reader
// (readWhole); a line whose keys encoding/json could match otherwise than
// exactly (fieldKeys) is decoded by json.Unmarshal itself.
func (w *opencodeWatcher) decodeWhole(line []byte, ev *opencodeEvent) bool {
	ok, sure := w.readWhole(line, ev)
	if !sure {
		var d opencodeEvent // not ev, which then need not live on the heap
		err := json.Unmarshal(line, &d)
		*ev = d
		return err == nil
	}
	return ok
}

// readWhole is decodeWhole's reading: sure is false when json.Unmarshal
// must decide.
func (w *opencodeWatcher) readWhole(line []byte, ev *opencodeEvent) (ok, sure bool) {
	d := opencodeDecoder{skimReader: skimReader{r: jsonskim.NewReader(line)}, w: w}
	if !d.r.Enter() {
		return false, false // no object: Line never asks
	}
	d.event(ev)
	switch {
	case d.unsure:
		return false, false
	case !d.r.Done():
		return false, true // not valid JSON
	}
	return !d.failed, true
}

// opencodeDecoder decodes an event as json.Unmarshal decodes it into an
// opencodeEvent (skimReader). failed records a value of the wrong type
// (json.Unmarshal reads on and fails at the end).
type opencodeDecoder struct {
	skimReader
	w      *opencodeWatcher
	failed bool
}

// null reads the next value, not an object, and reports whether it is
// null; another value is a failure.
func (d *opencodeDecoder) null() bool {
	raw := d.r.Raw()
	if string(raw) == "null" {
		return true
	}
	d.failed = d.failed || raw != nil
	return false
}

// text reads a string field's value (skimString); number a float64's
// (decodeFloat).
func (d *opencodeDecoder) text() []byte {
	t, ok := skimString(d.r.Raw())
	d.failed = d.failed || !ok
	return t
}

func (d *opencodeDecoder) number(dst *float64) {
	raw := d.r.Raw()
	d.failed = d.failed || raw != nil && !decodeFloat(raw, dst)
}

func (d *opencodeDecoder) event(ev *opencodeEvent) {
	var keys fieldKeys
	for {
		i, ok := d.next(&keys, opencodeEventFields)
		if !ok {
			return
		}
		switch i {
		case 0:
			ev.Type = opencodeType(d.text())
		case 1:
			ev.SessionID = d.w.sessionString(d.text())
		case 2:
			if d.r.Enter() {
				d.part(&ev.Part)
			} else {
				d.null()
			}
		}
	}
}

func (d *opencodeDecoder) part(p *opencodeEventPart) {
	var keys fieldKeys
	for {
		i, ok := d.next(&keys, opencodePartFields)
		if !ok {
			return
		}
		switch i {
		case 0:
			p.SessionID = d.w.sessionString(d.text())
		case 1:
			p.Text = string(d.text())
		case 2:
			p.Reason = opencodeReason(d.text())
		case 3:
			raw := d.r.Raw()
			switch {
			case string(raw) == "null":
				p.Cost = nil
			case raw != nil:
				d.w.scratch.cost = 0
				p.Cost = &d.w.scratch.cost
				d.failed = d.failed || !decodeFloat(raw, p.Cost)
			}
		case 4:
			switch {
			case d.r.Enter():
				d.w.scratch.tokens = opencodeTokens{}
				p.Tokens = &d.w.scratch.tokens
				d.tokens(p.Tokens)
			case d.null():
				p.Tokens = nil
			}
		}
	}
}

func (d *opencodeDecoder) tokens(t *opencodeTokens) {
	var keys fieldKeys
	for {
		i, ok := d.next(&keys, opencodeTokensFields)
		if !ok {
			return
		}
		switch i {
		case 0:
			d.number(&t.Input)
		case 1:
			d.number(&t.Output)
		case 2:
			if !d.r.Enter() {
				d.null()
				continue
			}
			var keys fieldKeys
			for {
				i, ok := d.next(&keys, opencodeCacheFields)
				if !ok {
					break
				}
				if i == 0 {
					d.number(&t.Cache.Read)
				} else {
					d.number(&t.Cache.Write)
				}
			}
		}
	}
}

// The names of the fields of opencodeEvent, opencodeEventPart,
// opencodeTokens and its Cache, in the order opencodeDecoder numbers them.
var (
	opencodeEventFields  = newFieldSet("type", "sessionID", "part")
	opencodePartFields   = newFieldSet("sessionID", "text", "reason", "cost", "tokens")
	opencodeTokensFields = newFieldSet("input", "output", "cache")
	opencodeCacheFields  = newFieldSet("read", "write")
)

// opencodeReason returns a step's finish reason as a string, without
// allocating for the usual ones.
func opencodeReason(b []byte) string {
	switch string(b) {
	case "tool-calls":
		return "tool-calls"
	case "stop":
		return "stop"
	case "length":
		return "length"
	}
	return string(b)
}

type opencodeTokens struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
	Cache  struct {
		Read  float64 `json:"read"`
		Write float64 `json:"write"`
	} `json:"cache"`
}

// reasonOpencodeStep is the reason for the unknown phase of an opencode
// step: a model call or the tools it asked for, which opencode's stream does
// not tell apart.
const reasonOpencodeStep = "stream:opencode-step"

// opencodeMaxRetries is how many times opencode retries a failed model call
// (its session retry policy stops after attempt 5), and the delays are its
// backoff: opencodeRetryDelay·2^(n−1) plus up to 25 % jitter, at most
// opencodeRetryMaxDelay when the error carried no retry-after header.
const (
	opencodeMaxRetries    = 5
	opencodeRetryDelay    = 2 * time.Second
	opencodeRetryMaxDelay = 30 * time.Second
)

// opencodeRetryWait is the longest opencode waits before retrying after the
// n-th failed call of a step (from 1), by its backoff without a retry-after
// header; 0 once it no longer retries.
func opencodeRetryWait(n int) time.Duration {
	if n < 1 || n > opencodeMaxRetries {
		return 0
	}
	d := opencodeRetryDelay << (n - 1)
	d += d / 4
	return min(d, opencodeRetryMaxDelay)
}

// Line implements Watcher.
func (w *opencodeWatcher) Line(l pilot.Line) {
	if l.Truncated {
		return
	}
	if l.Stream == pilot.Stderr {
		w.logLine(l)
		return
	}
	if l.Stream != pilot.Stdout {
		return
	}
	if w.leadingPart(l.Data) {
		return
	}
	var ev opencodeEvent
	if !isJSONObjectLine(l.Data) || !w.decode(l.Data, &ev) {
		return
	}
	if ev.SessionID != "" {
		w.sessionID = ev.SessionID
	} else if ev.Part.SessionID != "" && w.sessionID == "" {
		w.sessionID = ev.Part.SessionID
	}
	switch ev.Type {
	case "text", "reasoning", "tool_use", "step_start":
		w.answerPart(ev.Type, strings.TrimSpace(ev.Part.Text) != "")
		return
	case "step_finish", "error", "done":
		// The model answered, or opencode gave up retrying and said
		// why.
		w.retryOver()
	}
	switch ev.Type {
	case "step_finish":
		w.steps++
		w.retries = 0
		w.quiet(0)
		w.lastReason = ev.Part.Reason
		if t := ev.Part.Tokens; t != nil {
			w.tokensSeen = true
			w.in += int64(t.Input)
			w.out += int64(t.Output)
			w.cacheRead += int64(t.Cache.Read)
			w.cacheWrite += int64(t.Cache.Write)
		}
		if ev.Part.Cost != nil {
			w.costSeen = true
			w.cost += *ev.Part.Cost
		}
		if ev.Part.Reason == "tool-calls" {
			w.setPhase(pilot.PhaseAwaitingModel, "stream:step_finish", nil)
		} else {
			w.setPhase(pilot.PhaseFinished, "stream:step_finish", nil)
		}
	case "error":
		if w.errLine == "" {
			w.errLine = clip(string(l.Data), 2000)
		}
		w.quiet(0)
		w.setPhase(pilot.PhaseErrored, "stream:error", nil)
	case "done":
		w.done = true
		w.quiet(0)
		w.setPhase(pilot.PhaseFinished, "stream:done", nil)
	}
}

// answerPart follows a part of the model's answer: a step's start, its text
// (text: not blank), reasoning or a tool's run.
func (w *opencodeWatcher) answerPart(typ string, text bool) {
	if typ != "step_start" {
		// The model answered (a step_start alone does not say so: a
		// stream that breaks off after it is retried).
		w.retryOver()
	}
	switch typ {
	case "step_start":
		// The model's answer is arriving.
		w.quiet(0)
		if w.logs && w.toolStarted {
			// Printed after a tool of its own step started (kilo's
			// stdout lags its log): the tool runs on.
			return
		}
		if w.logs {
			w.setPhase(pilot.PhaseAwaitingModel, "stream:step_start", nil)
		} else {
			w.setPhase(pilot.PhaseUnknown, reasonOpencodeStep, nil)
		}
	case "tool_use":
		// A tool finished; the step goes on: another tool, or the
		// model's answer.
		if w.logs {
			w.setPhase(pilot.PhaseUnknown, "stream:tool_use", nil)
		} else {
			w.setPhase(pilot.PhaseUnknown, reasonOpencodeStep, nil)
		}
	case "reasoning":
		if !w.logs {
			w.setPhase(pilot.PhaseUnknown, reasonOpencodeStep, nil)
		}
	case "text":
		if text {
			w.answered = true
		}
	}
}

// leadingPart follows a part event from its leading members
// (opencodeHead), without reading the rest of the line (the part): such
// an event only moves the phase, when it names the session the watcher
// follows already. It returns false, leaving the line to be read whole,
// when the line is not in that shape, when it names another session or
// none was seen yet (the session id is the resume token), and for a text
// part until one had text (its text decides completed or empty).
func (w *opencodeWatcher) leadingPart(data []byte) bool {
	typ, sid, ok := opencodeHead(data)
	if !ok || w.sessionID == "" || string(sid) != w.sessionID || typ == "text" && !w.answered {
		return false
	}
	w.answerPart(typ, false) // text or not: the answer is known
	return true
}

// opencodeHead reads the type of a part event (text, reasoning, tool_use,
// step_start) and its sessionID from the leading members of the line, the
// way opencode writes them ({"type":"tool_use","timestamp":1787138300274,
// "sessionID":"ses_…",…), in place, or wherever it is among the leading
// members. ok is false for another event, and when the sessionID is not
// plain text (plainText).
func opencodeHead(data []byte) (typ string, sid []byte, ok bool) {
	t, ok := leadingType(data)
	if !ok {
		return "", nil, false
	}
	switch string(t) {
	case "text", "reasoning", "tool_use", "step_start":
		typ = opencodeType(t)
	default:
		return "", nil, false
	}
	rest := data[len(`{"type":"`)+len(t)+1:]
	if rest, ok := bytes.CutPrefix(rest, []byte(`,"timestamp":`)); ok {
		n := 0
		for n < len(rest) && '0' <= rest[n] && rest[n] <= '9' {
			n++
		}
		if sid, ok := plainMembers(rest[n:], "sessionID"); ok && n > 0 {
			return typ, sid, true
		}
	}
	sid, ok = leadingString(data, "sessionID")
	return typ, sid, ok
}

// logLine reads one of opencode's log lines (--print-logs, on stderr):
// "message=stream … small=false" is a model call going out
// (awaiting-model; small=true, the session title, is skipped),
// "message=evaluated … action.action=allow" a tool starting
// (tool-running), and "stream error" a failed call opencode retries
// (a retry notice). Other stderr lines are left to the diagnostics.
func (w *opencodeWatcher) logLine(l pilot.Line) {
	lg, ok := parseOpencodeLog(string(l.Data))
	if !ok {
		return
	}
	if lg.Level == "INFO" || lg.Level == "DEBUG" {
		// The log shows model calls and tools starting (a --log-level
		// of WARN or ERROR through Args would hide them).
		w.logs = true
	}
	if w.sessionID == "" {
		switch {
		case lg.Message == "created" && strings.HasPrefix(lg.ID, "ses_"):
			// The first session created is the run's own.
			w.sessionID = lg.ID
		case lg.SessionID != "" && lg.Small != "true":
			w.sessionID = lg.SessionID
		}
	}
	if w.state.Phase == pilot.PhaseErrored || w.state.Phase == pilot.PhaseFinished {
		// The stream has said how the run ends; the log's last lines
		// (the failed call that ended it, disposing) change nothing.
		return
	}
	switch lg.Message {
	case "stream":
		if lg.Small == "true" {
			return
		}
		w.quiet(0)
		w.toolStarted = false
		w.setPhase(pilot.PhaseAwaitingModel, "log:stream", nil)
	case "stream error":
		if lg.Small == "true" || lg.Level != "ERROR" {
			return
		}
		if c := opencodeLogError(lg); c.Evidence != "" {
			// opencode retries it (or, when the error is not
			// retryable or this was its last try, reports it in an
			// error event at once, which ends the loop).
			w.retrying(w.name()+":stderr", string(l.Data), c)
		}
		w.retries++
		w.quiet(opencodeRetryWait(w.retries))
		w.setPhase(pilot.PhaseAwaitingModel, "log:stream error", nil)
	case "evaluated":
		if lg.Action == "allow" || w.askRuns && lg.Action == "ask" {
			w.toolStarted = true
			w.setPhase(pilot.PhaseToolRunning, "log:evaluated/"+lg.Perm, nil)
		}
	}
}

// name is the runner whose evidence the watcher gives.
func (w *opencodeWatcher) name() string {
	if w.runner == "" {
		return RunnerOpencode
	}
	return w.runner
}

// noteUsage makes the steps' sum the run's usage.
func (w *opencodeWatcher) noteUsage() {
	if !w.tokensSeen && !w.costSeen {
		return
	}
	u := w.Usage()
	w.usage = &u
}

// Reports is the usage method of pilot.Watcher: every step_finish carries its
// tokens and cost as the run goes.
func (w *opencodeWatcher) Reports() (tokens, cost bool) { return true, true }

// Usage is the usage method of pilot.Watcher: the sum of the steps so far.
func (w *opencodeWatcher) Usage() pilot.Usage {
	u := pilot.Usage{InputTokens: w.in, OutputTokens: w.out, CacheReadTokens: w.cacheRead, CacheWriteTokens: w.cacheWrite}
	if w.costSeen {
		c := w.cost
		u.CostUSD = &c
	}
	return u
}

// Finish implements Watcher: an error event, else done or a final
// step_finish (older builds have no done); "length" is the output cap, as
// opencode has no turn cap in a run.
func (w *opencodeWatcher) Finish(e pilot.Exit) pilot.Result {
	w.noteUsage() // the steps' sum, which only the result reads
	if w.store != "" && w.sessionID != "" {
		w.resume = filepath.Join(w.store, w.sessionID)
	}
	if ended(e) {
		return w.session(pilot.JudgeExit(e))
	}
	if w.errLine != "" {
		// opencode's own error event says how the run ended: its class
		// comes before the earlier "stream error" log lines' (the
		// retried calls), which may prove less ("APICallError: boom"
		// without the status the event carries).
		e = streamDiagnostic(e, w.name(), opencodeEventError(w.errLine))
		return w.session(reportedFailure(e, w.name(), w.errLine))
	}
	if e.Code != 0 {
		return w.session(pilot.JudgeExit(e))
	}
	final := w.steps > 0 && w.lastReason != "tool-calls"
	if !w.done && !final {
		return w.session(incomplete(w.name(), "a done event or a final step_finish"))
	}
	switch {
	case w.steps > 0 && w.lastReason == "length":
		return w.session(pilot.Result{Outcome: pilot.StepCappedPartial})
	case w.answered:
		return w.session(pilot.Result{Outcome: pilot.Completed})
	}
	return w.session(pilot.Result{Outcome: pilot.Empty})
}

var _ pilot.PhaseWatcher = (*opencodeWatcher)(nil)

// Diagnose is pilot.Watcher's optional Diagnose: an error event; on stderr, the
// main model call's "stream error" log line (--print-logs), and a line
// that is no log line (opencode's own, a crash) in opencode's words or any
// API's. Its other log lines never count: they quote the model's tool
// input (a bash command's text) and opencode's own chatter.
func (w *opencodeWatcher) Diagnose(s pilot.Stream, line string) (pilot.Classification, bool) {
	switch s {
	case pilot.Stderr:
		if l, isLog := parseOpencodeLog(line); isLog {
			return proved(opencodeLogError(l))
		}
		return ownWords(line, opencodePhrases)
	case pilot.Stdout:
		if t, ok := eventLine(line); ok {
			return proved(opencodeEventError(t))
		}
	}
	return pilot.Classification{}, false
}

// opencodePhrases are the names of opencode's errors that prove a class
// by themselves, or only that the run failed.
var opencodePhrases = []phrase{
	{word: "providerautherror", class: pilot.FailProviderAuth},
	{word: "contextoverflowerror", class: pilot.FailContextLimit},
	{word: "providermodelnotfounderror", class: pilot.FailGeneric},
	{word: "messageoutputlengtherror", class: pilot.FailGeneric},
	{word: "contentfiltererror", class: pilot.FailGeneric},
	{word: "structuredoutputerror", class: pilot.FailGeneric},
	{word: "messageabortederror", class: pilot.FailGeneric},
}

// opencodeEventError classifies an error event: its error's name, message
// and statusCode ([opencodeError]).
func opencodeEventError(line string) pilot.Classification {
	// Only an error event is one: a line without the string "error" is
	// not decoded (most lines are parts of the answer).
	if typ, ok := leadingType(line); ok && typ != "error" || !strings.Contains(line, `"error"`) {
		return pilot.Classification{}
	}
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
		return pilot.Classification{}
	}
	status := 0
	if ev.Error.Data.StatusCode != nil {
		status = *ev.Error.Data.StatusCode
	}
	return opencodeError(ev.Error.Name, ev.Error.Data.Message, status, status != 0, ev.Error.Data.Message)
}

// opencodeError classifies an opencode error named name with message msg
// and HTTP status (0 when not given), read as "<name>: <msg>" (as a failed
// model call's when call is set), with evidence as its evidence (the
// message; the name when it is empty) and the name and status as its note. Bun's connection failures, whose words
// alone prove no provider class, get a note of their own:
//
//   - an UnknownError holding Bun's "Unable to connect. Is the computer
//     able to access the url?" is the model request failing to connect
//     (opencode names no provider there): "provider request".
//   - Bun's "The socket connection was closed unexpectedly" (its
//     ConnectionClosed) is an endpoint that accepted the connection and
//     closed it before the answer was whole, though the AI SDK words every
//     failed fetch "Cannot connect to API: …": Bun reports a response cut
//     mid-stream this way when the close comes before fetch hands the
//     response over (seen against fakellm's Dropped step). It is Bun's
//     wording of undici's "other side closed". So is opencode's APIError
//     "Connection reset by server" (opencodeConnReset): "provider stream
//     closed".
func opencodeError(name, msg string, status int, call bool, evidence string) pilot.Classification {
	if evidence == "" {
		evidence = name
	}
	switch {
	case name == "UnknownError" && strings.Contains(msg, bunConnectFailed):
		return classified(pilot.FailProviderConnection, evidence, "provider request")
	case strings.Contains(msg, bunSocketClosed), name == "APIError" && msg == opencodeConnReset:
		return classified(pilot.FailProviderStreamDisconnect, evidence, "provider stream closed")
	}
	text, note := msg, name
	switch {
	case msg == "":
		text, note = name, ""
	case name != "":
		text = name + ": " + msg
	}
	if status != 0 {
		note += ", statusCode " + strconv.Itoa(status)
	}
	c, _ := ownWords(text, opencodePhrases)
	if call {
		c = pilot.Strongest(pilot.ClassifyProviderError(text, status), c)
	}
	if c.Evidence == "" {
		return c
	}
	c.Evidence, c.Note = evidence, strings.TrimPrefix(note, ", ")
	return c
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

// opencodeLogError classifies an opencode log line: the main model
// call's "stream error", worded like the error event, its error.error the
// evidence.
func opencodeLogError(l opencodeLog) pilot.Classification {
	if l.Level != "ERROR" || l.Message != "stream error" || l.Small == "true" || strings.TrimSpace(l.Err) == "" {
		return pilot.Classification{}
	}
	name, msg, found := strings.Cut(l.Err, ": ")
	if !found || strings.ContainsAny(name, " ") {
		name, msg = "", l.Err
	}
	// The AI SDK's error names carry an "AI_" prefix ("AI_APICallError")
	// that its error events do not.
	return opencodeError(strings.TrimPrefix(name, "AI_"), msg, 0, true, l.Err)
}

// xdgResume returns the session id to pass to --session for a resume
// value r of an opencode-shaped CLI (opencode, kilo) named cli: a bare
// session id, or an isolated worker's <run dir>/<cli>/<session id>, whose
// session store (its XDG dirs) then becomes the worker's own: *store and
// env's XDG_DATA_HOME. *store is this worker's isolated store, or "".
func xdgResume(cli, provider, r string, store *string, env map[string]string) (id string, err error) {
	id = r
	if f, sid, ok := resumeFromStore(r); ok {
		data := filepath.Join(f, "data")
		if st, err := os.Stat(data); err != nil || !st.IsDir() {
			return "", fmt.Errorf("cannot resume %q: %s holds no %s session store (was the run directory removed?)", r, data, cli)
		}
		id, *store = sid, f
		env["XDG_DATA_HOME"] = data
	} else if *store != "" {
		return "", fmt.Errorf("provider %q is isolated, so %s keeps each session in the run directory that made it; resume with that verdict's \"resume\" value (<run dir>/%s/<session id>), not the bare session id %q", provider, cli, cli, r)
	}
	if err := checkResumeID(id); err != nil {
		return "", err
	}
	return id, nil
}
