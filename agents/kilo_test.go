package agents_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

func TestKiloCommandArgv(t *testing.T) {
	base := pilot.Provider{Name: "kilo", Runner: agents.RunnerKilo}
	withModel := base
	withModel.Model = "kilo/anthropic/claude-sonnet-4.5"
	withArgs := withModel
	withArgs.Binary = "/opt/kilo/bin/kilo"
	withArgs.Args = []string{"--variant", "high"}
	head := []string{"kilo", "run", "--format", "json", "--print-logs", "--log-level", "INFO"}
	with := func(h []string, rest ...string) []string { return append(append([]string(nil), h...), rest...) }
	tests := []struct {
		name   string
		p      pilot.Provider
		mode   pilot.Mode
		resume string
		want   []string
	}{
		{"code answers permissions", base, pilot.ModeCode, "", with(head, "--auto")},
		{"test", withModel, pilot.ModeTest, "", with(head, "--auto", "--model", "kilo/anthropic/claude-sonnet-4.5")},
		{"explore runs the plan agent, asking nothing", withModel, pilot.ModeExplore, "",
			with(head, "--agent", "plan", "--model", "kilo/anthropic/claude-sonnet-4.5")},
		{"review runs the plan agent", base, pilot.ModeReview, "", with(head, "--agent", "plan")},
		{"resume", withModel, pilot.ModeResume, "ses_abc", with(head, "--auto", "--model", "kilo/anthropic/claude-sonnet-4.5", "--session", "ses_abc")},
		{"binary and args last", withArgs, pilot.ModeCode, "",
			append([]string{"/opt/kilo/bin/kilo"}, with(head[1:], "--auto", "--model", "kilo/anthropic/claude-sonnet-4.5", "--variant", "high")...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := agentAttempt(t, agents.RunnerKilo, tc.p, tc.mode, tc.resume, flagPrompt, "/work/tree")
			cmd := agentCommand(t, agents.KiloRunner{}, a)
			if diff := cmp.Diff(tc.want, cmd.Argv); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			if string(cmd.Stdin) != a.Prompt {
				t.Errorf("stdin = %q, want the prompt %q", cmd.Stdin, a.Prompt)
			}
			if got := cmd.Env["PWD"]; got != a.Workdir {
				t.Errorf("PWD = %q, want the workdir %q", got, a.Workdir)
			}
			if got := cmd.Env["KILO_TELEMETRY_LEVEL"]; got != "off" {
				t.Errorf("KILO_TELEMETRY_LEVEL = %q, want off", got)
			}
			for _, k := range []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME"} {
				if v, ok := cmd.Env[k]; ok {
					t.Errorf("%s = %q without isolation", k, v)
				}
			}
			if _, ok := cmd.Watcher.(pilot.PhaseWatcher); !ok {
				t.Errorf("watcher %T follows no phases", cmd.Watcher)
			}
		})
	}

	// A provider that sets the telemetry level keeps its own.
	p := base
	p.Env = map[string]string{"KILO_TELEMETRY_LEVEL": "all"}
	cmd := agentCommand(t, agents.KiloRunner{}, agentAttempt(t, agents.RunnerKilo, p, pilot.ModeCode, "", flagPrompt, "/work/tree"))
	if v, ok := cmd.Env["KILO_TELEMETRY_LEVEL"]; ok {
		t.Errorf("KILO_TELEMETRY_LEVEL = %q over the provider's own", v)
	}
}

func TestKiloCommandRefusals(t *testing.T) {
	base := pilot.Provider{Name: "kilo", Runner: agents.RunnerKilo}
	noProvider := base
	noProvider.Model = "claude-sonnet-4.5"
	baseURLNoModel := base
	baseURLNoModel.BaseURL = "http://127.0.0.1:8080/v1"
	isolated := base
	isolated.Isolated = true
	tests := []struct {
		name   string
		p      pilot.Provider
		resume string
		want   string // in the error
	}{
		{"model without provider", noProvider, "", "provider/model"},
		{"base_url without model", baseURLNoModel, "", "no model"},
		{"resume id read as a flag", base, "--help", "not a session id"},
		{"isolated resume by bare id", isolated, "ses_abc", "resume with that verdict's"},
		{"resume from a store that is gone", base, "/nonexistent/run/kilo/ses_abc", "holds no kilo session store"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mode := pilot.ModeCode
			if tc.resume != "" {
				mode = pilot.ModeResume
			}
			wantRefusal(t, agents.KiloRunner{}, agentAttempt(t, agents.RunnerKilo, tc.p, mode, tc.resume, flagPrompt, ""), tc.want)
		})
	}
}

