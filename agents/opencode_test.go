package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

func TestOpencodeCommandArgv(t *testing.T) {
	base := pilot.Provider{Name: "oc", Runner: agents.RunnerOpencode}
	withModel := base
	withModel.Model = "zai-coding-plan/glm-4.6"
	withArgs := withModel
	withArgs.Binary = "/opt/opencode/bin/opencode"
	withArgs.Args = []string{"--variant", "high"}
	tests := []struct {
		name   string
		p      pilot.Provider
		mode   pilot.Mode
		resume string
		want   []string
	}{
		{"code", base, pilot.ModeCode, "", []string{"opencode", "run", "--format", "json", "--print-logs", "--log-level", "INFO"}},
		{"test", withModel, pilot.ModeTest, "", []string{"opencode", "run", "--format", "json", "--print-logs", "--log-level", "INFO", "--model", "zai-coding-plan/glm-4.6"}},
		{"explore runs the plan agent", withModel, pilot.ModeExplore, "",
			[]string{"opencode", "run", "--format", "json", "--print-logs", "--log-level", "INFO", "--agent", "plan", "--model", "zai-coding-plan/glm-4.6"}},
		{"review runs the plan agent", base, pilot.ModeReview, "", []string{"opencode", "run", "--format", "json", "--print-logs", "--log-level", "INFO", "--agent", "plan"}},
		{"resume", withModel, pilot.ModeResume, "ses_abc",
			[]string{"opencode", "run", "--format", "json", "--print-logs", "--log-level", "INFO", "--model", "zai-coding-plan/glm-4.6", "--session", "ses_abc"}},
		{"explore resuming", base, pilot.ModeExplore, "ses_abc",
			[]string{"opencode", "run", "--format", "json", "--print-logs", "--log-level", "INFO", "--agent", "plan", "--session", "ses_abc"}},
		{"binary and args last", withArgs, pilot.ModeCode, "",
			[]string{"/opt/opencode/bin/opencode", "run", "--format", "json", "--print-logs", "--log-level", "INFO", "--model", "zai-coding-plan/glm-4.6", "--variant", "high"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := agentAttempt(t, agents.RunnerOpencode, tc.p, tc.mode, tc.resume, flagPrompt, "/work/tree")
			cmd := agentCommand(t, agents.OpencodeRunner{}, a)
			if diff := cmp.Diff(tc.want, cmd.Argv); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			// The prompt goes on stdin, untouched, and never into argv.
			if string(cmd.Stdin) != a.Prompt {
				t.Errorf("stdin = %q, want the prompt %q", cmd.Stdin, a.Prompt)
			}
			if got := cmd.Env["PWD"]; got != a.Workdir {
				t.Errorf("PWD = %q, want the workdir %q", got, a.Workdir)
			}
			for _, k := range []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME"} {
				if v, ok := cmd.Env[k]; ok {
					t.Errorf("%s = %q without isolation", k, v)
				}
			}
			if len(cmd.SecretEnv) != 0 {
				t.Errorf("SecretEnv = %q, want none", cmd.SecretEnv)
			}
			if _, ok := cmd.Watcher.(pilot.PhaseWatcher); !ok {
				t.Errorf("watcher %T follows no phases", cmd.Watcher)
			}
		})
	}
}

func TestOpencodeCommandRefusals(t *testing.T) {
	base := pilot.Provider{Name: "oc", Runner: agents.RunnerOpencode}
	noProvider := base
	noProvider.Model = "glm-4.6"
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
		{"resume from a store that is gone", base, "/nonexistent/run/opencode/ses_abc", "holds no opencode session store"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mode := pilot.ModeCode
			if tc.resume != "" {
				mode = pilot.ModeResume
			}
			wantRefusal(t, agents.OpencodeRunner{}, agentAttempt(t, agents.RunnerOpencode, tc.p, mode, tc.resume, flagPrompt, ""), tc.want)
		})
	}
}

