//go:build darwin

package seatbelt

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

const sandboxExec = "/usr/bin/sandbox-exec"

// sandboxed runs argv beneath sandbox-exec with prof and reports whether
// it succeeded.
func sandboxed(t *testing.T, prof string, argv ...string) bool {
	t.Helper()
	out, err := exec.Command(sandboxExec, append([]string{"-p", prof, "--"}, argv...)...).CombinedOutput()
	// sandbox-exec's own failures (a profile it cannot compile or apply)
	// are sysexits codes, which cat, touch and mv do not use.
	if ee, ok := err.(*exec.ExitError); ok && (ee.ExitCode() == 65 || ee.ExitCode() == 71) {
		t.Fatalf("sandbox-exec refused the profile or the command (%v): %s\n%s", err, out, prof)
	}
	return err == nil
}

// TestProfileOnMacOS applies profiles with sandbox-exec itself: guarded
// names that need quoting are kept from, their neighbours are not.
func TestProfileOnMacOS(t *testing.T) {
	if _, err := os.Stat(sandboxExec); err != nil {
		t.Skip(err)
	}
	if out, err := exec.Command(sandboxExec, "-p", Profile(Policy{WriteAll: true}), "--", "/usr/bin/true").CombinedOutput(); err != nil {
		t.Skipf("sandbox-exec cannot apply a profile here (already in a sandbox?): %v: %s", err, out)
	}
	dir, err := filepath.EvalSymlinks(t.TempDir()) // /var is /private/var
	if err != nil {
		t.Fatal(err)
	}
	mk := func(rel ...string) string {
		p := filepath.Join(append([]string{dir}, rel...)...)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var guards []string
	for _, name := range []string{`quo"te`, `back\slash`, "na\u00efve \u2603", "new\nline", `x")) (allow default) ("`} {
		guards = append(guards, filepath.Join(dir, "guarded", name))
		mk("guarded", name, "secret")
	}
	open := mk("open", "file")
	lifted := mk("guarded", `quo"te`, "lifted", "file")
	nested := mk("guarded", `quo"te`, "lifted", "again", "file")
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}

	p := Policy{
		Guard: append(guards, filepath.Dir(nested)),
		Allow: []string{filepath.Dir(lifted)},
		Write: []string{work, "/dev/null"},
	}
	prof := Profile(p)
	for _, g := range guards {
		if sandboxed(t, prof, "/bin/cat", filepath.Join(g, "secret")) {
			t.Errorf("read beneath guard %q", g)
		}
	}
	if sandboxed(t, prof, "/bin/cat", nested) {
		t.Errorf("read %q, guarded within an allowed path", nested)
	}
	for _, f := range []string{open, lifted} {
		if !sandboxed(t, prof, "/bin/cat", f) {
			t.Errorf("could not read %q", f)
		}
	}
	if !sandboxed(t, prof, "/usr/bin/touch", filepath.Join(work, "new")) {
		t.Error("could not write in the workdir")
	}
	if sandboxed(t, prof, "/usr/bin/touch", filepath.Join(dir, "open", "new")) {
		t.Error("wrote outside the write paths")
	}

	secrets := Profile(Policy{Guard: p.Guard, Allow: p.Allow, WriteAll: true})
	if !sandboxed(t, secrets, "/usr/bin/touch", filepath.Join(dir, "open", "new")) {
		t.Error("could not write outside the guards with WriteAll")
	}
	if sandboxed(t, secrets, "/bin/mv", filepath.Join(dir, "guarded"), filepath.Join(dir, "moved")) {
		t.Error("renamed the directory above the guards")
	}
}
