package e2e_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/fakellm"
	"github.com/pilotworkers/pilot/sandbox"
)

// secretKey is the content of the secret store every scenario's HOME holds
// (~/.ssh/id_e2e): no worker may read it.
const secretKey = "e2e-secret-5f1c0a"

// sandboxScenarios are the rows TestScenariosSandboxed runs in the strict
// sandbox: the ones whose CLIs run tools in the workdir, and the happy path.
// userConfigScenarios run again with the CLI's config in HOME: the happy
// path, and the row that checks the tool's output reached the model.
var (
	sandboxScenarios    = []string{"ok-one-tool-call", "two-tool-calls-one-message", "long-running-tool", "tool-stall-terminated"}
	userConfigScenarios = []string{"ok-one-tool-call", "long-running-tool"}
)

// TestScenariosSandboxed runs sandboxScenarios for every CLI in the strict
// sandbox as the table does (an isolated worker, its config in its run
// directory), userConfigScenarios with the CLI's config and state in its
// own dirs under HOME (setup.userConfig), which the sandbox must leave to
// it, and the sandbox probe under secrets and strict. TestScenarios runs
// the whole table in one mode with PILOT_E2E_SANDBOX.
func TestScenariosSandboxed(t *testing.T) {
	t.Parallel()
	probe := scenario{name: sandboxProbeName, model: "one shell call that reads a secret, writes beyond the workdir and in it, and connects to a port strict does not allow",
		want: all(expect{verdict: pilot.Completed, phase: pilot.PhaseFinished,
			why: "the CLI's tools run confined: what the mode forbids fails, the workdir stays writable"})}
	for _, mode := range []sandbox.Mode{sandbox.Secrets, sandbox.Strict} {
		for _, name := range scenarioCLIs {
			for _, c := range clisOf(name) {
				e, _ := wantFor(probe, c)
				t.Run(string(mode)+"/"+probe.name+"/"+c.name, func(t *testing.T) {
					t.Parallel()
					runScenario(t, probe, c, e, setup{sandbox: mode})
				})
			}
		}
	}
	for _, user := range []bool{false, true} {
		for _, s := range scenarios {
			if rows := map[bool][]string{false: sandboxScenarios, true: userConfigScenarios}[user]; !slices.Contains(rows, s.name) {
				continue
			}
			for _, name := range scenarioCLIs {
				for _, c := range clisOf(name) {
					e, _ := wantFor(s, c)
					prefix := "strict/"
					if user {
						prefix = "strict-user-config/"
					}
					t.Run(prefix+s.name+"/"+c.name, func(t *testing.T) {
						t.Parallel()
						runScenario(t, s, c, e, setup{sandbox: sandbox.Strict, userConfig: user})
					})
				}
			}
		}
	}
}

// userConfig turns prov, an e2e provider with a base URL, into one whose
// CLI finds the endpoint base in its own config files, which it writes at
// their default places under the worker's HOME (no XDG_* variables, no
// config dir variables): the runner then isolates nothing.
func userConfig(t *testing.T, prov *pilot.Provider, base string) {
	t.Helper()
	env := prov.Env
	home := env["HOME"]
	for _, k := range []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
		"PI_CODING_AGENT_DIR", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "QWEN_HOME", "QWEN_RUNTIME_DIR"} {
		delete(env, k)
	}
	prov.BaseURL = ""
	switch prov.Runner {
	case "pi":
		writeFile(t, filepath.Join(home, ".pi", "agent", "models.json"),
			`{"providers":{"pilot":{"baseUrl":"`+base+`/v1","api":"openai-completions","apiKey":"`+fakeKeyEnv+`","models":[{"id":"fake-model"}]}}}`+"\n")
		prov.Args = append(prov.Args, "--provider", "pilot")
	case "codex":
		writeFile(t, filepath.Join(home, ".codex", "config.toml"), `model = "fake-model"
model_provider = "pilot"

[model_providers.pilot]
name = "pilot"
base_url = "`+base+`/v1"
env_key = "`+fakeKeyEnv+`"
wire_api = "responses"
`)
	case "claude":
		env["ANTHROPIC_BASE_URL"] = base
		// A user's Claude Code has its state file; a confined one can
		// write it in place but not create it (ClaudeRunner.SandboxNeeds).
		writeFile(t, filepath.Join(home, ".claude.json"), "{}\n")
	case "opencode":
		writeFile(t, filepath.Join(home, ".config", "opencode", "opencode.json"),
			`{"provider":{"pilot":{"npm":"@ai-sdk/openai-compatible","name":"pilot","options":{"baseURL":"`+base+`/v1","apiKey":"{env:`+fakeKeyEnv+`}"},"models":{"fake-model":{"name":"fake-model"}}}},"model":"pilot/fake-model"}`+"\n")
		prov.Model = "pilot/fake-model"
	case "kilo":
		// enabled_providers: else kilo's own providers fetch their model
		// lists from api.kilo.ai at start-up (NOTES.md).
		writeFile(t, filepath.Join(home, ".config", "kilo", "kilo.json"),
			`{"provider":{"pilot":{"npm":"@ai-sdk/openai-compatible","name":"pilot","options":{"baseURL":"`+base+`/v1","apiKey":"{env:`+fakeKeyEnv+`}"},"models":{"fake-model":{"name":"fake-model"}}}},"model":"pilot/fake-model","enabled_providers":["pilot"]}`+"\n")
		prov.Model = "pilot/fake-model"
	case "gemini":
		writeFile(t, filepath.Join(home, ".gemini", "settings.json"),
			`{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false}}`+"\n")
		env["GOOGLE_GEMINI_BASE_URL"] = base
	case "qwen":
		// The settings the runner writes for an isolated worker, and
		// the endpoint qwen takes from its environment.
		writeFile(t, filepath.Join(home, ".qwen", "settings.json"),
			`{"memory":{"enableManagedAutoMemory":false,"enableManagedAutoDream":false,"enableAutoSkill":false},"privacy":{"usageStatisticsEnabled":false}}`+"\n")
		env["OPENAI_BASE_URL"] = base + "/v1"
		env["OPENAI_MODEL"] = "fake-model"
	case "copilot":
		// copilot has no config file for a BYOK provider: its
		// environment is the user's config (formats-copilot.md).
		env["COPILOT_PROVIDER_BASE_URL"] = base + "/v1"
		env["COPILOT_MODEL"] = "fake-model"
		env["COPILOT_OFFLINE"] = "true"
	default:
		t.Fatalf("no user config for runner %q", prov.Runner)
	}
}