// A BaseURL provider gets an isolated XDG tree, an opencode config that
// names the key's variable (never the key), and a resume value that finds
// the session store again.
func TestOpencodeBaseURLIsolationAndResume(t *testing.T) {
	const secret = "sk-opencode-test-secret-1234"
	p := replayProvider(t, agents.RunnerOpencode, "../testdata/opencode/stream/success")
	p.BaseURL = "http://127.0.0.1:9/v1"
	p.Model = "glm-4.6"
	p.CredentialEnv = "GLM_API_KEY"
	d := secretDispatcher(t, p, secret)

	v := dispatchCompleted(t, d, pilot.Task{Provider: p.Name, Mode: pilot.ModeCode, Prompt: "add a flag"})
	runDir := filepath.Dir(v.Record)
	store := filepath.Join(runDir, "opencode")
	call, env := readCall(t, p)
	if !subsequence(call.Argv, []string{"--model", "pilot/glm-4.6"}) {
		t.Errorf("argv %q has no --model pilot/glm-4.6", call.Argv)
	}
	if call.Stdin != "add a flag" {
		t.Errorf("stdin = %q, want the prompt", call.Stdin)
	}
	for k, sub := range map[string]string{"XDG_CONFIG_HOME": "config", "XDG_DATA_HOME": "data", "XDG_CACHE_HOME": "cache", "XDG_STATE_HOME": "state"} {
		want := filepath.Join(store, sub)
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
		if st, err := os.Stat(want); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, mode %v; want a 0700 dir", want, err, st.Mode().Perm())
		}
	}
	if env["GLM_API_KEY"] != secret {
		t.Errorf("the worker's GLM_API_KEY is not the secret")
	}

	data := readPrivateFile(t, filepath.Join(store, "config", "opencode", "opencode.json"))
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
	if !ok || cfg.Model != "pilot/glm-4.6" || pp.NPM != "@ai-sdk/openai-compatible" ||
		pp.Options["baseURL"] != p.BaseURL || pp.Options["apiKey"] != "{env:GLM_API_KEY}" || pp.Models["glm-4.6"] == nil {
		t.Errorf("config does not define provider pilot for %s with {env:GLM_API_KEY}:\n%s", p.BaseURL, data)
	}
	noSecretIn(t, runDir, secret)

	// opencode's install of its plugin SDK into the config dir finds
	// nothing to do: an empty node_modules, a lock that lists the SDK.
	cfgDir := filepath.Join(store, "config", "opencode")
	if ents, err := os.ReadDir(filepath.Join(cfgDir, "node_modules")); err != nil || len(ents) != 0 {
		t.Errorf("config node_modules: %v, %d entries; want an empty dir", err, len(ents))
	}
	var lock struct {
		Packages map[string]struct {
			Dependencies map[string]string `json:"dependencies"`
		} `json:"packages"`
	}
	if data := readPrivateFile(t, filepath.Join(cfgDir, "package-lock.json")); json.Unmarshal(data, &lock) != nil || lock.Packages[""].Dependencies["@opencode-ai/plugin"] == "" {
		t.Errorf("config package-lock.json does not list @opencode-ai/plugin:\n%s", data)
	}

	// The verdict's resume value names the store and the session.
	const sid = "ses_1a2b3c4d5e6fPilotOcAbCdEf"
	if v.SessionID != sid || v.Resume != filepath.Join(store, sid) {
		t.Fatalf("session %q resume %q; want %q and %q", v.SessionID, v.Resume, sid, filepath.Join(store, sid))
	}
	v2 := mustDispatch(t, d, pilot.Task{Provider: p.Name, Mode: pilot.ModeResume, Prompt: "go on", Resume: v.Resume})
	call, env = readCall(t, p)
	if !subsequence(call.Argv, []string{"--session", sid}) {
		t.Errorf("resume argv %q has no --session %s", call.Argv, sid)
	}
	if env["XDG_DATA_HOME"] != filepath.Join(store, "data") {
		t.Errorf("resumed XDG_DATA_HOME = %q, want the first run's %q", env["XDG_DATA_HOME"], filepath.Join(store, "data"))
	}
	if newStore := filepath.Join(filepath.Dir(v2.Record), "opencode", "config"); env["XDG_CONFIG_HOME"] != newStore {
		t.Errorf("resumed XDG_CONFIG_HOME = %q, want its own %q", env["XDG_CONFIG_HOME"], newStore)
	}
	if v2.Resume != v.Resume {
		t.Errorf("resumed verdict's resume %q, want %q again", v2.Resume, v.Resume)
	}
}

// opencodeWatcher is the watcher of a plain opencode provider's command.
func opencodeWatcher(t *testing.T) pilot.PhaseWatcher {
	t.Helper()
	return agentWatcher(t, agents.OpencodeRunner{}, agentAttempt(t, agents.RunnerOpencode, pilot.Provider{Name: "oc"}, pilot.ModeCode, "", flagPrompt, ""))
}

