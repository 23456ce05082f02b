package pilot

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// OpencodeRunner runs the opencode CLI non-interactively:
//
//	opencode run --format json [--agent plan] [--model M] [--session ID] [Args...] < prompt
//
// The prompt goes on stdin: opencode reads stdin whole when it is not a
// terminal and takes it as the message, whereas message arguments are
// joined with spaces and each one that holds a space is wrapped in quotes
// (its own quotes escaped), which would change the prompt the model sees.
//
// Modes: explore and review run opencode's built-in "plan" agent, which
// denies the edit tools (it may still run shell commands: opencode's plan
// agent allows bash, and opencode has no sandbox); code, test and resume run
// the default "build" agent, which allows every tool without asking, so no
// --auto is needed. In a run, opencode rejects the permissions its config
// says to ask about (files outside the workdir, .env files) instead of
// waiting for an answer.
//
// Model is opencode's "provider/model" ("zai-coding-plan/glm-4.6"); a model
// without a provider is refused. Task.Resume continues a session with
// --session.
//
// Isolation (Provider.Isolated or BaseURL): the worker gets XDG_CONFIG_HOME,
// XDG_DATA_HOME, XDG_CACHE_HOME and XDG_STATE_HOME under RunDir/opencode, so
// it sees none of the user's global opencode config, login (auth.json) or
// session database (a project's own opencode.json in the workdir still
// applies): its key must come from the environment (CredentialEnv named as
// the variable opencode's provider reads). With BaseURL, pilot writes
// $XDG_CONFIG_HOME/opencode/opencode.json defining a provider "pilot"
// (@ai-sdk/openai-compatible, options.baseURL, and options.apiKey
// "{env:<CredentialEnv>}" when there is a credential, so the key stays in
// the environment) whose one model is Model, and runs it as
// --model pilot/<Model>; Model is then required. An
// isolated worker's session database stays in its run directory, so its
// verdict's Resume is that store and the session id,
// "<RunDir>/opencode/<session id>"; resuming from such a value points
// XDG_DATA_HOME at that store again. A bare session id cannot be resumed by
// an isolated provider, and is refused.
//
// Its stream (one JSON event per stdout line, each with the session id)
// says when a model step starts (step_start) and ends (step_finish, with the
// step's tokens and cost, which pilot sums), the answer text, and a tool only
// once it has finished (tool_use, completed or error): opencode never says a
// tool is running. So the phase between step_start and step_finish is
// unknown ("stream:opencode-step", a model call or its tools), which gets
// the stall policy's conservative tool-sized threshold, and after a
// step_finish asking for tools it is awaiting-model. Verdict: an error event
// (APIError, ProviderAuthError, ContextOverflowError, ...) is a failure,
// classified from its name, message and statusCode; the done event (newer
// builds) or a final step_finish (reason other than "tool-calls"; older
// builds have no done) ends the run: completed with answer text, empty
// without, and step_capped_partial when the last step stopped at the
// model's output limit (reason "length"; opencode has no turn cap in a run).
// Exit 0 without either is incomplete.
//
// opencode retries rate limits and server errors silently, and some API
// errors make it hang with no output and no exit (issues #8203, #40747,
// #42268); nothing in its stream shows either, so the stall policy
// (unknown phase) and the idle timeout end such a worker.
type OpencodeRunner struct{}

// Name implements Runner.
func (OpencodeRunner) Name() string { return RunnerOpencode }

// opencodeProvider is the provider name pilot gives a BaseURL endpoint in
// the opencode config it writes.
const opencodeProvider = "pilot"

// Command implements Runner.
func (OpencodeRunner) Command(_ context.Context, a Attempt) (*Command, error) {
	p := a.Provider
	argv := []string{program(p, RunnerOpencode), "run", "--format", "json"}
	if a.Task.Mode == ModeExplore || a.Task.Mode == ModeReview {
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
	}

	if r := a.Task.Resume; r != "" {
		id := r
		if from, sid, ok := resumeFromStore(r); ok {
			data := filepath.Join(from, "data")
			if st, err := os.Stat(data); err != nil || !st.IsDir() {
				return nil, fmt.Errorf("cannot resume %q: %s holds no opencode session store (was the run directory removed?)", r, data)
			}
			id, store = sid, from
			env["XDG_DATA_HOME"] = data
		} else if store != "" {
			return nil, fmt.Errorf("provider %q is isolated, so opencode keeps each session in the run directory that made it; resume with that verdict's \"resume\" value (<run dir>/opencode/<session id>), not the bare session id %q", p.Name, r)
		}
		if err := checkResumeID(id); err != nil {
			return nil, err
		}
		argv = append(argv, "--session", id)
	}
	argv = append(argv, p.Args...)

	return &Command{
		Argv:    argv,
		Env:     env,
		Stdin:   []byte(a.Prompt),
		Watcher: &opencodeWatcher{store: store},
	}, nil
}

