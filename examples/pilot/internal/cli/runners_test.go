package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunnerPackagesMatchTheE2EPins: the runners pilot installs are the
// versions its end-to-end tests run.
func TestRunnerPackagesMatchTheE2EPins(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "e2e", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pj struct {
		Dependencies         map[string]string `json:"dependencies"`
		OptionalDependencies map[string]string `json:"optionalDependencies"`
	}
	if err := json.Unmarshal(data, &pj); err != nil {
		t.Fatal(err)
	}
	pins := map[string]string{}
	for k, v := range pj.Dependencies {
		pins[k] = v
	}
	for k, v := range pj.OptionalDependencies {
		pins[strings.TrimSuffix(strings.TrimSuffix(k, "-linux-x64"), "-linux-arm64")] = v
	}
	for name, p := range runnerPackages() {
		pkg := p.Package
		switch name {
		case "opencode":
			pkg = "opencode"
		case "kilo":
			pkg = "@kilocode/cli"
		}
		if pins[pkg] != p.Version {
			t.Errorf("runner %s: %s@%s, but e2e/package.json pins %q", name, p.Package, p.Version, pins[pkg])
		}
	}
}

// fakeNpm puts an npm on PATH that "installs" a package by writing its
// program, a script that prints version (or, when version is "broken",
// fails), and records its argv.
func fakeNpm(t *testing.T, version string) (argvLog string) {
	t.Helper()
	bin := t.TempDir()
	argvLog = filepath.Join(bin, "argv")
	script := `#!/bin/sh
echo "$@" >> ` + argvLog + `
prefix=""
while [ $# -gt 0 ]; do
	case "$1" in --prefix) prefix="$2"; shift;; esac
	last="$1"; shift
done
[ "$FAKE_NPM_FAIL" = 1 ] && { echo "npm ERR! 404 Not Found" >&2; exit 1; }
for b in pi codex claude gemini; do
	mkdir -p "$prefix/node_modules/.bin"
	printf '#!/bin/sh\necho "` + version + `"\n' > "$prefix/node_modules/.bin/$b"
	chmod +x "$prefix/node_modules/.bin/$b"
done
`
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(t.TempDir(), "data"))
	return argvLog
}

func TestInstallRunnerVerifiesRecordsAndIsUsed(t *testing.T) {
	argv := fakeNpm(t, "0.73.1 (pi)")
	code, out, errOut := runCLI("install", "runner", "pi", "--dry-run")
	if code != 0 || !strings.Contains(out, "would install @mariozechner/pi-coding-agent@0.73.1") {
		t.Fatalf("dry run: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(argv); !os.IsNotExist(err) {
		t.Fatalf("a dry run ran npm: %v", err)
	}
	code, out, errOut = runCLI("install", "runner", "pi")
	if code != 0 || !strings.Contains(out, "installed @mariozechner/pi-coding-agent@0.73.1") {
		t.Fatalf("install: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	called, _ := os.ReadFile(argv)
	if !strings.Contains(string(called), "install --prefix") || !strings.Contains(string(called), "@mariozechner/pi-coding-agent@0.73.1") {
		t.Errorf("npm was called with %q", called)
	}
	inst := installedRunners()["pi"]
	if inst.Version != "0.73.1" || !strings.HasPrefix(inst.Binary, runnersDir()) || inst.VersionOutput != "0.73.1 (pi)" {
		t.Errorf("recorded %+v", inst)
	}
	// The built-in pi provider names no binary: it runs the installed one,
	// and 'pilot providers' says so, with the version.
	code, out, _ = runCLI("providers", "--json")
	var sts []providerStatus
	if err := json.Unmarshal([]byte(out), &sts); code != 0 || err != nil {
		t.Fatalf("providers: exit %d, %v\n%s", code, err, out)
	}
	for _, st := range sts {
		if st.Name == "pi" && (st.Binary != inst.Binary || !st.BinaryFound || st.BinaryFrom != "installed by pilot" || st.BinaryVersion != "0.73.1") {
			t.Errorf("pi provider: %+v", st)
		}
	}
	// A second install replaces the first; uninstall removes it.
	if code, _, errOut := runCLI("install", "runner", "pi"); code != 0 {
		t.Fatalf("second install: exit %d, %s", code, errOut)
	}
	if code, out, _ := runCLI("uninstall", "runner", "pi"); code != 0 || !strings.Contains(out, "removed runner pi") {
		t.Errorf("uninstall: exit %d, %q", code, out)
	}
	if _, ok := installedRunners()["pi"]; ok {
		t.Error("pi is still installed")
	}
	if entries, _ := os.ReadDir(runnersDir()); len(entries) != 0 {
		t.Errorf("left in the runners dir: %v", entries)
	}
}

func TestInstallRunnerRefusesAWrongVersionAndKeepsTheOldOne(t *testing.T) {
	fakeNpm(t, "0.73.1")
	if code, _, errOut := runCLI("install", "runner", "pi"); code != 0 {
		t.Fatalf("install: %d %s", code, errOut)
	}
	before := installedRunners()["pi"]
	data := os.Getenv("XDG_DATA_HOME")
	fakeNpm(t, "9.9.9")
	t.Setenv("XDG_DATA_HOME", data) // the same data dir
	code, _, errOut := runCLI("install", "runner", "pi")
	if code == 0 || !strings.Contains(errOut, `--version says "9.9.9", not 0.73.1`) {
		t.Errorf("a wrong version: exit %d, stderr %q", code, errOut)
	}
	if after := installedRunners()["pi"]; after != before {
		t.Errorf("the earlier install changed: %+v, was %+v", after, before)
	}
	t.Setenv("FAKE_NPM_FAIL", "1")
	if code, _, errOut := runCLI("install", "runner", "codex"); code == 0 || !strings.Contains(errOut, "404 Not Found") {
		t.Errorf("npm failing: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCLI("install", "runner", "nope"); code != 2 || !strings.Contains(errOut, `unknown runner "nope"`) {
		t.Errorf("unknown runner: exit %d, stderr %q", code, errOut)
	}
}