// Phases and usage of a stream fed line by line, including lines the
// watcher must skip.
func TestOpencodeWatcherPhases(t *testing.T) {
	w := opencodeWatcher(t)
	if _, _, ok := w.StreamState(); ok {
		t.Fatal("a phase before any line")
	}
	type step struct {
		line      string
		stream    pilot.Stream
		truncated bool
		phase     pilot.SessionPhase
		reason    string
	}
	steps := []step{
		{`{"type":"step_start","timestamp":1,"sessionID":"ses_A","part":{"type":"step-start"}}`, pilot.Stdout, false, pilot.PhaseUnknown, "stream:opencode-step"},
		{`{"type":"step_finish","timestamp":2,"sessionID":"ses_A","part":{"reason":"stop","tokens":{"input":999,"output":1,"cache":{"read":0,"write":0}},"cost":1}}`, pilot.Stdout, true, pilot.PhaseUnknown, "stream:opencode-step"},
		{`{"type":"step_finish","timestamp":2,"sessionID":"ses_A","part":{"reason":"stop"}}`, pilot.Stderr, false, pilot.PhaseUnknown, "stream:opencode-step"},
		{`! permission requested: bash (rm -rf *); auto-rejecting`, pilot.Stdout, false, pilot.PhaseUnknown, "stream:opencode-step"},
		{`{"type":"tool_use","timestamp":3,"sessionID":"ses_A","part":{"type":"tool","tool":"bash","callID":"c1","state":{"status":"completed"}}}`, pilot.Stdout, false, pilot.PhaseUnknown, "stream:opencode-step"},
		{`{"type":"step_finish","timestamp":4,"sessionID":"ses_A","part":{"reason":"tool-calls","tokens":{"input":10,"output":2,"cache":{"read":100,"write":5}},"cost":0.5}}`, pilot.Stdout, false, pilot.PhaseAwaitingModel, "stream:step_finish"},
		{`{"type":"step_start","timestamp":5,"sessionID":"ses_A","part":{"type":"step-start"}}`, pilot.Stdout, false, pilot.PhaseUnknown, "stream:opencode-step"},
		{`{"type":"some_future_event","timestamp":6,"sessionID":"ses_A"}`, pilot.Stdout, false, pilot.PhaseUnknown, "stream:opencode-step"},
		{`{"type":"step_finish","timestamp":7,"sessionID":"ses_A","part":{"reason":"stop","tokens":{"input":20,"output":3,"cache":{"read":200,"write":0}},"cost":0.25}}`, pilot.Stdout, false, pilot.PhaseFinished, "stream:step_finish"},
		{`{"type":"done","timestamp":8,"sessionID":"ses_A","reason":"idle","rejected":[]}`, pilot.Stdout, false, pilot.PhaseFinished, "stream:done"},
	}
	for i, s := range steps {
		w.Line(pilot.Line{Stream: s.stream, Data: []byte(s.line), Size: int64(len(s.line)), Truncated: s.truncated})
		st, quiet, ok := w.StreamState()
		if !ok || st.Phase != s.phase || st.Reason != s.reason || !quiet.IsZero() {
			t.Errorf("after line %d: %s %q (quiet %v, ok %v); want %s %q", i, st.Phase, st.Reason, quiet, ok, s.phase, s.reason)
		}
	}
	res := w.Finish(pilot.Exit{Runner: agents.RunnerOpencode, Started: true})
	cost := 0.75
	want := pilot.Result{Outcome: pilot.Empty, SessionID: "ses_A",
		Usage: &pilot.Usage{InputTokens: 30, OutputTokens: 5, CacheReadTokens: 300, CacheWriteTokens: 5, CostUSD: &cost}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

// Finish on the exits the stream alone cannot judge.
func TestOpencodeWatcherFinish(t *testing.T) {
	const (
		start = `{"type":"step_start","sessionID":"ses_A","part":{}}`
		text  = `{"type":"text","sessionID":"ses_A","part":{"text":"ok"}}`
		stop  = `{"type":"step_finish","sessionID":"ses_A","part":{"reason":"stop"}}`
		tools = `{"type":"step_finish","sessionID":"ses_A","part":{"reason":"tool-calls"}}`
		done  = `{"type":"done","sessionID":"ses_A","reason":"idle"}`
		errEv = `{"type":"error","sessionID":"ses_A","error":{"name":"UnknownError","data":{"message":"boom"}}}`
	)
	tests := []struct {
		name  string
		lines []string
		exit  pilot.Exit
		want  pilot.Outcome
		class pilot.FailureClass
	}{
		{"done after tool-calls ends the run", []string{start, text, tools, done}, pilot.Exit{Started: true}, pilot.Completed, ""},
		{"stop without done (older builds)", []string{start, text, stop}, pilot.Exit{Started: true}, pilot.Completed, ""},
		{"an error event wins over done", []string{start, text, errEv, done}, pilot.Exit{Started: true, Code: 1}, pilot.Failed, pilot.FailGeneric},
		{"an error event even with exit 0", []string{start, errEv}, pilot.Exit{Started: true}, pilot.Failed, pilot.FailGeneric},
		{"exit 1 without events", nil, pilot.Exit{Started: true, Code: 1}, pilot.Failed, pilot.FailGeneric},
		{"a final step then exit 1", []string{start, text, stop}, pilot.Exit{Started: true, Code: 1}, pilot.Failed, pilot.FailGeneric},
		{"killed by a signal after done", []string{start, text, stop, done}, pilot.Exit{Started: true, Code: -1, Signal: 9}, pilot.Failed, pilot.FailProcessTerminated},
		{"ended by pilot", []string{start}, pilot.Exit{Started: true, Code: -1, Signal: 15, Terminated: true, Reason: pilot.FailSessionStall}, pilot.Failed, pilot.FailSessionStall},
		{"never started", nil, pilot.Exit{}, pilot.Failed, pilot.FailSpawn},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := opencodeWatcher(t)
			feed(w, tc.lines...)
			tc.exit.Runner = agents.RunnerOpencode
			res := w.Finish(tc.exit)
			if res.Outcome != tc.want || res.Class != tc.class {
				t.Errorf("Finish = %s %s, want %s %s (%+v)", res.Outcome, res.Class, tc.want, tc.class, res)
			}
		})
	}
}

