package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/sandbox"
)

// RunnerKilo is the Kilo Code CLI runner's name, as providers files give it.
const RunnerKilo = "kilo"

// KiloRunner runs Kilo Code's CLI (npm @kilocode/cli, 7.x), a fork of
// opencode, non-interactively, the prompt on stdin:
//
//	kilo run --format json --print-logs --log-level INFO [--auto | --agent plan] [--model M] [--session ID] [Args...] < prompt
//
// Its stream and log are opencode's (formats-kilo.md), read by
// opencode's watcher; what differs is the names (the binary, the "kilo"
// XDG dirs, kilo.json), its permissions and the errors a run ends with.
// Code, test and resume pass --auto: kilo's run refuses every permission
// its agent asks for (its "code" agent asks before any shell command) and
// then fails the run, unless --auto grants them. Explore and review run
// its "plan" agent without --auto, which denies edits and every shell
// command but a read-only list (cat, ls, grep, …).
type KiloRunner struct{}

// Name implements Runner.
func (KiloRunner) Name() string { return RunnerKilo }

// SandboxNeeds tells pilot's sandbox what the CLI needs (see pilot.Runner).
// kilo keeps its config in $XDG_CONFIG_HOME/kilo, its session database
// (kilo.db), log and telemetry id in $XDG_DATA_HOME/kilo, a sandbox policy
// cache in $XDG_STATE_HOME/kilo-sandbox-policy beside $XDG_STATE_HOME/kilo,
// and its cache in $XDG_CACHE_HOME/kilo; an isolated worker's are in its
// run directory. Its default provider is Kilo's own gateway (api.kilo.ai,
// which also serves its model list); it asks models.dev for the model
// catalogue. Its connectivity probes while offline (kilo.ai, example.com,
// cloudflare.com) are not needed: denied, kilo retries all the same.
func (KiloRunner) SandboxNeeds(p pilot.Provider, home string) sandbox.Needs {
	n := sandbox.Needs{Connect: []string{"api.kilo.ai:443", "models.dev:443"}}
	if !isolated(p) {
		for _, x := range [...]struct{ name, rel, sub string }{
			{"XDG_CONFIG_HOME", ".config", "kilo"}, {"XDG_DATA_HOME", ".local/share", "kilo"},
			{"XDG_STATE_HOME", ".local/state", "kilo"}, {"XDG_STATE_HOME", ".local/state", "kilo-sandbox-policy"},
			{"XDG_CACHE_HOME", ".cache", "kilo"},
		} {
			n.Own = append(n.Own, filepath.Join(userDir(p, home, x.name, x.rel), x.sub))
		}
		n.Write = n.Own
	}
	return n
}

// Command implements Runner.
func (KiloRunner) Command(_ context.Context, a pilot.Attempt) (*pilot.Command, error) {
	p := a.Provider
	// --print-logs --log-level INFO, as for opencode: the log says when a
	// model call goes out, a tool starts and a call failed and is retried.
	argv := []string{program(p, RunnerKilo), "run", "--format", "json", "--print-logs", "--log-level", "INFO"}
	auto := false
	if a.Task.Mode == pilot.ModeExplore || a.Task.Mode == pilot.ModeReview {
		argv = append(argv, "--agent", "plan")
	} else {
		argv = append(argv, "--auto")
		auto = true
	}

	model := p.Model
	switch {
	case p.BaseURL != "" && p.Model == "":
		return nil, fmt.Errorf("provider %q sets base_url but no model: kilo needs the model id the endpoint serves; set \"model\"", p.Name)
	case p.BaseURL != "":
		model = opencodeProvider + "/" + p.Model
	case model != "" && !strings.Contains(strings.Trim(model, "/"), "/"):
		return nil, fmt.Errorf("provider %q: kilo takes its model as provider/model, not %q; set \"model\" like \"kilo/anthropic/claude-sonnet-4.5\"", p.Name, model)
	}
	if model != "" {
		argv = append(argv, "--model", model)
	}

	store, err := isolatedDir(a, RunnerKilo)
	if err != nil {
		return nil, err
	}
	env := map[string]string{
		// kilo, like opencode, takes its project directory from $PWD.
		"PWD": a.Workdir,
	}
	if _, set := p.Env["KILO_TELEMETRY_LEVEL"]; !set {
		// Its PostHog telemetry is on unless this says otherwise (any
		// value but "all"); a failed send prints stack traces on stderr.
		env["KILO_TELEMETRY_LEVEL"] = "off"
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
			// kilo reads opencode's config format, as kilo.json. Its
			// providers enabled by default (its own gateway, apertis)
			// fetch their model lists at start-up whatever
			// KILO_DISABLE_MODELS_FETCH says: only pilot's is enabled.
			cfg := opencodeConfig(p)
			cfg["enabled_providers"] = []string{opencodeProvider}
			if err := writeConfigJSON(filepath.Join(store, "config", "kilo", "kilo.json"), cfg, "kilo"); err != nil {
				return nil, err
			}
		}
		if err := keepBashMigrationOut(filepath.Join(store, "config", "kilo")); err != nil {
			return nil, err
		}
	}

	if r := a.Task.Resume; r != "" {
		id, err := xdgResume(RunnerKilo, p.Name, r, &store, env)
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
		Watcher: &kiloWatcher{opencodeWatcher: opencodeWatcher{store: store, runner: RunnerKilo, askRuns: auto}},
	}, nil
}

