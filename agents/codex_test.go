package agents_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/sandbox"
)

func TestCodexCommandArgv(t *testing.T) {
	const id = "0199a213-81c0-7800-8aa1-bbab2a035a53"
	base := []string{"codex", "exec", "--json", "--skip-git-repo-check", "-C", "/work/tree"}
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	// codex's own workspace-write sandbox, without /tmp.
	ww := []string{"-s", "workspace-write", "-c", "sandbox_workspace_write.exclude_slash_tmp=true"}
	tests := []struct {
		name    string
		p       pilot.Provider
		mode    pilot.Mode
		sandbox sandbox.Mode // pilot's, as enforced
		resume  string
		prompt  string
		want    []string
		stdin   string
	}{
		{name: "code", mode: pilot.ModeCode, prompt: "fix it",
			want: cat(base, ww, []string{"--", "fix it"})},
		{name: "test", mode: pilot.ModeTest, prompt: "run the tests",
			want: cat(base, ww, []string{"--", "run the tests"})},
		{name: "explore", mode: pilot.ModeExplore, prompt: "map the repo",
			want: cat(base, []string{"-s", "read-only", "--", "map the repo"})},
		{name: "review", mode: pilot.ModeReview, prompt: "review the diff",
			want: cat(base, []string{"-s", "read-only", "--", "review the diff"})},
		{name: "resume", mode: pilot.ModeResume, resume: id, prompt: "go on",
			want: cat(base, ww, []string{"resume", "--", id, "go on"})},
		{name: "explore with resume", mode: pilot.ModeExplore, resume: id, prompt: "what changed?",
			want: cat(base, []string{"-s", "read-only", "resume", "--", id, "what changed?"})},
		{name: "model, binary and args", mode: pilot.ModeCode, prompt: "fix it",
			p:    pilot.Provider{Model: "gpt-5-codex", Binary: "/opt/codex/bin/codex", Args: []string{"-c", "model_reasoning_effort=high"}},
			want: []string{"/opt/codex/bin/codex", "exec", "--json", "--skip-git-repo-check", "-C", "/work/tree", "-s", "workspace-write", "-c", "sandbox_workspace_write.exclude_slash_tmp=true", "-m", "gpt-5-codex", "-c", "model_reasoning_effort=high", "--", "fix it"}},
		{name: "args before resume", mode: pilot.ModeResume, resume: id, prompt: "go on",
			p:    pilot.Provider{Model: "m", Args: []string{"--ephemeral"}},
			want: cat(base, ww, []string{"-m", "m", "--ephemeral", "resume", "--", id, "go on"})},
		{name: "a prompt like a flag stays a prompt", mode: pilot.ModeCode, prompt: "--help",
			want: cat(base, ww, []string{"--", "--help"})},
		{name: "a prompt like a subcommand stays a prompt", mode: pilot.ModeCode, prompt: "resume",
			want: cat(base, ww, []string{"--", "resume"})},
		{name: "the prompt - goes on stdin", mode: pilot.ModeCode, prompt: "-",
			want: cat(base, ww, []string{"--", "-"}), stdin: "-"},
		{name: "a long prompt goes on stdin", mode: pilot.ModeCode, prompt: strings.Repeat("x", 200<<10),
			want: cat(base, ww, []string{"--", "-"}), stdin: strings.Repeat("x", 200<<10)},
		{name: "a long prompt on resume goes on stdin", mode: pilot.ModeResume, resume: id, prompt: strings.Repeat("y", 200<<10),
			want: cat(base, ww, []string{"resume", "--", id, "-"}), stdin: strings.Repeat("y", 200<<10)},
		// Inside pilot's sandbox, codex's own (bubblewrap) cannot mount:
		// pilot's confines the commands.
		{name: "code in pilot's workspace sandbox", mode: pilot.ModeCode, sandbox: sandbox.Workspace, prompt: "fix it",
			want: cat(base, []string{"-s", "danger-full-access", "--", "fix it"})},
		{name: "explore in pilot's secrets sandbox", mode: pilot.ModeExplore, sandbox: sandbox.Secrets, prompt: "map the repo",
			want: cat(base, []string{"-s", "danger-full-access", "--", "map the repo"})},
		{name: "pilot's sandbox off", mode: pilot.ModeReview, sandbox: sandbox.Off, prompt: "review the diff",
			want: cat(base, []string{"-s", "read-only", "--", "review the diff"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := agentAttempt(t, agents.RunnerCodex, tt.p, tt.mode, tt.resume, tt.prompt, "/work/tree")
			a.Sandbox = tt.sandbox
			cmd := agentCommand(t, agents.CodexRunner{}, a)
			if diff := cmp.Diff(tt.want, cmd.Argv); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			if string(cmd.Stdin) != tt.stdin || (tt.stdin == "" && cmd.Stdin != nil) {
				t.Errorf("stdin = %.40q (%d bytes), want %.40q", cmd.Stdin, len(cmd.Stdin), tt.stdin)
			}
			if cmd.Env != nil || cmd.SessionPath != "" {
				t.Errorf("env %v, session path %q: want none without isolation", cmd.Env, cmd.SessionPath)
			}
			if _, ok := cmd.Watcher.(pilot.PhaseWatcher); !ok {
				t.Errorf("watcher %T does not follow phases", cmd.Watcher)
			}
		})
	}
}

func TestCodexCommandSecretEnv(t *testing.T) {
	tests := []struct {
		name string
		p    pilot.Provider
		want []string
	}{
		{"no credential", pilot.Provider{}, nil},
		{"another variable", pilot.Provider{CredentialEnv: "OPENAI_KEY_2"}, []string{"CODEX_API_KEY"}},
		{"CODEX_API_KEY itself", pilot.Provider{CredentialEnv: "CODEX_API_KEY"}, nil},
		{"isolated", pilot.Provider{CredentialEnv: "OPENAI_KEY_2", Isolated: true}, []string{"CODEX_API_KEY"}},
		// With a base_url, config.toml's env_key names the variable.
		{"base_url", pilot.Provider{CredentialEnv: "LOCAL_KEY", BaseURL: "http://127.0.0.1:8080/v1", Model: "m"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := agentCommand(t, agents.CodexRunner{}, agentAttempt(t, agents.RunnerCodex, tt.p, pilot.ModeCode, "", "hi", ""))
			if diff := cmp.Diff(tt.want, cmd.SecretEnv); diff != "" {
				t.Errorf("SecretEnv (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCodexCommandRefuses(t *testing.T) {
	rollout := "/runs/earlier/codex-home/sessions/2026/01/02/rollout-2026-01-02T03-04-05-0199a213-81c0-7800-8aa1-bbab2a035a53.jsonl"
	tests := []struct {
		name   string
		p      pilot.Provider
		mode   pilot.Mode
		resume string
		prompt string
		want   string // in the error
	}{
		{name: "base_url without a model", p: pilot.Provider{BaseURL: "http://127.0.0.1:8080/v1", CredentialEnv: "K"},
			want: `needs a model`},
		{name: "isolated without a credential", p: pilot.Provider{Isolated: true},
			want: `set credential_env`},
		{name: "unknown mode", mode: "deploy", want: `mode "deploy"`},
		{name: "empty prompt", prompt: " \n", want: `the task is empty`},
		{name: "isolated resume of a bare thread id", p: pilot.Provider{Isolated: true, CredentialEnv: "K"},
			resume: "0199a213-81c0-7800-8aa1-bbab2a035a53", want: `holds no threads`},
		{name: "a rollout file without isolation", resume: rollout, want: `only an isolated provider`},
		{name: "a path that is no rollout", p: pilot.Provider{Isolated: true, CredentialEnv: "K"},
			resume: "/tmp/notes.txt", want: `codex rollout file`},
		{name: "a missing rollout file", p: pilot.Provider{Isolated: true, CredentialEnv: "K"},
			resume: rollout, want: `copying the rollout`},
		{name: "a model that is not UTF-8", p: pilot.Provider{Model: "m\xff", BaseURL: "http://127.0.0.1:8080/v1"},
			want: `not valid UTF-8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mode, prompt := tt.mode, tt.prompt
			if mode == "" {
				mode = pilot.ModeCode
			}
			if prompt == "" {
				prompt = "do it"
			}
			wantRefusal(t, agents.CodexRunner{}, agentAttempt(t, agents.RunnerCodex, tt.p, mode, tt.resume, prompt, ""), tt.want)
		})
	}
}

// codexParseTOML reads the "key = basic string" lines of a TOML file,
// with table headers, into "table.key" → value: enough of TOML to read
// back what the codex runner writes, and strict about it.
func codexParseTOML(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	table := ""
	for i, line := range strings.Split(text, "\n") {
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			table = strings.Trim(line, "[]") + "."
			continue
		}
		key, val, ok := strings.Cut(line, " = ")
		if !ok {
			t.Fatalf("line %d: %q is not key = value", i+1, line)
		}
		if val == "true" || val == "false" {
			out[table+key] = val
			continue
		}
		s, err := codexUnquoteTOML(val)
		if err != nil {
			t.Fatalf("line %d: %q: %v", i+1, line, err)
		}
		out[table+key] = s
	}
	return out
}

// codexUnquoteTOML decodes one TOML basic string that makes up all of s.
func codexUnquoteTOML(s string) (string, error) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", fmt.Errorf("not a basic string")
	}
	var b strings.Builder
	in := s[1 : len(s)-1]
	for i := 0; i < len(in); {
		r, n := utf8.DecodeRuneInString(in[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return "", fmt.Errorf("invalid UTF-8")
		case r == '"':
			return "", fmt.Errorf("unescaped quote")
		case (r < 0x20 && r != '\t') || r == 0x7f:
			return "", fmt.Errorf("unescaped control character %U", r)
		case r != '\\':
			b.WriteRune(r)
			i += n
			continue
		}
		if i+1 >= len(in) {
			return "", fmt.Errorf("trailing backslash")
		}
		esc := in[i+1]
		i += 2
		switch esc {
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case '"':
			b.WriteByte('"')
		case '\\':
			b.WriteByte('\\')
		case 'u', 'U':
			w := 4
			if esc == 'U' {
				w = 8
			}
			if i+w > len(in) {
				return "", fmt.Errorf("short \\%c escape", esc)
			}
			v, err := strconv.ParseUint(in[i:i+w], 16, 32)
			if err != nil {
				return "", err
			}
			b.WriteRune(rune(v))
			i += w
		default:
			return "", fmt.Errorf("unknown escape \\%c", esc)
		}
	}
	return b.String(), nil
}

func TestCodexConfigTOMLQuoting(t *testing.T) {
	models := []string{
		"gpt-5-codex",
		`quote " and backslash \ and \n literally`,
		"newline\nreturn\rtab\tbackspace\bformfeed\f",
		"controls \x00\x01\x1f\x7f end",
		`''' and """ and # and ] and = and [model_providers.evil]`,
		"\"\nmodel_provider = \"evil\"",
		"unicode: é ☃ 𝄞 \u2028",
		`trailing backslash \`,
	}
	for i, model := range models {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			p := pilot.Provider{Name: "cx", Model: model, BaseURL: "http://127.0.0.1:8080/v1?x=\"y\"", CredentialEnv: "LOCAL_KEY"}
			a := agentAttempt(t, agents.RunnerCodex, p, pilot.ModeCode, "", "hi", "")
			agentCommand(t, agents.CodexRunner{}, a)
			data, err := os.ReadFile(filepath.Join(a.RunDir, "codex-home", "config.toml"))
			if err != nil {
				t.Fatal(err)
			}
			got := codexParseTOML(t, string(data))
			want := map[string]string{
				"model":                          model,
				"model_provider":                 "pilot",
				"features.plugins":               "false",
				"analytics.enabled":              "false",
				"model_providers.pilot.name":     "pilot cx",
				"model_providers.pilot.base_url": p.BaseURL,
				"model_providers.pilot.env_key":  "LOCAL_KEY",
				"model_providers.pilot.wire_api": "responses",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("config.toml (-want +got):\n%s\n%s", diff, data)
			}
		})
	}
}

func TestCodexCommandIsolated(t *testing.T) {
	p := pilot.Provider{Isolated: true, CredentialEnv: "OPENAI_KEY_2"}
	a := agentAttempt(t, agents.RunnerCodex, p, pilot.ModeCode, "", "hi", "")
	cmd := agentCommand(t, agents.CodexRunner{}, a)
	home := filepath.Join(a.RunDir, "codex-home")
	if diff := cmp.Diff(map[string]string{"CODEX_HOME": home}, cmd.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	st, err := os.Stat(home)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("CODEX_HOME mode %v, want 0700", st.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(home, "config.toml")); !os.IsNotExist(err) {
		t.Errorf("config.toml written without a base_url (stat: %v)", err)
	}
}

// TestCodexIsolatedDispatch runs isolated codex workers for real (the fake
// agent replays a stream): the worker gets its own CODEX_HOME, the secret
// in the provider's variable (and in CODEX_API_KEY without a base_url), and
// a config.toml that names the variable, never the secret.
func TestCodexIsolatedDispatch(t *testing.T) {
	const secret = "sk-test-0123456789abcdef"
	for _, baseURL := range []string{"", "http://127.0.0.1:8080/v1"} {
		t.Run("base_url="+baseURL, func(t *testing.T) {
			p := replayProvider(t, agents.RunnerCodex, "../testdata/codex/stream/success-docs-sample")
			p.Name, p.Model, p.CredentialEnv, p.BaseURL, p.Isolated = "cx", "local-model", "LOCAL_KEY", baseURL, true
			d := secretDispatcher(t, p, secret)
			v := dispatchCompleted(t, d, pilot.Task{Provider: "cx", Mode: pilot.ModeCode, Prompt: "hi"})
			home := filepath.Join(filepath.Dir(v.Record), "codex-home")
			_, env := readCall(t, p)
			if env["CODEX_HOME"] != home {
				t.Errorf("CODEX_HOME = %q, want %q", env["CODEX_HOME"], home)
			}
			if env["LOCAL_KEY"] != secret {
				t.Errorf("LOCAL_KEY not passed to the worker")
			}
			if got, want := env["CODEX_API_KEY"] == secret, baseURL == ""; got != want {
				t.Errorf("CODEX_API_KEY set: %v, want %v", got, want)
			}
			if baseURL == "" {
				if _, err := os.Stat(filepath.Join(home, "config.toml")); !os.IsNotExist(err) {
					t.Errorf("config.toml written without a base_url (stat: %v)", err)
				}
				return
			}
			cfg := readPrivateFile(t, filepath.Join(home, "config.toml"))
			if strings.Contains(string(cfg), secret) {
				t.Fatalf("config.toml holds the secret:\n%s", cfg)
			}
			got := codexParseTOML(t, string(cfg))
			if got["model_providers.pilot.env_key"] != "LOCAL_KEY" || got["model_providers.pilot.base_url"] != baseURL ||
				got["model"] != "local-model" || got["model_provider"] != "pilot" ||
				got["features.plugins"] != "false" || got["analytics.enabled"] != "false" {
				t.Errorf("config.toml:\n%s", cfg)
			}
		})
	}
}

// TestCodexIsolatedResume follows a thread across two isolated workers: the
// first one's verdict names its rollout file, and the second one's command
// copies that file into its own CODEX_HOME and resumes the thread by id.
func TestCodexIsolatedResume(t *testing.T) {
	const id = "0199a213-81c0-7800-8aa1-bbab2a035a53"
	p := pilot.Provider{Isolated: true, CredentialEnv: "K"}
	first := agentAttempt(t, agents.RunnerCodex, p, pilot.ModeCode, "", "start", "")
	cmd := agentCommand(t, agents.CodexRunner{}, first)
	// What codex would have written in the first worker's CODEX_HOME.
	name := "rollout-2026-01-02T03-04-05-" + id + ".jsonl"
	dir := filepath.Join(first.RunDir, "codex-home", "sessions", "2026", "01", "02")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	rollout := filepath.Join(dir, name)
	meta := `{"timestamp":"2026-01-02T03:04:05.000Z","type":"session_meta","payload":{"id":"` + id + `"}}` + "\n"
	if err := os.WriteFile(rollout, []byte(meta), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{`{"type":"thread.started","thread_id":"` + id + `"}`, `{"type":"turn.started"}`,
		`{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"ok"}}`,
		`{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":2}}`} {
		cmd.Watcher.Line(pilot.Line{Stream: pilot.Stdout, Data: []byte(l), Size: int64(len(l))})
	}
	res := cmd.Watcher.Finish(pilot.Exit{Runner: "codex", Started: true})
	if res.Outcome != pilot.Completed || res.SessionID != id || res.Resume != rollout {
		t.Fatalf("first result: %+v; want completed, session %s, resume %s", res, id, rollout)
	}

	second := agentAttempt(t, agents.RunnerCodex, p, pilot.ModeResume, res.Resume, "go on", "")
	cmd2 := agentCommand(t, agents.CodexRunner{}, second)
	if !subsequence(cmd2.Argv, []string{"exec", "resume", "--", id, "go on"}) {
		t.Errorf("argv %q does not resume %s", cmd2.Argv, id)
	}
	copied, err := os.ReadFile(filepath.Join(second.RunDir, "codex-home", "sessions", "2026", "01", "02", name))
	if err != nil || string(copied) != meta {
		t.Errorf("the rollout was not copied into the new CODEX_HOME: %q, %v", copied, err)
	}
}

// codexFeed feeds lines to a fresh codex watcher and returns it with the
// phase it shows after each line.
func codexFeed(t *testing.T, lines []pilot.Line) (pilot.PhaseWatcher, []pilot.SessionState) {
	t.Helper()
	w := agentWatcher(t, agents.CodexRunner{}, agentAttempt(t, agents.RunnerCodex, pilot.Provider{}, pilot.ModeCode, "", "hi", ""))
	var states []pilot.SessionState
	for _, l := range lines {
		if l.Size == 0 {
			l.Size = int64(len(l.Data))
		}
		w.Line(l)
		st, _, _ := w.StreamState()
		states = append(states, st)
	}
	return w, states
}

func codexOut(s string) pilot.Line { return pilot.Line{Stream: pilot.Stdout, Data: []byte(s)} }

func TestCodexWatcherPhases(t *testing.T) {
	type phase struct {
		Phase   pilot.SessionPhase
		Reason  string
		Pending []string
	}
	tests := []struct {
		name  string
		lines []pilot.Line
		want  []phase // after each line
	}{
		{
			name: "parallel commands: every open item is pending",
			lines: []pilot.Line{
				codexOut(`{"type":"turn.started"}`),
				codexOut(`{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"a","aggregated_output":"","status":"in_progress"}}`),
				codexOut(`{"type":"item.started","item":{"id":"item_2","type":"mcp_tool_call","server":"s","tool":"t","arguments":{},"status":"in_progress"}}`),
				codexOut(`{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"a","aggregated_output":"","exit_code":0,"status":"completed"}}`),
				codexOut(`{"type":"item.completed","item":{"id":"item_2","type":"mcp_tool_call","server":"s","tool":"t","arguments":{},"status":"completed"}}`),
			},
			want: []phase{
				{pilot.PhaseAwaitingModel, "stream:turn.started", nil},
				{pilot.PhaseToolRunning, "stream:item.started", []string{"item_1"}},
				{pilot.PhaseToolRunning, "stream:item.started", []string{"item_1", "item_2"}},
				{pilot.PhaseToolRunning, "stream:item.completed", []string{"item_2"}},
				{pilot.PhaseAwaitingModel, "stream:item.completed", nil},
			},
		},
		{
			name: "a retry notice keeps the phase and its pending tools",
			lines: []pilot.Line{
				codexOut(`{"type":"turn.started"}`),
				codexOut(`{"type":"item.started","item":{"id":"item_1","type":"web_search","query":"q"}}`),
				codexOut(`{"type":"error","message":"Reconnecting... 1/5 (request timed out)"}`),
			},
			want: []phase{
				{pilot.PhaseAwaitingModel, "stream:turn.started", nil},
				{pilot.PhaseToolRunning, "stream:item.started", []string{"item_1"}},
				{pilot.PhaseToolRunning, "stream:error(retrying)", []string{"item_1"}},
			},
		},
		{
			name: "items that run nothing, updates, warnings, stderr and noise change nothing",
			lines: []pilot.Line{
				codexOut(`{"type":"turn.started"}`),
				codexOut(`{"type":"item.started","item":{"id":"item_0","type":"todo_list","items":[{"text":"a","completed":false}]}}`),
				codexOut(`{"type":"item.updated","item":{"id":"item_0","type":"todo_list","items":[{"text":"a","completed":true}]}}`),
				codexOut(`{"type":"item.completed","item":{"id":"item_1","type":"error","message":"model rerouted: a -> b"}}`),
				{Stream: pilot.Stderr, Data: []byte(`{"type":"turn.completed","usage":{}}`)},
				codexOut(`not json {"type":"turn.failed"}`),
				codexOut(`{"type":"future.event","item":{"id":"x","type":"command_execution"}}`),
			},
			want: []phase{
				{pilot.PhaseAwaitingModel, "stream:turn.started", nil},
				{pilot.PhaseAwaitingModel, "stream:turn.started", nil},
				{pilot.PhaseAwaitingModel, "stream:turn.started", nil},
				{pilot.PhaseAwaitingModel, "stream:item.completed", nil},
				{pilot.PhaseAwaitingModel, "stream:item.completed", nil},
				{pilot.PhaseAwaitingModel, "stream:item.completed", nil},
				{pilot.PhaseAwaitingModel, "stream:item.completed", nil},
			},
		},
		{
			name: "a cut-short item.completed still closes its item",
			lines: []pilot.Line{
				codexOut(`{"type":"turn.started"}`),
				codexOut(`{"type":"item.started","item":{"id":"item_7","type":"command_execution","command":"cat big","aggregated_output":"","status":"in_progress"}}`),
				{Stream: pilot.Stdout, Data: []byte(`{"type":"item.completed","item":{"id":"item_7","type":"command_execution","command":"cat big","aggregated_output":"aaaa`), Size: 1 << 30, Truncated: true},
			},
			want: []phase{
				{pilot.PhaseAwaitingModel, "stream:turn.started", nil},
				{pilot.PhaseToolRunning, "stream:item.started", []string{"item_7"}},
				{pilot.PhaseAwaitingModel, "stream:item.completed", nil},
			},
		},
		{
			name: "a sub-agent wait is a tool run",
			lines: []pilot.Line{
				codexOut(`{"type":"turn.started"}`),
				codexOut(`{"type":"item.started","item":{"id":"item_3","type":"collab_tool_call","tool":"wait","sender_thread_id":"a","receiver_thread_ids":["b"],"prompt":null,"agents_states":{},"status":"in_progress"}}`),
				codexOut(`{"type":"item.completed","item":{"id":"item_3","type":"collab_tool_call","tool":"wait","sender_thread_id":"a","receiver_thread_ids":["b"],"prompt":null,"agents_states":{},"status":"completed"}}`),
			},
			want: []phase{
				{pilot.PhaseAwaitingModel, "stream:turn.started", nil},
				{pilot.PhaseToolRunning, "stream:item.started", []string{"item_3"}},
				{pilot.PhaseAwaitingModel, "stream:item.completed", nil},
			},
		},
		{
			name: "a fatal error event, then turn.failed",
			lines: []pilot.Line{
				codexOut(`{"type":"thread.started","thread_id":"t"}`),
				codexOut(`{"type":"turn.started"}`),
				codexOut(`{"type":"error","message":"unexpected status 401 Unauthorized: nope"}`),
				codexOut(`{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: nope"}}`),
			},
			want: []phase{
				{pilot.PhaseStarting, "stream:thread.started", nil},
				{pilot.PhaseAwaitingModel, "stream:turn.started", nil},
				{pilot.PhaseErrored, "stream:error", nil},
				{pilot.PhaseErrored, "stream:turn.failed", nil},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, states := codexFeed(t, tt.lines)
			var got []phase
			for _, st := range states {
				got = append(got, phase{st.Phase, st.Reason, st.PendingToolCallIDs})
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); diff != "" {
				t.Errorf("phases (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCodexWatcherFinish(t *testing.T) {
	const (
		started   = `{"type":"thread.started","thread_id":"t-1"}`
		turn      = `{"type":"turn.started"}`
		message   = `{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"done"}}`
		blank     = `{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"  \n"}}`
		completed = `{"type":"turn.completed","usage":{"input_tokens":5,"cached_input_tokens":1,"output_tokens":2}}`
		failed    = `{"type":"turn.failed","error":{"message":"turn failed"}}`
		fatal     = `{"type":"error","message":"something broke"}`
	)
	ok := pilot.Exit{Runner: "codex", Started: true, StdoutBytes: 100}
	exit1 := ok
	exit1.Code = 1
	auth := exit1
	authDiag, _ := diagnose(t, agents.RunnerCodex, pilot.Stderr, "unexpected status 401 Unauthorized: x")
	auth.Diagnostic = withSource(authDiag, "codex:stdout")
	killed := ok
	killed.Code, killed.Signal = -1, 9
	usage := &pilot.Usage{InputTokens: 5, CacheReadTokens: 1, OutputTokens: 2}
	tests := []struct {
		name  string
		lines []pilot.Line
		exit  pilot.Exit
		want  pilot.Result
	}{
		{"completed", []pilot.Line{codexOut(started), codexOut(turn), codexOut(message), codexOut(completed)}, ok,
			pilot.Result{Outcome: pilot.Completed, SessionID: "t-1", Usage: usage}},
		{"completed wins over a later exit 1", []pilot.Line{codexOut(started), codexOut(turn), codexOut(message), codexOut(completed)}, exit1,
			pilot.Result{Outcome: pilot.Completed, SessionID: "t-1", Usage: usage}},
		{"a blank message is no answer", []pilot.Line{codexOut(started), codexOut(turn), codexOut(blank), codexOut(completed)}, ok,
			pilot.Result{Outcome: pilot.Empty, SessionID: "t-1", Usage: usage}},
		{"a cut-short agent_message is an answer",
			[]pilot.Line{codexOut(started), codexOut(turn),
				{Stream: pilot.Stdout, Data: []byte(`{"type":"item.completed","item":{"id":"item_9","type":"agent_message","text":"long`), Size: 1 << 30, Truncated: true},
				codexOut(completed)}, ok,
			pilot.Result{Outcome: pilot.Completed, SessionID: "t-1", Usage: usage}},
		{"usage is replaced, not summed",
			[]pilot.Line{codexOut(started), codexOut(turn), codexOut(`{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":50,"output_tokens":10}}`),
				codexOut(turn), codexOut(message), codexOut(completed)}, ok,
			pilot.Result{Outcome: pilot.Completed, SessionID: "t-1", Usage: usage}},
		{"turn.failed without a diagnostic: the event is the evidence", []pilot.Line{codexOut(started), codexOut(turn), codexOut(failed)}, exit1,
			pilot.Result{Outcome: pilot.Failed, Classification: pilot.Classification{Class: pilot.FailGeneric, Source: "codex:stdout", Evidence: failed}, SessionID: "t-1"}},
		{"turn.failed with exit 0 is still a failure", []pilot.Line{codexOut(started), codexOut(turn), codexOut(failed)}, ok,
			pilot.Result{Outcome: pilot.Failed, Classification: pilot.Classification{Class: pilot.FailGeneric, Source: "codex:stdout", Evidence: failed}, SessionID: "t-1"}},
		{"turn.failed with a diagnostic: its class", []pilot.Line{codexOut(started), codexOut(turn), codexOut(failed)}, auth,
			pilot.Result{Outcome: pilot.Failed, Classification: pilot.Classification{Class: pilot.FailProviderAuth, Source: "codex:stdout", Evidence: "unexpected status 401 Unauthorized: x"}, DecidedBy: "provider-terminal-diagnostic", SessionID: "t-1"}},
		{"a fatal error event and no terminal event", []pilot.Line{codexOut(started), codexOut(turn), codexOut(fatal)}, exit1,
			pilot.Result{Outcome: pilot.Failed, Classification: pilot.Classification{Class: pilot.FailGeneric, Source: "codex:stdout", Evidence: fatal}, SessionID: "t-1"}},
		{"retries alone, then exit 0: incomplete", []pilot.Line{codexOut(started), codexOut(turn), codexOut(`{"type":"error","message":"Reconnecting... 5/5 (x)"}`)}, ok,
			pilot.Result{Outcome: pilot.Failed, Classification: pilot.Classification{Class: pilot.FailIncomplete, Source: "codex:stdout", Evidence: "codex exited 0 without turn.completed or turn.failed"}, SessionID: "t-1"}},
		{"exit 1 and nothing on stdout", nil, exit1,
			pilot.Result{Outcome: pilot.Failed, Classification: pilot.Classification{Class: pilot.FailGeneric}, DecidedBy: "exit-status"}},
		{"killed after turn.completed: the signal decides", []pilot.Line{codexOut(started), codexOut(turn), codexOut(message), codexOut(completed)}, killed,
			pilot.Result{Outcome: pilot.Failed, Classification: pilot.Classification{Class: pilot.FailProcessTerminated}, DecidedBy: "process-termination", SessionID: "t-1", Usage: usage}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, _ := codexFeed(t, tt.lines)
			if diff := cmp.Diff(tt.want, w.Finish(tt.exit)); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzCodexWatcher(f *testing.F) {
	for _, name := range []string{"success-docs-sample", "parallel-commands", "collab-subagent-wait", "failed-stream-disconnect"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "codex", "stream", name+".stdout"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint8(0))
	}
	f.Add([]byte(`{"type":"item.completed","item":{"id":"item_\`), uint8(3))
	f.Add([]byte("{\"type\":\"item.started\",\"item\":{\"id\":\"\",\"type\":\"web_search\",\"id\":\"ws\"}}\n{\"type\":\"error\",\"message\":7}"), uint8(1))
	a := agentAttempt(f, agents.RunnerCodex, pilot.Provider{}, pilot.ModeCode, "", "hi", "") // not isolated: nothing is written
	f.Fuzz(func(t *testing.T, data []byte, flags uint8) {
		var lines []pilot.Line
		for i, l := range strings.Split(string(data), "\n") {
			line := pilot.Line{Stream: pilot.Stdout, Data: []byte(l), Size: int64(len(l))}
			if flags&1 != 0 && i%2 == 1 {
				line.Stream = pilot.Stderr
			}
			if flags&2 != 0 && len(l) > 8 {
				line.Data, line.Truncated = line.Data[:len(l)/2], true
			}
			lines = append(lines, line)
		}
		res := fuzzWatcher(t, agents.CodexRunner{}, a, lines, pilot.Exit{Runner: "codex", Started: true, Code: int(flags >> 4), StdoutBytes: int64(len(data))})
		if res.Outcome == pilot.StepCappedPartial {
			t.Errorf("outcome %q: codex has no step cap", res.Outcome)
		}
	})
}

func ExampleCodexRunner() {
	cmd, err := agents.CodexRunner{}.Command(context.Background(), pilot.Attempt{
		Task:     pilot.Task{Provider: "codex", Mode: pilot.ModeReview, Prompt: "Review the last commit."},
		Provider: pilot.Provider{Name: "codex", Runner: agents.RunnerCodex, Model: "gpt-5-codex", CredentialEnv: "OPENAI_API_KEY"},
		Prompt:   "Review the last commit.",
		Workdir:  "/src/app",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Join(cmd.Argv, " "))
	fmt.Println("stdin is /dev/null:", cmd.Stdin == nil)
	fmt.Println("secret also in:", cmd.SecretEnv)
	// Output:
	// codex exec --json --skip-git-repo-check -C /src/app -s read-only -m gpt-5-codex -- Review the last commit.
	// stdin is /dev/null: true
	// secret also in: [CODEX_API_KEY]
}

// TestCodexInvalidTerminalEventIsNotBelieved: the watcher reads events
// through jsonskim, which checks their structure but not every literal; a
// turn.completed that is not valid JSON must not end the run as completed.
func TestCodexInvalidTerminalEventIsNotBelieved(t *testing.T) {
	a := agentAttempt(t, agents.RunnerCodex, pilot.Provider{Name: "codex"}, pilot.ModeCode, "", "go", "")
	for _, tc := range []struct {
		name, last string
		want       pilot.Outcome
	}{
		{"valid", `{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":2}}`, pilot.Completed},
		{"bad number", `{"type":"turn.completed","usage":{"input_tokens":1x0,"cached_input_tokens":0,"output_tokens":2}}`, pilot.Failed},
		{"bad literal", `{"type":"turn.completed","usage":nul}`, pilot.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := agentCommand(t, agents.CodexRunner{}, a).Watcher
			feed(w, `{"type":"turn.started"}`,
				`{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"ok"}}`, tc.last)
			if res := w.Finish(pilot.Exit{Runner: "codex", Started: true}); res.Outcome != tc.want {
				t.Errorf("after %s: %s, want %s", tc.last, res.Outcome, tc.want)
			}
		})
	}
}