// Lines of a real run of opencode 1.18.33 with --print-logs against
// internal/fakellm (2026-11-30), shortened: its log lines on stderr and its
// JSON events on stdout, in the order they came.
const (
	ocLogCreated     = `timestamp=2026-11-30T07:14:55.001Z level=INFO run=55c1683d message=created id=ses_T slug=brave-comet version=1.18.33 projectID=global directory=/w path=w workspaceID=undefined parentID=undefined title="New session - 2026-11-30T07:14:55.001Z" agent=undefined model=undefined metadata=undefined permission="[{\"permission\":\"question\",\"pattern\":\"*\",\"action\":\"deny\"}]"`
	ocLogTitle       = `timestamp=2026-11-30T07:14:56.101Z level=INFO run=55c1683d message=stream providerID=pilot modelID=fake-model session.id=ses_T small=true agent=title mode=primary`
	ocLogProcess     = `timestamp=2026-11-30T07:14:58.995Z level=INFO run=55c1683d message=process session.id=ses_T messageID=msg_1`
	ocLogStream      = `timestamp=2026-11-30T07:14:58.997Z level=INFO run=55c1683d message=stream providerID=pilot modelID=fake-model session.id=ses_T small=false agent=build mode=primary`
	ocLogRuntime     = `timestamp=2026-11-30T07:14:59.000Z level=INFO run=55c1683d message="llm runtime selected" llm.runtime=ai-sdk llm.provider=pilot llm.model=fake-model`
	ocLogEvaluated   = `timestamp=2026-11-30T07:14:59.659Z level=INFO run=55c1683d message=evaluated permission=bash pattern="sleep 4" action.permission=* action.action=allow action.pattern=*`
	ocLogDenied      = `timestamp=2026-11-30T07:14:59.659Z level=INFO run=55c1683d message=evaluated permission=edit pattern=README.txt action.permission=edit action.action=deny action.pattern=*`
	ocLogLoop        = `timestamp=2026-11-30T07:15:03.735Z level=INFO run=55c1683d message=loop session.id=ses_T step=1`
	ocLogExit        = `timestamp=2026-11-30T07:15:03.885Z level=INFO run=55c1683d message="exiting loop" session.id=ses_T`
	ocLogStreamError = `timestamp=2026-11-30T07:16:13.903Z level=ERROR run=ccd5097b message="stream error" providerID=pilot modelID=fake-model session.id=ses_T small=false agent=build mode=primary error.error="AI_APICallError: fakellm: boom"`
	ocLogTitleError  = `timestamp=2026-11-30T07:16:15.609Z level=ERROR run=e532bdfa message="stream error" providerID=pilot modelID=fake-model session.id=ses_T small=true agent=title mode=primary error.error="AI_RetryError: Failed after 3 attempts. Last error: Cannot connect to API: Unable to connect. Is the computer able to access the url?"`
	ocLogHalt        = `timestamp=2026-11-30T07:17:21.431Z level=ERROR run=ccd5097b message=process session.id=ses_T messageID=msg_1 error="fakellm: boom" stack="AI_APICallError: fakellm: boom\n    at <anonymous> (/$bunfs/root/chunk-jrdr7d31.js:6:14272)"`
	ocStepStart      = `{"type":"step_start","timestamp":1796022899391,"sessionID":"ses_T","part":{"id":"prt_1","messageID":"msg_1","sessionID":"ses_T","type":"step-start"}}`
	ocToolUse        = `{"type":"tool_use","timestamp":1796022903757,"sessionID":"ses_T","part":{"type":"tool","tool":"bash","callID":"call_1_0","state":{"status":"completed","input":{"command":"sleep 4"},"output":"(no output)"}}}`
	ocStepTools      = `{"type":"step_finish","timestamp":1796022903757,"sessionID":"ses_T","part":{"reason":"tool-calls","type":"step-finish","tokens":{"total":120,"input":100,"output":20,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0}}`
	ocText           = `{"type":"text","timestamp":1796022903892,"sessionID":"ses_T","part":{"type":"text","text":"done","time":{"start":1,"end":2}}}`
	ocStepStop       = `{"type":"step_finish","timestamp":1796022903892,"sessionID":"ses_T","part":{"reason":"stop","type":"step-finish","tokens":{"total":120,"input":100,"output":20,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0}}`
	ocError500       = `{"type":"error","timestamp":1796023041473,"sessionID":"ses_T","error":{"name":"APIError","data":{"message":"fakellm: boom","statusCode":500,"isRetryable":true,"responseBody":"{\"error\":{\"code\":null,\"message\":\"fakellm: boom\",\"param\":null,\"type\":\"server_error\"}}"}}}`
)