// A BaseURL provider gets an isolated XDG tree with a kilo.json that names
// the key's variable (never the key), and a resume value that finds the
// session store again.
func TestKiloBaseURLIsolationAndResume(t *testing.T) {
	const secret = "sk-kilo-test-secret-1234"
	p := replayProvider(t, agents.RunnerKilo, "../testdata/kilo/stream/success")
	p.BaseURL = "http://127.0.0.1:9/v1"
	p.Model = "fake-model"
	p.CredentialEnv = "FAKE_API_KEY"
	d := secretDispatcher(t, p, secret)

	v := dispatchCompleted(t, d, pilot.Task{Provider: p.Name, Mode: pilot.ModeCode, Prompt: "add a flag"})
	runDir := filepath.Dir(v.Record)
	store := filepath.Join(runDir, "kilo")
	call, env := readCall(t, p)
	if !subsequence(call.Argv, []string{"--model", "pilot/fake-model"}) {
		t.Errorf("argv %q has no --model pilot/fake-model", call.Argv)
	}
	for k, sub := range map[string]string{"XDG_CONFIG_HOME": "config", "XDG_DATA_HOME": "data", "XDG_CACHE_HOME": "cache", "XDG_STATE_HOME": "state"} {
		want := filepath.Join(store, sub)
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
		if st, err := os.Stat(want); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v; want a 0700 dir", want, err)
		}
	}
	if env["FAKE_API_KEY"] != secret {
		t.Errorf("the worker's FAKE_API_KEY is not the secret")
	}

	data := readPrivateFile(t, filepath.Join(store, "config", "kilo", "kilo.json"))
	var cfg struct {
		Model    string `json:"model"`
		Provider map[string]struct {
			NPM     string            `json:"npm"`
			Options map[string]string `json:"options"`
			Models  map[string]any    `json:"models"`
		} `json:"provider"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("config: %v\n%s", err, data)
	}
	pp, ok := cfg.Provider["pilot"]
	if !ok || cfg.Model != "pilot/fake-model" || pp.NPM != "@ai-sdk/openai-compatible" ||
		pp.Options["baseURL"] != p.BaseURL || pp.Options["apiKey"] != "{env:FAKE_API_KEY}" || pp.Models["fake-model"] == nil {
		t.Errorf("config does not define provider pilot for %s with {env:FAKE_API_KEY}:\n%s", p.BaseURL, data)
	}
	noSecretIn(t, runDir, secret)
	// kilo's one-off rewrite of the config (a global bash allow) is
	// marked done.
	if _, err := os.Stat(filepath.Join(store, "config", "kilo", ".bash-permission-migrated")); err != nil {
		t.Errorf("no migration marker: %v", err)
	}

	const sid = "ses_db3fa1eb2ffehJNDWUsvehBwck" // the recording's
	if v.SessionID != sid || v.Resume != filepath.Join(store, sid) {
		t.Fatalf("session %q resume %q; want %q and %q", v.SessionID, v.Resume, sid, filepath.Join(store, sid))
	}
	mustDispatch(t, d, pilot.Task{Provider: p.Name, Mode: pilot.ModeResume, Prompt: "go on", Resume: v.Resume})
	call, env = readCall(t, p)
	if !subsequence(call.Argv, []string{"--session", sid}) {
		t.Errorf("resume argv %q has no --session %s", call.Argv, sid)
	}
	if env["XDG_DATA_HOME"] != filepath.Join(store, "data") {
		t.Errorf("resumed XDG_DATA_HOME = %q, want the first run's %q", env["XDG_DATA_HOME"], filepath.Join(store, "data"))
	}
}

// kilo's own run errors are sentences, not opencode's named errors: an
// answer with no text is empty, a refused permission a failure in the
// CLI's words; its second log format and its telemetry's complaints on
// stderr prove nothing; "Session not found" says the session is gone.
func TestKiloOwnErrors(t *testing.T) {
	const (
		sid      = `"sessionID":"ses_db3f0000000000000000000000"`
		start    = `{"type":"step_start","timestamp":1,` + sid + `,"part":{"type":"step-start"}}`
		finish   = `{"type":"step_finish","timestamp":2,` + sid + `,"part":{"type":"step-finish","reason":"stop","cost":0,"tokens":{"input":100,"output":0,"cache":{"read":0,"write":0}}}}`
		text     = `{"type":"text","timestamp":2,` + sid + `,"part":{"type":"text","text":"I would run rm."}}`
		noOutput = `{"type":"error","timestamp":3,` + sid + `,"error":"run ended without an assistant message; the model returned no output"}`
		rejected = `{"type":"error","timestamp":3,` + sid + `,"error":"run ended with an auto-rejected permission; pass --auto for autonomous use"}`
	)
	out := func(s string) pilot.Line {
		return pilot.Line{Stream: pilot.Stdout, Data: []byte(s), Size: int64(len(s))}
	}
	errl := func(s string) pilot.Line {
		return pilot.Line{Stream: pilot.Stderr, Data: []byte(s), Size: int64(len(s))}
	}
	exit1 := pilot.Exit{Runner: agents.RunnerKilo, Started: true, Code: 1}

	newWatcher := func(t *testing.T) pilot.PhaseWatcher {
		return agentWatcher(t, agents.KiloRunner{}, agentAttempt(t, agents.RunnerKilo, pilot.Provider{Name: "kilo"}, pilot.ModeCode, "", flagPrompt, ""))
	}
	t.Run("no output is empty", func(t *testing.T) {
		w := newWatcher(t)
		for _, l := range []string{start, finish, noOutput} {
			w.Line(out(l))
		}
		if r := w.Finish(exit1); r.Outcome != pilot.Empty || r.SessionID != "ses_db3f0000000000000000000000" {
			t.Errorf("outcome %s (%s), session %q; want empty with the session", r.Outcome, r.Class, r.SessionID)
		}
	})
	t.Run("rejected permission fails in kilo's words", func(t *testing.T) {
		w := newWatcher(t)
		for _, l := range []string{start, text, finish, rejected} {
			w.Line(out(l))
		}
		r := w.Finish(exit1)
		if r.Outcome != pilot.Failed || r.Class != pilot.FailGeneric || r.Evidence != "run ended with an auto-rejected permission; pass --auto for autonomous use" {
			t.Errorf("got %s %s %q; want a generic failure with kilo's sentence", r.Outcome, r.Class, r.Evidence)
		}
	})
	t.Run("noise proves nothing", func(t *testing.T) {
		diag, err := agents.Classifier(agents.KiloRunner{})
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range []string{
			`WARN  2026-12-06T15:49:40 +1872ms service=session.network sessionID=ses_x requestID=que_x message=Connection reset by server waiting for network`,
			`WARN  2026-12-06T15:43:20 +46ms service=model-cache providerID=kilo error={"kind":"network"} model fetch error`,
			`telemetry background flush failed PostHogFetchNetworkError: Network error while fetching PostHog`,
			`path: "https://us.i.posthog.com/batch/",`,
			`code: "FailedToOpenSocket"`,
			`at async fetchWithRetry (/$bunfs/root/src/index.js:345:16866)`,
		} {
			if c, ok := diag(pilot.Stderr, line); ok {
				t.Errorf("%q proves %s; want nothing", line, c.Class)
			}
		}
		// opencode's logfmt "stream error" line still counts.
		const streamErr = `timestamp=2026-12-06T15:47:18.380Z level=ERROR run=1 message="stream error" providerID=pilot small=false error.error="AI_APICallError: Invalid API key (fakellm)"`
		if c, ok := diag(pilot.Stderr, streamErr); !ok || c.Class != pilot.FailProviderAuth {
			t.Errorf("stream error line: %s, %v; want provider-auth", c.Class, ok)
		}
		if c, ok := diag(pilot.Stdout, rejected); !ok || c.Class != pilot.FailGeneric {
			t.Errorf("rejected event: %s, %v; want generic-error", c.Class, ok)
		}
	})
	t.Run("session not found", func(t *testing.T) {
		w := newWatcher(t)
		w.Line(errl("\x1b[91m\x1b[1mError: \x1b[0mSession not found"))
		if r := w.Finish(exit1); r.SessionGone != "Error: Session not found" || r.Outcome != pilot.Failed {
			t.Errorf("SessionGone %q, outcome %s; want kilo's line and a failure", r.SessionGone, r.Outcome)
		}
		w = newWatcher(t)
		w.Line(out(`{"type":"text",` + sid + `,"part":{"type":"text","text":"Session not found"}}`))
		if r := w.Finish(exit1); r.SessionGone != "" {
			t.Errorf("SessionGone %q from the model's text", r.SessionGone)
		}
	})
}

// With --auto a shell command the log shows asked for runs (kilo grants
// it): the tool-running phase; without (explore) kilo refuses it. The
// step_start kilo may print after its log's tool start (the recordings
// tool, code-sh-marker-auto, sigterm-tool-pid; in tool-auto it came
// first) leaves a running tool running.
func TestKiloAskedToolRunsUnderAuto(t *testing.T) {
	const asked = `timestamp=2026-12-06T16:00:21.939Z level=INFO run=1 message=evaluated permission=bash pattern="sh -c 'echo made'" action.permission=bash action.action=ask action.pattern=* action.source=agent`
	for _, tc := range []struct {
		mode pilot.Mode
		want pilot.SessionPhase
	}{{pilot.ModeCode, pilot.PhaseToolRunning}, {pilot.ModeExplore, pilot.PhaseAwaitingModel}} {
		w := agentWatcher(t, agents.KiloRunner{}, agentAttempt(t, agents.RunnerKilo, pilot.Provider{Name: "kilo"}, tc.mode, "", flagPrompt, ""))
		for _, l := range []string{
			`timestamp=2026-12-06T16:00:21.590Z level=INFO run=1 message=stream providerID=pilot modelID=fake-model session.id=ses_x small=false agent=code mode=primary`,
			asked,
		} {
			w.Line(pilot.Line{Stream: pilot.Stderr, Data: []byte(l), Size: int64(len(l))})
		}
		const start = `{"type":"step_start","timestamp":1796572583461,"sessionID":"ses_x","part":{"id":"prt_1","sessionID":"ses_x","messageID":"msg_1","type":"step-start"}}`
		w.Line(pilot.Line{Stream: pilot.Stdout, Data: []byte(start), Size: int64(len(start))})
		if st, _, _ := w.StreamState(); st.Phase != tc.want {
			t.Errorf("%s: phase %s, want %s", tc.mode, st.Phase, tc.want)
		}
	}
}
