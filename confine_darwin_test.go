//go:build darwin

package pilot

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pilotworkers/pilot/sandbox"
)

// TestConfineSeatbeltOnMacOS runs shell commands as a worker would run,
// beneath the wrapper confine gives a workspace worker: a secret store is
// out of reach, the workdir and the private temp dir are writable, the
// home directory is not.
func TestConfineSeatbeltOnMacOS(t *testing.T) {
	if _, err := os.Stat(sandboxExec); err != nil {
		t.Skip(err)
	}
	if out, err := exec.Command(sandboxExec, "-p", "(version 1)(allow default)(deny file-write* (literal \"/x\"))", "--", "/usr/bin/true").CombinedOutput(); err != nil {
		t.Skipf("sandbox-exec cannot apply a profile here (already in a sandbox?): %v: %s", err, out)
	}
	r, home := seatbeltRun(t, sandbox.Needs{}, Provider{})
	if err := os.MkdirAll(filepath.Join(home, ".aws"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".aws", "credentials"), []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(r.tmpDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	rep, err := r.confineSeatbelt(sandbox.Workspace, true, sandboxExec)
	if err != nil || !rep.Enforced {
		t.Fatalf("confine: %+v, %v", rep, err)
	}
	sh := func(script string) bool {
		path, argv := wrapped(r.wrapper, "/bin/sh", []string{"sh", "-c", script})
		cmd := exec.Command(path, argv[1:]...)
		cmd.Dir = r.task.Workdir
		cmd.Env = []string{"HOME=" + home, "TMPDIR=" + r.tmpDir(), "PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		t.Logf("%s: %v %s", script, err, out)
		return err == nil
	}
	if sh("cat ~/.aws/credentials") {
		t.Error("read ~/.aws/credentials")
	}
	if sh("echo x > ~/file") {
		t.Error("wrote in the home directory")
	}
	for _, s := range []string{"echo x > file", `mktemp "$TMPDIR/x.XXXX"`, "echo x > /dev/null", "ls ~"} {
		if !sh(s) {
			t.Errorf("%s failed", s)
		}
	}
}