// userState is where each CLI keeps a run's session under HOME when it is
// not isolated: a completed run writes there.
var userState = map[string]string{
	"pi":       ".pi/agent",
	"codex":    ".codex/sessions",
	"claude":   ".claude/projects",
	"opencode": ".local/share/opencode",
	"gemini":   ".gemini/tmp",
	"qwen":     ".qwen/projects",
	"kilo":     ".local/share/kilo",
	"copilot":  ".copilot/session-state",
}

// checkUserState checks that a completed run of a CLI with its config
// under home wrote its state there, in its own dirs, after start.
func checkUserState(t *testing.T, runner, home string, start time.Time) {
	t.Helper()
	dir := filepath.Join(home, userState[runner])
	var wrote []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if info, err := d.Info(); err == nil && !info.ModTime().Before(start) {
			wrote = append(wrote, strings.TrimPrefix(path, home+"/"))
		}
		return nil
	})
	if err != nil || len(wrote) == 0 {
		t.Errorf("%s wrote nothing in %s (%v): its own state dir must stay writable to it", runner, dir, err)
	}
}

// sandboxProbeName is the scenario TestScenariosSandboxed adds to the
// table's rows: one shell tool call that tries what the sandbox forbids.
const sandboxProbeName = "sandbox-probe"

// probeMarker is the probe command's last output (worked out by the
// shell, so that the command's text, echoed back, does not hold it).
const probeMarker = "SANDBOX-PROBE-RAN"

// A sandboxProbe is the set-up of one probe run: what its command tries,
// and how to tell what got through.
type sandboxProbe struct {
	secret  string // ~/.ssh/id_e2e: guarded in every mode but off
	outside string // a file beyond the workdir, where no guard is
	inside  string // a file in the workdir
	ln      net.Listener
	hits    atomic.Int32 // connections to ln, a port no sandbox_connect names
}

func newSandboxProbe(t *testing.T, home, workdir string) *sandboxProbe {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// opencode asks before a tool touches a path beyond the project
	// (its external_directory permission), and a run rejects what it
	// would ask: the probe is about pilot's sandbox, so the project
	// allows it.
	writeFile(t, filepath.Join(workdir, "opencode.json"), `{"permission":{"external_directory":"allow"}}`+"\n")
	p := &sandboxProbe{
		secret:  filepath.Join(home, ".ssh", "id_e2e"),
		outside: filepath.Join(t.TempDir(), "escaped"),
		inside:  filepath.Join(workdir, "probe-wrote-this"),
		ln:      ln,
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.hits.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return p
}

// command is the probe's shell command: read the secret, write beyond the
// workdir and in it, connect to the listener (bash's /dev/tcp), then say
// it ran. Each step may fail; the next still runs.
func (p *sandboxProbe) command() string {
	_, port, _ := net.SplitHostPort(p.ln.Addr().String())
	return fmt.Sprintf("cat %s; echo x > %s; echo x > %s; bash -c 'echo x > /dev/tcp/127.0.0.1/%s'; echo %s | tr a-z A-Z",
		p.secret, p.outside, p.inside, port, strings.ToLower(probeMarker))
}

// check checks what got through in mode: the secret never (but with the
// sandbox off), a write beyond the workdir only in off and secrets, a
// connection only outside strict; the write in the workdir always.
func (p *sandboxProbe) check(t *testing.T, mode sandbox.Mode, srv *fakellm.Server) {
	t.Helper()
	if mode == "" {
		mode = sandbox.Default
	}
	var sent strings.Builder
	for _, r := range srv.Requests() {
		b, _ := json.Marshal(r.Body)
		sent.Write(b)
	}
	if !strings.Contains(sent.String(), probeMarker) {
		t.Errorf("no request to the model carried %q: the probe command did not run to its end", probeMarker)
		return
	}
	if got := strings.Contains(sent.String(), secretKey); got != (mode == sandbox.Off) {
		t.Errorf("sandbox %s: the secret store's content reached the model: %v", mode, got)
	}
	_, err := os.Stat(p.outside)
	if wrote, want := err == nil, mode == sandbox.Off || mode == sandbox.Secrets; wrote != want {
		t.Errorf("sandbox %s: the probe wrote beyond the workdir: %v, want %v", mode, wrote, want)
	}
	if _, err := os.Stat(p.inside); err != nil {
		t.Errorf("sandbox %s: the probe could not write in its workdir: %v", mode, err)
	}
	// A refused connect fails at once; an accepted one is counted before
	// the command's next step: the model saw the command end.
	if got, want := p.hits.Load() > 0, mode != sandbox.Strict; got != want {
		t.Errorf("sandbox %s: the probe connected to a port strict does not allow: %v, want %v", mode, got, want)
	}
}