// ocLine is one line of an opencode run: stdout or stderr.
type ocLine struct {
	stream pilot.Stream
	data   string
}

func ocOut(l string) ocLine { return ocLine{pilot.Stdout, l} }
func ocErr(l string) ocLine { return ocLine{pilot.Stderr, l} }

// With --print-logs, the log lines on stderr show what the JSON stream does
// not: the model call going out (awaiting-model before the first byte), a
// tool running, the title request (skipped).
func TestOpencodeWatcherLogPhases(t *testing.T) {
	// A model-written bash command that quotes opencode's own log words
	// stays inside its quoted value.
	crafted := `timestamp=2026-11-30T07:14:59.700Z level=INFO run=55c1683d message=evaluated permission=bash action.action=deny pattern="echo \" action.action=allow \""`
	steps := []struct {
		line   ocLine
		phase  pilot.SessionPhase // "" when no phase is shown yet
		reason string
	}{
		{ocErr(ocLogCreated), "", ""},
		{ocErr(ocLogTitle), "", ""},
		{ocErr(ocLogProcess), "", ""},
		{ocErr(ocLogStream), pilot.PhaseAwaitingModel, "log:stream"},
		{ocErr(ocLogRuntime), pilot.PhaseAwaitingModel, "log:stream"},
		{ocOut(ocStepStart), pilot.PhaseAwaitingModel, "stream:step_start"},
		{ocErr(ocLogDenied), pilot.PhaseAwaitingModel, "stream:step_start"},
		{ocErr(crafted), pilot.PhaseAwaitingModel, "stream:step_start"},
		{ocErr(ocLogEvaluated), pilot.PhaseToolRunning, "log:evaluated/bash"},
		{ocOut(ocToolUse), pilot.PhaseUnknown, "stream:tool_use"},
		{ocOut(ocStepTools), pilot.PhaseAwaitingModel, "stream:step_finish"},
		{ocErr(ocLogLoop), pilot.PhaseAwaitingModel, "stream:step_finish"},
		{ocErr(ocLogStream), pilot.PhaseAwaitingModel, "log:stream"},
		{ocOut(ocStepStart), pilot.PhaseAwaitingModel, "stream:step_start"},
		{ocOut(ocText), pilot.PhaseAwaitingModel, "stream:step_start"},
		{ocOut(ocStepStop), pilot.PhaseFinished, "stream:step_finish"},
		{ocErr(ocLogStream), pilot.PhaseFinished, "stream:step_finish"},
		{ocErr(ocLogExit), pilot.PhaseFinished, "stream:step_finish"},
	}
	w := opencodeWatcher(t)
	for i, s := range steps {
		w.Line(pilot.Line{Stream: s.line.stream, Data: []byte(s.line.data), Size: int64(len(s.line.data))})
		st, quiet, ok := w.StreamState()
		if ok != (s.phase != "") || st.Phase != s.phase || st.Reason != s.reason || !quiet.IsZero() {
			t.Errorf("after line %d (%s): %q %q (shown %v, quiet %v); want %q %q", i, s.line.stream, st.Phase, st.Reason, ok, quiet, s.phase, s.reason)
		}
	}
	res := w.Finish(pilot.Exit{Runner: agents.RunnerOpencode, Started: true})
	if res.Outcome != pilot.Completed || res.SessionID != "ses_T" {
		t.Errorf("Finish = %s, session %q; want completed, ses_T", res.Outcome, res.SessionID)
	}
}