// keepBashMigrationOut marks the config dir dir as migrated: without its
// marker, kilo rewrites the first config file it finds there on start-up
// to allow every shell command ("permission": {"bash": "allow"}, a one-off
// migration for its existing users), so pilot's kilo.json would not stay
// as pilot wrote it, and the agents' own shell rules would meet a global
// allow.
func keepBashMigrationOut(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("writing kilo's config dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".bash-permission-migrated"), nil, 0o600); err != nil {
		return fmt.Errorf("writing kilo's config dir: %w", err)
	}
	return nil
}

// kiloWatcher follows one `kilo run --format json --print-logs` stream:
// opencode's events and log (opencodeWatcher), and kilo's own error
// events, whose error is a sentence rather than opencode's named error
// (kiloNoOutput, kiloRejected).
type kiloWatcher struct {
	opencodeWatcher
}

// kiloNoOutput is the error kilo's run ends with, exiting 1, when the
// model answered nothing: pilot's empty verdict.
const kiloNoOutput = "run ended without an assistant message"

// kiloRejected is the error kilo's run ends with when it refused a
// permission its agent asked for (without --auto), exiting 1 after the
// model's answer.
const kiloRejected = "run ended with an auto-rejected permission"

// kiloGone is what kilo prints on stderr, and exits 1, when the session
// to resume does not exist.
const kiloGone = "Session not found"

// Line implements Watcher.
func (w *kiloWatcher) Line(l pilot.Line) {
	if l.Stream == pilot.Stderr && !l.Truncated {
		w.noteGoneLine(l.Data)
	}
	w.opencodeWatcher.Line(l)
}

// noteGoneLine records kilo's "Session not found" line, which it prints
// alone (as its UI's error: "Error: Session not found"), never as a log
// line or inside one.
func (w *kiloWatcher) noteGoneLine(data []byte) {
	if w.gone != "" || len(data) > 200 {
		return
	}
	if s := stripANSI(strings.TrimSpace(string(data))); s == kiloGone || s == "Error: "+kiloGone {
		w.gone = s
	}
}

// Finish implements Watcher: opencode's judgement, but a run that kilo
// ended with kiloNoOutput is empty, not failed, and another of its
// sentences is the evidence of the failure it ended with.
func (w *kiloWatcher) Finish(e pilot.Exit) pilot.Result {
	msg, own := kiloStringError(w.errLine)
	if !own || ended(e) {
		return w.opencodeWatcher.Finish(e)
	}
	if strings.HasPrefix(msg, kiloNoOutput) && !w.answered {
		r := w.opencodeWatcher.Finish(e)
		r.Outcome, r.Classification, r.DecidedBy = pilot.Empty, pilot.Classification{}, ""
		return r
	}
	// The stream's own error comes first, as opencode's named ones do.
	return w.opencodeWatcher.Finish(streamDiagnostic(e, RunnerKilo, classified(pilot.FailGeneric, clip(msg, 2000), "")))
}

// Diagnose is pilot.Watcher's optional Diagnose: opencode's, but on stderr
// the lines of kilo's second log format ("INFO  2026-12-06T15:43:19
// +17441ms service=… ", which --print-logs mixes with opencode's logfmt)
// and its telemetry client's complaints never count (they name network
// errors of kilo's own services, not the model's); on stdout an error
// event whose error is a sentence proves only that the run failed.
func (w *kiloWatcher) Diagnose(s pilot.Stream, line string) (pilot.Classification, bool) {
	switch s {
	case pilot.Stderr:
		if kiloNoise(line) {
			return pilot.Classification{}, false
		}
	case pilot.Stdout:
		if t, ok := eventLine(line); ok {
			if msg, ok := kiloStringError(t); ok {
				return proved(classified(pilot.FailGeneric, clip(msg, 2000), ""))
			}
		}
	}
	return w.opencodeWatcher.Diagnose(s, line)
}

// kiloStringError returns the error of an error event whose error is a
// string, as kilo's own run errors are: {"type":"error",…,"error":"…"}.
func kiloStringError(line string) (string, bool) {
	if typ, ok := leadingType(line); !ok || typ != "error" {
		return "", false
	}
	var ev struct {
		Error any `json:"error"`
	}
	if json.Unmarshal([]byte(line), &ev) != nil {
		return "", false
	}
	msg, ok := ev.Error.(string)
	return msg, ok && msg != ""
}

// kiloNoise reports whether a stderr line is one pilot never reads as a
// failure: a line of kilo's second log format, or its telemetry client's
// (PostHog's) error report and the stack and fields printed with it.
func kiloNoise(line string) bool {
	t := strings.TrimSpace(line)
	for _, lvl := range [...]string{"DEBUG ", "INFO  ", "WARN  ", "ERROR "} {
		if rest, ok := strings.CutPrefix(t, lvl); ok && len(rest) > 0 && '0' <= rest[0] && rest[0] <= '9' {
			return true
		}
	}
	if strings.Contains(t, "PostHog") || strings.Contains(t, "posthog.com") {
		return true
	}
	switch {
	case strings.HasPrefix(t, "at ") && strings.Contains(t, "/$bunfs/"),
		t == "warn: Was there a typo in the url or port?",
		strings.HasPrefix(t, "errno: "),
		t == `code: "FailedToOpenSocket"`, t == `code: "ConnectionRefused"`:
		return true
	}
	return false
}

// stripANSI removes the colour escapes (ESC [ … m) kilo's UI writes.
func stripANSI(s string) string {
	if !strings.Contains(s, "\x1b[") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < '@' || s[j] > '~') {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

var _ pilot.PhaseWatcher = (*kiloWatcher)(nil)
