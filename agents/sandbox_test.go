package agents_test

import (
	"net"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/sandbox"
)

func TestSandboxNeeds(t *testing.T) {
	const home = "/home/u"
	isolated := pilot.Provider{Isolated: true}
	withBase := pilot.Provider{BaseURL: "http://127.0.0.1:8080/v1"}
	env := func(kv ...string) pilot.Provider {
		p := pilot.Provider{Env: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			p.Env[kv[i]] = kv[i+1]
		}
		return p
	}
	tests := []struct {
		name   string
		runner sandboxRunner
		p      pilot.Provider
		want   sandbox.Needs
	}{
		{"pi", agents.PiRunner{}, pilot.Provider{}, sandbox.Needs{
			Own: []string{"/home/u/.pi"}, Write: []string{"/home/u/.pi/agent"}, Connect: []string{"api.anthropic.com:443"}}},
		{"pi agent dir moved", agents.PiRunner{}, env("PI_CODING_AGENT_DIR", "/data/pi"), sandbox.Needs{
			Own: []string{"/data/pi"}, Write: []string{"/data/pi"}, Connect: []string{"api.anthropic.com:443"}}},
		{"pi isolated", agents.PiRunner{}, isolated, sandbox.Needs{Connect: []string{"api.anthropic.com:443"}}},

		{"codex", agents.CodexRunner{}, pilot.Provider{}, sandbox.Needs{
			Own: []string{"/home/u/.codex"}, Write: []string{"/home/u/.codex"},
			Connect: []string{"api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443"}}},
		{"codex home and endpoint moved", agents.CodexRunner{}, env("CODEX_HOME", "/data/codex", "OPENAI_BASE_URL", "http://gw.internal:4000/v1"), sandbox.Needs{
			Own: []string{"/data/codex"}, Write: []string{"/data/codex"}, Connect: []string{"gw.internal:4000"}}},
		{"codex relative home ignored", agents.CodexRunner{}, env("CODEX_HOME", "rel/codex"), sandbox.Needs{
			Own: []string{"/home/u/.codex"}, Write: []string{"/home/u/.codex"},
			Connect: []string{"api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443"}}},
		{"codex with base_url", agents.CodexRunner{}, withBase, sandbox.Needs{
			Connect: []string{"api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443"}}},

		{"claude", agents.ClaudeRunner{}, pilot.Provider{}, sandbox.Needs{
			Own: []string{"/home/u/.claude", "/home/u/.claude.json"}, Write: []string{"/home/u/.claude"},
			Connect: []string{"api.anthropic.com:443"}}},
		{"claude config dir and gateway moved", agents.ClaudeRunner{}, env("CLAUDE_CONFIG_DIR", "/data/claude", "ANTHROPIC_BASE_URL", "https://gw.internal"), sandbox.Needs{
			Own: []string{"/data/claude"}, Write: []string{"/data/claude"}, Connect: []string{"gw.internal:443"}}},
		{"claude isolated", agents.ClaudeRunner{}, isolated, sandbox.Needs{Connect: []string{"api.anthropic.com:443"}}},

		{"opencode", agents.OpencodeRunner{}, pilot.Provider{}, sandbox.Needs{
			Own:     []string{"/home/u/.config/opencode", "/home/u/.local/share/opencode", "/home/u/.local/state/opencode", "/home/u/.cache/opencode"},
			Write:   []string{"/home/u/.config/opencode", "/home/u/.local/share/opencode", "/home/u/.local/state/opencode", "/home/u/.cache/opencode"},
			Connect: []string{"opencode.ai:443", "models.dev:443", "registry.npmjs.org:443"}}},
		{"opencode XDG dirs moved", agents.OpencodeRunner{}, env("XDG_CONFIG_HOME", "/x/config", "XDG_CACHE_HOME", "/x/cache"), sandbox.Needs{
			Own:     []string{"/x/config/opencode", "/home/u/.local/share/opencode", "/home/u/.local/state/opencode", "/x/cache/opencode"},
			Write:   []string{"/x/config/opencode", "/home/u/.local/share/opencode", "/home/u/.local/state/opencode", "/x/cache/opencode"},
			Connect: []string{"opencode.ai:443", "models.dev:443", "registry.npmjs.org:443"}}},
		{"opencode with base_url", agents.OpencodeRunner{}, withBase, sandbox.Needs{
			Connect: []string{"opencode.ai:443", "models.dev:443", "registry.npmjs.org:443"}}},

		{"gemini", agents.GeminiRunner{}, pilot.Provider{}, sandbox.Needs{
			Own: []string{"/home/u/.gemini"}, Write: []string{"/home/u/.gemini"},
			Connect: []string{"generativelanguage.googleapis.com:443", "cloudcode-pa.googleapis.com:443", "oauth2.googleapis.com:443"}}},
		{"gemini home and endpoint moved", agents.GeminiRunner{}, env("GEMINI_CLI_HOME", "/data/g", "GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9000"), sandbox.Needs{
			Own: []string{"/data/g/.gemini"}, Write: []string{"/data/g/.gemini"}, Connect: []string{"127.0.0.1:9000"}}},
		{"gemini isolated", agents.GeminiRunner{}, isolated, sandbox.Needs{
			Connect: []string{"generativelanguage.googleapis.com:443", "cloudcode-pa.googleapis.com:443", "oauth2.googleapis.com:443"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.runner.SandboxNeeds(tt.p, home)); diff != "" {
				t.Errorf("SandboxNeeds (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSandboxNeedsAgentDirs checks that every runner's own dirs, as pilot
// asks for them to guard them from the other workers (a zero Provider), are
// among sandbox.AgentDirs, which every worker is denied, and that its
// endpoints are host:port.
func TestSandboxNeedsAgentDirs(t *testing.T) {
	const home = "/home/u"
	dirs := sandbox.AgentDirs(home)
	for _, r := range agents.Runners() {
		sr, ok := r.(sandboxRunner)
		if !ok {
			if r.Name() != "command" {
				t.Errorf("runner %s declares no sandbox needs", r.Name())
			}
			continue
		}
		n := sr.SandboxNeeds(pilot.Provider{}, home)
		if len(n.Own) == 0 {
			t.Errorf("%s: no own dirs", r.Name())
		}
		for _, p := range n.Own {
			if !slices.Contains(dirs, p) {
				t.Errorf("%s: own path %s is not in sandbox.AgentDirs", r.Name(), p)
			}
		}
		for _, hp := range n.Connect {
			if _, _, err := net.SplitHostPort(hp); err != nil {
				t.Errorf("%s: endpoint %q: %v", r.Name(), hp, err)
			}
		}
	}
}

// sandboxRunner is a runner with pilot's optional SandboxNeeds method.
type sandboxRunner interface {
	pilot.Runner
	SandboxNeeds(p pilot.Provider, home string) sandbox.Needs
}