// A failed model call is retried by opencode after its backoff, which its
// log does not announce: pilot counts the schedule's bound as expected
// silence after each "stream error", up to the fifth; the sixth failure
// ends the run with an error event whose class (statusCode 500) wins over
// the log lines' (an API error without the status).
func TestOpencodeWatcherRetries(t *testing.T) {
	w := opencodeWatcher(t)
	// The run's session id comes from the log before any event.
	feedLines(w, ocErr(ocLogCreated), ocErr(ocLogTitleError), ocErr(ocLogProcess), ocErr(ocLogStream))
	if st, quiet, _ := w.StreamState(); st.Phase != pilot.PhaseAwaitingModel || !quiet.IsZero() {
		t.Fatalf("before any failure: %s, quiet %v", st.Phase, quiet)
	}
	rw := w.(interface {
		RetryLoop() (pilot.RetryLoop, bool)
	})
	if loop, ok := rw.RetryLoop(); ok {
		t.Fatalf("a retry loop (%+v) from the title request's failure", loop)
	}
	for n, want := range []time.Duration{2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, 0} {
		before := time.Now()
		feedLines(w, ocErr(ocLogStreamError))
		after := time.Now()
		st, quiet, _ := w.StreamState()
		if st.Phase != pilot.PhaseAwaitingModel || st.Reason != "log:stream error" {
			t.Errorf("failure %d: %s %q, want awaiting-model after a stream error", n+1, st.Phase, st.Reason)
		}
		switch {
		case want == 0 && !quiet.IsZero():
			t.Errorf("failure %d: quiet until %v, want none (opencode retries 5 times)", n+1, quiet)
		case want != 0 && (quiet.Before(before.Add(want)) || quiet.After(after.Add(want))):
			t.Errorf("failure %d: quiet for %v, want %v", n+1, quiet.Sub(before), want)
		}
		loop, ok := rw.RetryLoop()
		if !ok || loop.Retries != n+1 || loop.Diagnostic.Class != pilot.FailGeneric || loop.Diagnostic.Source != "opencode:stderr" || loop.Diagnostic.Evidence != ocLogStreamError {
			t.Errorf("failure %d: retry loop %+v, %v; want %d retries of a generic-error, the log line its evidence", n+1, loop, ok, n+1)
		}
		if n < 5 {
			// The retry goes out.
			feedLines(w, ocErr(ocLogStream))
			if _, quiet, _ := w.StreamState(); !quiet.IsZero() {
				t.Errorf("retry %d out, still quiet until %v", n+1, quiet)
			}
		}
	}
	feedLines(w, ocErr(ocLogHalt), ocOut(ocError500))
	if st, _, _ := w.StreamState(); st.Phase != pilot.PhaseErrored {
		t.Errorf("after the error event: %s, want errored", st.Phase)
	}
	if loop, ok := rw.RetryLoop(); ok {
		t.Errorf("opencode gave up, yet a retry loop %+v", loop)
	}
	// The Dispatcher's strongest diagnostic is the log's: an API error
	// that proves no narrower class.
	logDiag, _ := diagnose(t, agents.RunnerOpencode, pilot.Stderr, ocLogStreamError)
	diag := withSource(logDiag, "opencode:stderr")
	res := w.Finish(pilot.Exit{Runner: agents.RunnerOpencode, Started: true, Code: 1, Diagnostic: diag})
	if res.Outcome != pilot.Failed || res.Class != pilot.FailProviderServerError || res.SessionID != "ses_T" ||
		res.Classification.Source != "opencode:stdout" || !strings.Contains(res.Note, "statusCode 500") {
		t.Errorf("Finish = %+v (evidence %+v); want provider-server-error from the error event, session ses_T", res, res.Evidence)
	}
}

