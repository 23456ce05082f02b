package rundir_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/pilotworkers/pilot/internal/rundir"
)

func TestSize(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, n int) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("record.json", 1000)
	write("stream.log", 24)
	write("opencode/config/opencode/opencode.json", 3000)
	write("tmp/empty", 0)
	outside := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(outside, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		// A link is not followed: its target is not the run's.
		if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := rundir.Size(dir); n != 4024 || err != nil {
		t.Errorf("Size = %d, %v; want 4024 bytes", n, err)
	}
	if _, err := rundir.Size(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Size of a missing dir: %v, want fs.ErrNotExist", err)
	}
}