// writeOpencodeConfig writes the opencode config that makes p.BaseURL a
// provider named "pilot" serving p.Model. The key is referenced by variable
// name ({env:NAME}), which opencode expands when it loads the file.
func writeOpencodeConfig(path string, p Provider) error {
	options := map[string]string{"baseURL": p.BaseURL}
	if p.CredentialEnv != "" {
		options["apiKey"] = "{env:" + p.CredentialEnv + "}"
	}
	cfg := map[string]any{
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
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("writing the opencode config: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing the opencode config: %w", err)
	}
	return nil
}

// opencodeWatcher follows one `opencode run --format json` stream.
type opencodeWatcher struct {
	streamWatch
	store string // the isolated session store, if any

	answered   bool   // a text event with text
	steps      int    // step_finish events seen
	lastReason string // the last step_finish's reason
	done       bool
	errLine    string // the first error event

	in, out, cacheRead, cacheWrite int64
	cost                           float64
	costSeen, tokensSeen           bool
}

// opencodeEvent is the part of an opencode run event pilot reads.
type opencodeEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionID"`
	Part      struct {
		SessionID string          `json:"sessionID"`
		Text      string          `json:"text"`
		Reason    string          `json:"reason"`
		Cost      *float64        `json:"cost"`
		Tokens    *opencodeTokens `json:"tokens"`
	} `json:"part"`
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

// Line implements Watcher.
func (w *opencodeWatcher) Line(l Line) {
	if l.Stream != Stdout || l.Truncated {
		return
	}
	var ev opencodeEvent
	if !isJSONObjectLine(l.Data) || json.Unmarshal(l.Data, &ev) != nil {
		return
	}
	if ev.SessionID != "" {
		w.sessionID = ev.SessionID
	} else if ev.Part.SessionID != "" && w.sessionID == "" {
		w.sessionID = ev.Part.SessionID
	}
	switch ev.Type {
	case "step_start":
		w.setPhase(PhaseUnknown, reasonOpencodeStep, nil)
	case "tool_use", "reasoning":
		// Tools are reported only once finished: the step goes on.
		w.setPhase(PhaseUnknown, reasonOpencodeStep, nil)
	case "text":
		if strings.TrimSpace(ev.Part.Text) != "" {
			w.answered = true
		}
	case "step_finish":
		w.steps++
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
		w.noteUsage()
		if ev.Part.Reason == "tool-calls" {
			w.setPhase(PhaseAwaitingModel, "stream:step_finish", nil)
		} else {
			w.setPhase(PhaseFinished, "stream:step_finish", nil)
		}
	case "error":
		if w.errLine == "" {
			w.errLine = clip(string(l.Data), 2000)
		}
		w.setPhase(PhaseErrored, "stream:error", nil)
	case "done":
		w.done = true
		w.setPhase(PhaseFinished, "stream:done", nil)
	}
}

func (w *opencodeWatcher) noteUsage() {
	if !w.tokensSeen && !w.costSeen {
		return
	}
	u := &Usage{InputTokens: w.in, OutputTokens: w.out, CacheReadTokens: w.cacheRead, CacheWriteTokens: w.cacheWrite}
	if w.costSeen {
		c := w.cost
		u.CostUSD = &c
	}
	w.usage = u
}

// Finish implements Watcher.
func (w *opencodeWatcher) Finish(e Exit) Result {
	if w.store != "" && w.sessionID != "" {
		w.resume = filepath.Join(w.store, w.sessionID)
	}
	if ended(e) {
		return w.session(JudgeExit(e))
	}
	if w.errLine != "" {
		return w.session(reportedFailure(e, RunnerOpencode, w.errLine))
	}
	if e.Code != 0 {
		return w.session(JudgeExit(e))
	}
	final := w.steps > 0 && w.lastReason != "tool-calls"
	if !w.done && !final {
		return w.session(incomplete(RunnerOpencode, "a done event or a final step_finish"))
	}
	switch {
	case w.steps > 0 && w.lastReason == "length":
		return w.session(Result{Outcome: StepCappedPartial})
	case w.answered:
		return w.session(Result{Outcome: Completed})
	}
	return w.session(Result{Outcome: Empty})
}

var _ PhaseWatcher = (*opencodeWatcher)(nil)