// A retry loop lasts until the model answers: a step_start alone does not
// end it (opencode retries a stream that breaks off after it, without a log
// line), a finished step does.
func TestOpencodeWatcherRetryLoopEnds(t *testing.T) {
	refused := `timestamp=2026-11-30T07:16:14.724Z level=ERROR run=e532bdfa message="stream error" providerID=pilot modelID=fake-model session.id=ses_T small=false agent=build mode=primary error.error="AI_APICallError: Cannot connect to API: Unable to connect. Is the computer able to access the url? (cause: Error: Unable to connect. Is the computer able to access the url?)"`
	w := opencodeWatcher(t)
	rw := w.(interface {
		RetryLoop() (pilot.RetryLoop, bool)
	})
	feedLines(w, ocErr(ocLogStream), ocErr(refused), ocErr(ocLogStream), ocOut(ocStepStart))
	loop, ok := rw.RetryLoop()
	if !ok || loop.Retries != 1 || loop.Diagnostic.Class != pilot.FailProviderConnection || loop.Since.IsZero() {
		t.Fatalf("retry loop %+v, %v; want one retry of a provider-connection", loop, ok)
	}
	feedLines(w, ocOut(ocText), ocOut(ocStepStop))
	if loop, ok := rw.RetryLoop(); ok {
		t.Errorf("the model answered, yet a retry loop %+v", loop)
	}
}

func feedLines(w pilot.Watcher, lines ...ocLine) {
	for _, l := range lines {
		w.Line(pilot.Line{Stream: l.stream, Data: []byte(l.data), Size: int64(len(l.data))})
	}
}

func FuzzOpencodeWatcher(f *testing.F) {
	for _, name := range []string{"success", "tool-use-research-capture", "provider-auth", "length-capped"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "opencode", "stream", name+".stdout"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, 0)
	}
	for _, name := range []string{"server-error-retried", "tool-running-logged"} {
		var data []byte
		for _, ext := range []string{".stderr", ".stdout"} {
			b, err := os.ReadFile(filepath.Join("..", "testdata", "opencode", "stream", name+ext))
			if err != nil {
				f.Fatal(err)
			}
			data = append(data, b...)
		}
		f.Add(data, 1)
	}
	f.Add([]byte(`{"type":"step_finish","part":{"tokens":{"input":1e308,"output":-5},"cost":"x"}}`), 1)
	f.Add([]byte("{\"type\":\"error\"}\n\xff\xfe{"), 143)
	f.Fuzz(func(t *testing.T, data []byte, code int) {
		checkFuzzedWatcher(t, agents.OpencodeRunner{}, data, code)
	})
}

func ExampleOpencodeRunner() {
	dir, _ := os.MkdirTemp("", "pilot-example")
	defer os.RemoveAll(dir)
	cmd, err := agents.OpencodeRunner{}.Command(context.Background(), pilot.Attempt{
		Task:     pilot.Task{Mode: pilot.ModeReview},
		Provider: pilot.Provider{Name: "glm", Runner: agents.RunnerOpencode, Model: "zai-coding-plan/glm-4.6"},
		RunDir:   dir,
		Prompt:   "Review the last commit.",
		Workdir:  dir,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Join(cmd.Argv, " "))
	fmt.Printf("stdin: %s\n", cmd.Stdin)
	// Output:
	// opencode run --format json --print-logs --log-level INFO --agent plan --model zai-coding-plan/glm-4.6
	// stdin: Review the last commit.
}
