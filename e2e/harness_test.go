package e2e_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvRequire, set to 1, turns a missing CLI into a test failure (CI sets
// it after npm ci); otherwise such tests skip.
const EnvRequire = "PILOT_E2E_REQUIRE"

// nodeModules is where npm ci puts the CLIs: this package's directory,
// which is the working directory of its tests.
const nodeModules = "node_modules"

// A cli is one agent CLI of package.json.
type cli struct {
	name    string   // pilot's runner name, and the test name
	pkg     string   // the npm package whose version package-lock.json pins
	paths   []string // candidates under node_modules, first found wins
	node    bool     // a node script: needs node on PATH
	version []string // arguments that print the version and exit
	// versionOnStderr: the CLI prints its version on stderr (pi does),
	// which the command runner would judge empty; the smoke test runs it
	// through sh with stderr on stdout.
	versionOnStderr bool
}

// clis lists the CLIs package.json pins. opencode comes from its linux-x64
// package directly (see NOTES.md: the opencode-ai wrapper's lock entries do
// not let npm ci run here); a .bin/opencode from opencode-ai is used first
// when present.
var clis = []cli{
	{name: "pi", pkg: "@mariozechner/pi-coding-agent", paths: []string{".bin/pi"}, node: true, version: []string{"--version"}, versionOnStderr: true},
	{name: "codex", pkg: "@openai/codex", paths: []string{".bin/codex"}, node: true, version: []string{"--version"}},
	{name: "claude", pkg: "@anthropic-ai/claude-code", paths: []string{".bin/claude"}, version: []string{"--version"}},
	{name: "opencode", pkg: "opencode-linux-x64", paths: []string{
		".bin/opencode", "opencode-linux-x64/bin/opencode", "opencode-linux-x64-baseline/bin/opencode",
	}, version: []string{"--version"}},
	{name: "gemini", pkg: "@google/gemini-cli", paths: []string{".bin/gemini"}, node: true, version: []string{"--version"}},
}

func cliNamed(t *testing.T, name string) cli {
	t.Helper()
	for _, c := range clis {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no CLI named %q in the e2e table", name)
	return cli{}
}

// missing skips the test, or fails it under PILOT_E2E_REQUIRE=1.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf(format+" (%s=1 makes this a failure)", append(args, EnvRequire)...)
	}
	t.Skipf(format+" (set %s=1 to make this a failure)", append(args, EnvRequire)...)
}

// binary returns the absolute path of c's executable in node_modules, or
// skips (fails under PILOT_E2E_REQUIRE=1) when it is not installed.
func (c cli) binary(t *testing.T) string {
	t.Helper()
	for _, p := range c.paths {
		path, err := filepath.Abs(filepath.Join(nodeModules, p))
		if err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			if c.node {
				if _, err := exec.LookPath("node"); err != nil {
					missing(t, "%s is a node script and node is not on PATH: install Node.js (20 or later)", c.name)
				}
			}
			return path
		}
	}
	missing(t, "%s is not installed in e2e/node_modules: run `cd e2e && npm ci`", c.name)
	return ""
}

// pinnedVersion is c's version in package-lock.json.
func (c cli) pinnedVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		t.Fatalf("package-lock.json: %v", err)
	}
	v := lock.Packages["node_modules/"+c.pkg].Version
	if v == "" {
		t.Fatalf("package-lock.json pins no version of %s", c.pkg)
	}
	return v
}

// isolatedEnv is the environment every e2e worker gets on top of PATH: a
// home and config dirs of its own under a temporary directory, each CLI's
// switches for offline use (NOTES.md), and proxies pointing at guard, so
// that a request for anything but 127.0.0.1 that honours the proxy
// variables fails at once and is recorded.
func isolatedEnv(t *testing.T, guard *netGuard) map[string]string {
	t.Helper()
	root := t.TempDir()
	env := map[string]string{
		"HOME":   filepath.Join(root, "home"),
		"TMPDIR": filepath.Join(root, "tmp"),
		"LANG":   "C.UTF-8",
		"TERM":   "dumb",

		"XDG_CONFIG_HOME": filepath.Join(root, "xdg", "config"),
		"XDG_DATA_HOME":   filepath.Join(root, "xdg", "data"),
		"XDG_CACHE_HOME":  filepath.Join(root, "xdg", "cache"),
		"XDG_STATE_HOME":  filepath.Join(root, "xdg", "state"),

		"PI_CODING_AGENT_DIR": filepath.Join(root, "pi-agent"),
		"PI_OFFLINE":          "1",

		"CODEX_HOME": filepath.Join(root, "codex-home"),

		"CLAUDE_CONFIG_DIR":                        filepath.Join(root, "claude"),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",

		"OPENCODE_DISABLE_MODELS_FETCH":    "1",
		"OPENCODE_DISABLE_AUTOUPDATE":      "1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD":    "1",
		"OPENCODE_DISABLE_SHARE":           "1",

		"GEMINI_CLI_HOME":            filepath.Join(root, "gemini-home"),
		"GEMINI_CLI_TRUST_WORKSPACE": "true",
	}
	for _, k := range []string{"HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "PI_CODING_AGENT_DIR", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME"} {
		if err := os.MkdirAll(env[k], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if guard != nil {
		u := "http://" + guard.addr
		for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"} {
			env[k] = u
		}
		env["NO_PROXY"] = "127.0.0.1,localhost"
		env["no_proxy"] = "127.0.0.1,localhost"
		// opencode asks the npm registry about packages at start-up; this
		// sends it to the guard instead (NOTES.md).
		env["NPM_CONFIG_REGISTRY"] = u + "/"
	}
	return env
}

// A netGuard is a listener on 127.0.0.1 that stands in for a proxy: it
// records the first line of every request it gets (a CONNECT names the
// host a CLI wanted) and closes the connection, so the request fails at
// once instead of waiting on the network.
type netGuard struct {
	addr string
	ln   net.Listener
	wg   sync.WaitGroup

	mu       sync.Mutex
	requests []string
}

func newNetGuard(t *testing.T) *netGuard {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &netGuard{addr: ln.Addr().String(), ln: ln}
	g.wg.Add(1)
	go g.serve()
	t.Cleanup(g.close)
	return g
}

func (g *netGuard) serve() {
	defer g.wg.Done()
	for {
		c, err := g.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			line, _ := bufio.NewReaderSize(c, 4096).ReadString('\n')
			g.mu.Lock()
			g.requests = append(g.requests, strings.TrimSpace(line))
			g.mu.Unlock()
		}()
	}
}

// close stops the listener and waits for every connection's goroutine.
func (g *netGuard) close() {
	g.ln.Close()
	g.wg.Wait()
}

// escapes returns the recorded requests that were meant for a host beyond
// 127.0.0.1: proxy requests (CONNECT, or an absolute URL). A request in
// origin form ("GET /@scope%2fname") was sent to the guard as the npm
// registry (NPM_CONFIG_REGISTRY): that is the block working, not an
// escape.
func (g *netGuard) escapes() []string {
	var out []string
	for _, r := range g.seen() {
		if _, target, _ := strings.Cut(r, " "); !strings.HasPrefix(target, "/") {
			out = append(out, r)
		}
	}
	return out
}

// seen returns the request lines recorded so far.
func (g *netGuard) seen() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.requests...)
}
