package agents_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

// claudePrompt is the claude tests' prompt, which goes on stdin.
const claudePrompt = "fix the bug"

func TestClaudeCommandArgv(t *testing.T) {
	const id = "a4b5c6d7-e8f9-40a1-9b2c-3d4e5f607182"
	write := []string{"--allowedTools", "Bash", "--permission-mode", "acceptEdits"}
	readOnly := []string{"--disallowedTools", "Edit,Write,NotebookEdit", "--permission-mode", "dontAsk"}
	base := []string{"claude", "-p", "--output-format", "stream-json", "--verbose"}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name   string
		p      pilot.Provider
		mode   pilot.Mode
		resume string
		want   []string
	}{
		{"code", pilot.Provider{}, pilot.ModeCode, "", cat(base, write)},
		{"test", pilot.Provider{}, pilot.ModeTest, "", cat(base, write)},
		{"explore", pilot.Provider{}, pilot.ModeExplore, "", cat(base, readOnly)},
		{"review", pilot.Provider{}, pilot.ModeReview, "", cat(base, readOnly)},
		{"resume", pilot.Provider{}, pilot.ModeResume, id, cat(base, write, []string{"--resume=" + id})},
		{"review resumed", pilot.Provider{}, pilot.ModeReview, id, cat(base, readOnly, []string{"--resume=" + id})},
		{"resume id with a leading dash stays the flag's value", pilot.Provider{}, pilot.ModeResume, "-p", cat(base, write, []string{"--resume=-p"})},
		{"model, binary and args", pilot.Provider{Model: "claude-opus-4-5", Binary: "/opt/claude/bin/claude", Args: []string{"--max-turns", "30"}},
			pilot.ModeCode, "", cat([]string{"/opt/claude/bin/claude"}, base[1:], []string{"--model", "claude-opus-4-5"}, write, []string{"--max-turns", "30"})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := agentAttempt(t, agents.RunnerClaude, tc.p, tc.mode, tc.resume, claudePrompt, "")
			cmd := agentCommand(t, agents.ClaudeRunner{}, a)
			if diff := cmp.Diff(tc.want, cmd.Argv); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			if string(cmd.Stdin) != claudePrompt {
				t.Errorf("stdin = %q, want the prompt", cmd.Stdin)
			}
			if cmd.Env != nil || cmd.SecretEnv != nil || cmd.SessionPath != "" {
				t.Errorf("a plain provider got env %v, secret env %v, session path %q", cmd.Env, cmd.SecretEnv, cmd.SessionPath)
			}
			if _, ok := cmd.Watcher.(pilot.PhaseWatcher); !ok {
				t.Errorf("watcher %T does not follow phases", cmd.Watcher)
			}
			if entries, _ := os.ReadDir(a.RunDir); len(entries) != 0 {
				t.Errorf("a plain provider wrote %d entries in the run dir", len(entries))
			}
		})
	}
}

