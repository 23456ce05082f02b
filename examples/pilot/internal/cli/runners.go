package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
)

// A runnerPackage is the npm package of an agent CLI at the version pilot
// is tested with (e2e/package.json; TestRunnerPackagesMatchTheE2EPins keeps
// them in step), and where its program is once installed.
type runnerPackage struct {
	Package, Version string
	// Bin is the program's path under the install's node_modules.
	Bin string
}

// runnerPackages are the runners pilot can install, by runner name.
func runnerPackages() map[string]runnerPackage {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	opencode := "opencode-" + runtime.GOOS + "-" + arch
	kilo := "@kilocode/cli-" + runtime.GOOS + "-" + arch
	return map[string]runnerPackage{
		"pi":       {Package: "@mariozechner/pi-coding-agent", Version: "0.73.1", Bin: ".bin/pi"},
		"codex":    {Package: "@openai/codex", Version: "0.171.0", Bin: ".bin/codex"},
		"claude":   {Package: "@anthropic-ai/claude-code", Version: "2.1.332", Bin: ".bin/claude"},
		"gemini":   {Package: "@google/gemini-cli", Version: "0.61.0", Bin: ".bin/gemini"},
		"opencode": {Package: opencode, Version: "1.18.33", Bin: opencode + "/bin/opencode"},
		// qwen-code needs Node 22 or later on PATH (its engines field).
		"qwen": {Package: "@qwen-code/qwen-code", Version: "0.24.4", Bin: ".bin/qwen"},
		"kilo": {Package: kilo, Version: "7.7.7", Bin: kilo + "/bin/kilo"},
		// copilot's bin is a node script that starts the native binary of
		// its platform package (an optional dependency npm installs).
		"copilot": {Package: "@github/copilot", Version: "1.0.102", Bin: ".bin/copilot"},
	}
}

// dataDir is pilot's data directory: $XDG_DATA_HOME/pilot, or
// ~/.local/share/pilot.
func dataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "pilot")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "pilot-data")
	}
	return filepath.Join(home, ".local", "share", "pilot")
}

// An installedRunner is what runner.json records of an installed CLI.
type installedRunner struct {
	Runner      string    `json:"runner"`
	Package     string    `json:"package"`
	Version     string    `json:"version"`
	Binary      string    `json:"binary"`
	InstalledAt time.Time `json:"installed_at"`
	// VersionOutput is what the binary's --version printed when it was
	// verified.
	VersionOutput string `json:"version_output"`
}

func runnersDir() string { return filepath.Join(dataDir(), "runners") }

// installedRunners reads the runners installed in pilot's data dir, by
// runner name; an unreadable record is left out.
func installedRunners() map[string]installedRunner {
	out := map[string]installedRunner{}
	entries, _ := os.ReadDir(runnersDir())
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(runnersDir(), e.Name(), "runner.json"))
		if err != nil {
			continue
		}
		var r installedRunner
		if json.Unmarshal(data, &r) == nil && r.Runner == e.Name() && r.Binary != "" {
			out[r.Runner] = r
		}
	}
	return out
}

// withInstalledRunners returns reg with each provider that names no binary
// running its runner's installed CLI, when pilot installed one.
func withInstalledRunners(reg *pilot.Registry) (*pilot.Registry, error) {
	inst := installedRunners()
	if len(inst) == 0 {
		return reg, nil
	}
	var ps []pilot.Provider
	for _, name := range reg.Names() {
		p, _ := reg.Lookup(name)
		if r, ok := inst[p.Runner]; ok && p.Binary == "" {
			p.Binary = r.Binary
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return reg, nil
	}
	return reg.With(ps...)
}

// installRunner installs runner name's pinned CLI with npm into pilot's
// data dir, verifies it with its --version, and records it. A failed
// install leaves any earlier one as it was.
func installRunner(ctx context.Context, name string, dryRun bool, stdout io.Writer) error {
	pkg, ok := runnerPackages()[name]
	if !ok {
		return fmt.Errorf("unknown runner %q: want one of %s", name, strings.Join(runnerNames(), ", "))
	}
	dest := filepath.Join(runnersDir(), name)
	spec := pkg.Package + "@" + pkg.Version
	if dryRun {
		fmt.Fprintf(stdout, "would install %s into %s (npm install --prefix %s %s) and verify it with --version\n", spec, dest, dest, spec)
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("npm not found on PATH: install Node.js with npm, then run this again (%w)", err)
	}
	if err := os.MkdirAll(runnersDir(), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(runnersDir(), ".install-"+name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ictx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ictx, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--omit=dev", spec)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm install %s failed: %v\n%s", spec, err, tail(string(out), 2000))
	}
	bin := filepath.Join(tmp, "node_modules", filepath.FromSlash(pkg.Bin))
	got, err := verifyVersion(ctx, bin, pkg.Version)
	if err != nil {
		return fmt.Errorf("%s installed, but %w", spec, err)
	}
	// Move it into place: the binary's path is the final one.
	old := dest + ".old"
	os.RemoveAll(old)
	if _, err := os.Stat(dest); err == nil {
		if err := os.Rename(dest, old); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dest); err != nil {
		os.Rename(old, dest)
		return err
	}
	os.RemoveAll(old)
	rec := installedRunner{Runner: name, Package: pkg.Package, Version: pkg.Version,
		Binary: filepath.Join(dest, "node_modules", filepath.FromSlash(pkg.Bin)), InstalledAt: time.Now().UTC(), VersionOutput: got}
	data, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(filepath.Join(dest, "runner.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "installed %s: %s (%s)\n", spec, rec.Binary, got)
	return nil
}

// uninstallRunner removes runner name's install, if pilot made one.
func uninstallRunner(name string, dryRun bool, stdout io.Writer) error {
	if _, ok := runnerPackages()[name]; !ok {
		return fmt.Errorf("unknown runner %q: want one of %s", name, strings.Join(runnerNames(), ", "))
	}
	dest := filepath.Join(runnersDir(), name)
	if _, err := os.Stat(filepath.Join(dest, "runner.json")); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stdout, "runner %s is not installed by pilot (nothing in %s)\n", name, dest)
		return nil
	}
	if dryRun {
		fmt.Fprintf(stdout, "would remove %s\n", dest)
		return nil
	}
	if err := os.RemoveAll(dest); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed runner %s (%s)\n", name, dest)
	return nil
}

// verifyVersion runs bin --version and checks that it names want.
func verifyVersion(ctx context.Context, bin, want string) (string, error) {
	got, err := binaryVersion(ctx, bin)
	if err != nil {
		return got, err
	}
	if !strings.Contains(got, want) {
		return got, fmt.Errorf("%s --version says %q, not %s", bin, got, want)
	}
	return got, nil
}

// binaryVersion is the first line bin --version prints.
func binaryVersion(ctx context.Context, bin string) (string, error) {
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(vctx, bin, "--version")
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if err != nil {
		return line, fmt.Errorf("%s --version failed: %v", bin, err)
	}
	return strings.TrimSpace(line), nil
}

func runnerNames() []string {
	var names []string
	for n := range runnerPackages() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