func TestClaudeCommandEnv(t *testing.T) {
	tests := []struct {
		name       string
		p          pilot.Provider
		isolated   bool
		env        map[string]string
		secretEnv  []string
		configDirs bool
	}{
		{name: "credential under another name", p: pilot.Provider{CredentialEnv: "TEAM_CLAUDE_KEY"}, secretEnv: []string{"ANTHROPIC_API_KEY"}},
		{name: "ANTHROPIC_API_KEY itself", p: pilot.Provider{CredentialEnv: "ANTHROPIC_API_KEY"}},
		{name: "a bearer token", p: pilot.Provider{CredentialEnv: "ANTHROPIC_AUTH_TOKEN"}},
		{name: "an OAuth token", p: pilot.Provider{CredentialEnv: "CLAUDE_CODE_OAUTH_TOKEN"}},
		{name: "isolated", p: pilot.Provider{Isolated: true, CredentialEnv: "ANTHROPIC_API_KEY"}, isolated: true},
		{name: "gateway", p: pilot.Provider{BaseURL: "http://127.0.0.1:8080", CredentialEnv: "GW_KEY"}, isolated: true,
			env: map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:8080"}, secretEnv: []string{"ANTHROPIC_API_KEY"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := agentAttempt(t, agents.RunnerClaude, tc.p, pilot.ModeCode, "", claudePrompt, "")
			cmd := agentCommand(t, agents.ClaudeRunner{}, a)
			want := map[string]string{}
			for k, v := range tc.env {
				want[k] = v
			}
			cfg := filepath.Join(a.RunDir, "claude-config")
			if tc.isolated {
				want["CLAUDE_CONFIG_DIR"] = cfg
				want["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
				st, err := os.Stat(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode().Perm() != 0o700 || !st.IsDir() {
					t.Errorf("config dir mode %v, want a 0700 directory", st.Mode())
				}
			} else if _, err := os.Stat(cfg); err == nil {
				t.Error("a provider that is not isolated got a config dir")
			}
			got := cmd.Env
			if got == nil {
				got = map[string]string{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.secretEnv, cmd.SecretEnv); diff != "" {
				t.Errorf("secret env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClaudeCommandRefusals(t *testing.T) {
	transcript := filepath.Join(t.TempDir(), "projects", "-work-repo", "0f4b7b2e-1c1d-4e8e-9a55-1e2f3a4b5c6d.jsonl")
	tests := []struct {
		name   string
		p      pilot.Provider
		prompt string
		resume string
		want   string
	}{
		{"empty prompt", pilot.Provider{}, " \n", "", "empty"},
		{"isolated worker resuming a bare id", pilot.Provider{Isolated: true}, "go on", "0f4b7b2e-1c1d-4e8e-9a55-1e2f3a4b5c6d", "transcript path"},
		{"shared config resuming an isolated transcript", pilot.Provider{}, "go on", transcript, "isolated"},
		{"missing transcript", pilot.Provider{Isolated: true}, "go on", transcript, "no such file"},
		{"not a transcript name", pilot.Provider{Isolated: true}, "go on", "/tmp/.jsonl", "does not name"},
		{"a gateway's /v1 path", pilot.Provider{BaseURL: "http://127.0.0.1:8080/v1/"}, "go on", "", "http://127.0.0.1:8080)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantRefusal(t, agents.ClaudeRunner{}, agentAttempt(t, agents.RunnerClaude, tc.p, pilot.ModeResume, tc.resume, tc.prompt, ""), tc.want)
		})
	}
}

// claudeProjectName is Claude Code's project dir name for an ASCII path.
func claudeProjectName(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	b := []byte(path)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

// TestClaudeResumeIsolated follows a session from one isolated worker to
// the next: the first worker's verdict names its transcript, and resuming
// with it copies the transcript (and the session's directory) into the new
// worker's config dir.
func TestClaudeResumeIsolated(t *testing.T) {
	const id = "0f4b7b2e-1c1d-4e8e-9a55-1e2f3a4b5c6d"
	p := pilot.Provider{Isolated: true, CredentialEnv: "ANTHROPIC_API_KEY"}

	// The first worker: its watcher finds the transcript Claude Code
	// wrote in its config dir.
	first := agentAttempt(t, agents.RunnerClaude, p, pilot.ModeCode, "", claudePrompt, "")
	cmd := agentCommand(t, agents.ClaudeRunner{}, first)
	oldProject := filepath.Join(first.RunDir, "claude-config", "projects", "-elsewhere-repo")
	transcript := filepath.Join(oldProject, id+".jsonl")
	mustWrite(t, transcript, `{"type":"user","sessionId":"`+id+`"}`+"\n")
	mustWrite(t, filepath.Join(oldProject, id, "subagents", "agent-1.jsonl"), "{}\n")
	feed(cmd.Watcher, claudeLine(t, "../testdata/claude/stream/success.stdout", 0, id))
	res := cmd.Watcher.Finish(pilot.Exit{Runner: "claude", Started: true, StdoutBytes: 1})
	if res.SessionID != id || res.Resume != transcript {
		t.Fatalf("session %q, resume %q; want %q and the transcript %q", res.SessionID, res.Resume, id, transcript)
	}

	// The second worker resumes it.
	second := agentAttempt(t, agents.RunnerClaude, p, pilot.ModeResume, res.Resume, claudePrompt, "")
	cmd = agentCommand(t, agents.ClaudeRunner{}, second)
	if last := cmd.Argv[len(cmd.Argv)-1]; last != "--resume="+id {
		t.Errorf("argv %q does not end with --resume=%s", cmd.Argv, id)
	}
	project := filepath.Join(second.RunDir, "claude-config", "projects", claudeProjectName(second.Workdir))
	for _, f := range []string{id + ".jsonl", filepath.Join(id, "subagents", "agent-1.jsonl")} {
		st, err := os.Stat(filepath.Join(project, f))
		if err != nil {
			t.Fatalf("not copied: %v", err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	data, err := os.ReadFile(filepath.Join(project, id+".jsonl"))
	if err != nil || !bytes.Contains(data, []byte(id)) {
		t.Errorf("copied transcript %q, %v", data, err)
	}
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// claudeLine returns line n of a fixture with its session id replaced.
func claudeLine(t *testing.T, path string, n int, session string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Split(string(data), "\n")[n]
	var ev map[string]any
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatal(err)
	}
	ev["session_id"] = session
	out, _ := json.Marshal(ev)
	return string(out)
}

// TestClaudeDispatchIsolated runs a recorded stream through a real dispatch
// of an isolated gateway provider and checks what the worker got: the prompt
// on stdin, its own config dir, the gateway, and the secret under both
// names, which no file in the run dir holds.
func TestClaudeDispatchIsolated(t *testing.T) {
	const secret = "sk-ant-test-0123456789abcdef"
	p := replayProvider(t, agents.RunnerClaude, "../testdata/claude/stream/success")
	p.Name, p.CredentialEnv, p.BaseURL = "claude-gw", "GW_CLAUDE_KEY", "http://127.0.0.1:9"
	d := secretDispatcher(t, p, secret)
	v := dispatchCompleted(t, d, pilot.Task{Provider: p.Name, Mode: pilot.ModeCode, Prompt: "the task text"})
	call, env := readCall(t, p)
	if call.Stdin != "the task text" {
		t.Errorf("stdin %q, want the prompt", call.Stdin)
	}
	for _, a := range call.Argv {
		if strings.Contains(a, "the task text") {
			t.Errorf("the prompt is in argv %q", call.Argv)
		}
	}
	runDir := filepath.Dir(v.Record)
	want := map[string]string{
		"GW_CLAUDE_KEY":                            secret,
		"ANTHROPIC_API_KEY":                        secret,
		"ANTHROPIC_BASE_URL":                       "http://127.0.0.1:9",
		"CLAUDE_CONFIG_DIR":                        filepath.Join(runDir, "claude-config"),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}
	for k, w := range want {
		if env[k] != w {
			t.Errorf("worker env %s=%q, want %q", k, env[k], w)
		}
	}
	noSecretIn(t, runDir, secret)
}

// claudeWatcher is the watcher of a plain claude provider's command.
func claudeWatcher(t *testing.T) pilot.PhaseWatcher {
	t.Helper()
	return agentWatcher(t, agents.ClaudeRunner{}, agentAttempt(t, agents.RunnerClaude, pilot.Provider{}, pilot.ModeCode, "", claudePrompt, ""))
}

// TestClaudeWatcher feeds streams to the watcher line by line and checks
// the phases it shows and its judgement.
func TestClaudeWatcher(t *testing.T) {
	const sid = "c0ffee00-0000-4000-8000-000000000001"
	type step struct {
		phase   pilot.SessionPhase
		reason  string
		pending []string
	}
	init := `{"type":"system","subtype":"init","session_id":"` + sid + `","model":"claude-sonnet-4-5"}`
	hook := `{"type":"system","subtype":"hook_started","hook_event":"SessionStart","hook_name":"SessionStart:startup","session_id":"` + sid + `"}`
	toolAB1 := `{"type":"assistant","message":{"id":"msg_1","content":[{"type":"tool_use","id":"tA","name":"Read","input":{}}]},"parent_tool_use_id":null}`
	toolAB2 := `{"type":"assistant","message":{"id":"msg_1","content":[{"type":"tool_use","id":"tB","name":"Read","input":{}}]},"parent_tool_use_id":null}`
	resA := `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"tA","content":"x"}]}}`
	resB := `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"tB","content":[{"type":"text","text":"y"}]}]}}`
	text := `{"type":"assistant","message":{"id":"msg_2","content":[{"type":"text","text":"done"}]},"parent_tool_use_id":null}`
	subText := `{"type":"assistant","message":{"id":"msg_3","content":[{"type":"text","text":"subagent notes"}]},"parent_tool_use_id":"tT"}`
	synthetic := `{"type":"assistant","message":{"id":"x","model":"<synthetic>","content":[{"type":"text","text":"Invalid API key · Fix external API key"}]},"error":"authentication_failed"}`
	retry := `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":600000,"error_status":529,"error":"overloaded"}`
	ok := func(result string) string {
		return `{"type":"result","subtype":"success","is_error":false,"result":` + strconv.Quote(result) + `,"session_id":"` + sid + `"}`
	}
	exit0 := pilot.Exit{Runner: "claude", Started: true, StdoutBytes: 100}
	exit1 := pilot.Exit{Runner: "claude", Started: true, Code: 1, StdoutBytes: 100}

	tests := []struct {
		name   string
		lines  []string
		steps  []step // the state after each line
		exit   pilot.Exit
		want   pilot.Outcome
		class  pilot.FailureClass
		source string
	}{
		{name: "hook before init is still starting", lines: []string{hook, init, text, ok("done")},
			steps: []step{{pilot.PhaseStarting, "stream:system/hook_started", nil}, {pilot.PhaseAwaitingModel, "stream:system/init", nil},
				{pilot.PhaseAwaitingModel, "stream:assistant", nil}, {pilot.PhaseFinished, "stream:result/success", nil}},
			exit: exit0, want: pilot.Completed},
		{name: "parallel tools split over two lines, results out of order", lines: []string{init, toolAB1, toolAB2, resB, resA, text, ok("done")},
			steps: []step{{pilot.PhaseAwaitingModel, "stream:system/init", nil},
				{pilot.PhaseToolRunning, "stream:assistant/tool_use", []string{"tA"}},
				{pilot.PhaseToolRunning, "stream:assistant/tool_use", []string{"tA", "tB"}},
				{pilot.PhaseToolRunning, "stream:user/tool_result", []string{"tA"}},
				{pilot.PhaseAwaitingModel, "stream:user/tool_result", nil},
				{pilot.PhaseAwaitingModel, "stream:assistant", nil},
				{pilot.PhaseFinished, "stream:result/success", nil}},
			exit: exit0, want: pilot.Completed},
		{name: "the same tool_use line twice is one call", lines: []string{init, toolAB1, toolAB1, resA},
			steps: []step{{pilot.PhaseAwaitingModel, "stream:system/init", nil},
				{pilot.PhaseToolRunning, "stream:assistant/tool_use", []string{"tA"}},
				{pilot.PhaseToolRunning, "stream:assistant/tool_use", []string{"tA"}},
				{pilot.PhaseAwaitingModel, "stream:user/tool_result", nil}},
			exit: exit0, want: pilot.Failed, class: pilot.FailIncomplete},
		{name: "answer only in assistant text", lines: []string{init, text, ok("")}, exit: exit0, want: pilot.Completed},
		{name: "no text anywhere", lines: []string{init, ok("")}, exit: exit0, want: pilot.Empty},
		{name: "a subagent's text is not the answer", lines: []string{init, subText, ok("")}, exit: exit0, want: pilot.Empty},
		{name: "a synthetic error message is not the answer", lines: []string{init, synthetic, ok(" ")}, exit: exit0, want: pilot.Empty},
		{name: "success after a retry", lines: []string{init, retry, text, ok("done")},
			steps: []step{{pilot.PhaseAwaitingModel, "stream:system/init", nil}, {pilot.PhaseAwaitingModel, "stream:system/api_retry", nil},
				{pilot.PhaseAwaitingModel, "stream:assistant", nil}, {pilot.PhaseFinished, "stream:result/success", nil}},
			exit: exit0, want: pilot.Completed},
		{name: "error_during_execution", lines: []string{init, `{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["Tool execution failed"]}`},
			steps: []step{{pilot.PhaseAwaitingModel, "stream:system/init", nil}, {pilot.PhaseErrored, "stream:result/error_during_execution", nil}},
			exit:  exit1, want: pilot.Failed, class: pilot.FailGeneric, source: ""},
		{name: "an aborted turn is no success", lines: []string{init, `{"type":"result","subtype":"success","is_error":false,"result":"","terminal_reason":"aborted_tools"}`},
			exit: exit0, want: pilot.Failed, class: pilot.FailGeneric, source: ""},
		{name: "budget cap", lines: []string{init, `{"type":"result","subtype":"error_max_budget_usd","is_error":true,"errors":["Reached maximum budget ($0.5)"]}`},
			exit: exit1, want: pilot.StepCappedPartial},
		{name: "turn cap named only by terminal_reason", lines: []string{init, `{"type":"result","subtype":"success","is_error":false,"result":"partial","terminal_reason":"max_turns"}`},
			exit: exit0, want: pilot.StepCappedPartial},
		{name: "exit 1 without a result", lines: []string{init, text}, exit: exit1, want: pilot.Failed, class: pilot.FailGeneric, source: "exit-status"},
		{name: "killed after a success result", lines: []string{init, text, ok("done")},
			exit: pilot.Exit{Runner: "claude", Started: true, Code: -1, Signal: 9}, want: pilot.Failed, class: pilot.FailProcessTerminated},
		{name: "pilot's timeout wins over the stream", lines: []string{init, text, ok("done")},
			exit: pilot.Exit{Runner: "claude", Started: true, Code: 143, Terminated: true, Reason: pilot.FailTimeout}, want: pilot.Failed, class: pilot.FailTimeout},
		{name: "never started", exit: pilot.Exit{Runner: "claude", Err: os.ErrNotExist}, want: pilot.Failed, class: pilot.FailSpawn},
		{name: "junk is ignored", lines: []string{"", "Debugger attached.", "{", `{"type":42}`, `{"type":"assistant","message":"x"}`, `{"type":"user","message":{"content":"plain text"}}`, `{"type":"future_event"}`, init, ok("done")},
			exit: exit0, want: pilot.Completed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := claudeWatcher(t)
			var got []step
			for _, l := range tc.lines {
				feed(w, l)
				if st, _, ok := w.StreamState(); ok {
					got = append(got, step{st.Phase, st.Reason, st.PendingToolCallIDs})
				}
			}
			if tc.steps != nil {
				if diff := cmp.Diff(tc.steps, got, cmp.AllowUnexported(step{})); diff != "" {
					t.Errorf("phases (-want +got):\n%s", diff)
				}
			}
			res := w.Finish(tc.exit)
			if res.Outcome != tc.want || res.Class != tc.class {
				t.Errorf("Finish = %s/%s, want %s/%s (%+v)", res.Outcome, res.Class, tc.want, tc.class, res)
			}
			if tc.source != "" && res.DecidedBy != tc.source {
				t.Errorf("source %q, want %q", res.Source, tc.source)
			}
		})
	}
}

// TestClaudeWatcherRetryQuiet checks that an api_retry announces its delay
// and that the model's next message ends it.
func TestClaudeWatcherRetryQuiet(t *testing.T) {
	w := claudeWatcher(t)
	before := time.Now()
	feed(w, `{"type":"system","subtype":"init","session_id":"s"}`,
		`{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,"retry_delay_ms":90000,"error_status":429,"error":"rate_limit"}`)
	_, quiet, _ := w.StreamState()
	if quiet.Before(before.Add(90*time.Second)) || quiet.After(time.Now().Add(90*time.Second)) {
		t.Errorf("quiet until %v, want 90s after the retry notice", quiet)
	}
	feed(w, `{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"hi"}]}}`)
	if _, quiet, _ := w.StreamState(); !quiet.IsZero() {
		t.Errorf("quiet until %v after the model answered", quiet)
	}
}

// TestClaudeWatcherIgnores checks that stderr and truncated lines never
// move the phase or count as the result.
func TestClaudeWatcherIgnores(t *testing.T) {
	w := claudeWatcher(t)
	result := []byte(`{"type":"result","subtype":"success","is_error":false,"result":"done"}`)
	w.Line(pilot.Line{Stream: pilot.Stderr, Data: result, Size: int64(len(result))})
	w.Line(pilot.Line{Stream: pilot.Stdout, Data: result[:20], Size: 1 << 30, Truncated: true})
	if _, _, ok := w.StreamState(); ok {
		t.Error("stderr or a truncated line showed a phase")
	}
	if res := w.Finish(pilot.Exit{Runner: "claude", Started: true, StdoutBytes: 1 << 30}); res.Class != pilot.FailIncomplete {
		t.Errorf("Finish = %+v, want incomplete", res)
	}
}

// TestClaudeWatcherUsageWithoutResult checks that a run cut short reports
// the usage its messages carried, each message once however many lines it
// was split into.
func TestClaudeWatcherUsageWithoutResult(t *testing.T) {
	w := claudeWatcher(t)
	u := func(in, out int) string {
		return `"usage":{"input_tokens":` + strconv.Itoa(in) + `,"output_tokens":` + strconv.Itoa(out) + `,"cache_read_input_tokens":100,"cache_creation_input_tokens":10}`
	}
	feed(w,
		`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"a"}],`+u(5, 1)+`}}`,
		`{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}],`+u(5, 9)+`}}`,
		`{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"b"}],`+u(2, 3)+`}}`,
		`{"type":"assistant","message":{"id":"syn","model":"<synthetic>","content":[{"type":"text","text":"API Error"}],`+u(7, 7)+`},"error":"unknown"}`,
	)
	res := w.Finish(pilot.Exit{Runner: "claude", Started: true, Code: 143})
	want := &pilot.Usage{InputTokens: 7, OutputTokens: 12, CacheReadTokens: 200, CacheWriteTokens: 20}
	if diff := cmp.Diff(want, res.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if res.Class != pilot.FailProcessTerminated {
		t.Errorf("class %s, want process-terminated", res.Class)
	}
}

func FuzzClaudeWatcher(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "claude", "stream", "*.stdout"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		f.Add(data, 0, false)
		f.Add(data, 1, true)
	}
	f.Add([]byte(`{"type":"assistant","message":{"content":[{"type":"tool_use"}]}}`+"\n"+`{"type":"user","message":{"content":[{"type":"tool_result"}]}}`), 143, false)
	// Not isolated: nothing is written in the run dir.
	a := agentAttempt(f, agents.RunnerClaude, pilot.Provider{Name: "c"}, pilot.ModeCode, "", "x", "")
	f.Fuzz(func(t *testing.T, data []byte, code int, stderr bool) {
		s := pilot.Stdout
		if stderr {
			s = pilot.Stderr
		}
		var lines []pilot.Line
		for i, l := range bytes.Split(data, []byte("\n")) {
			lines = append(lines, pilot.Line{Stream: s, Data: l, Size: int64(len(l)), Truncated: i%7 == 6})
		}
		fuzzWatcher(t, agents.ClaudeRunner{}, a, lines, pilot.Exit{Runner: "claude", Started: true, Code: code, StdoutBytes: int64(len(data))})
	})
}
