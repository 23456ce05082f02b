//go:build unix

package cli

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Two pilots on one graph and one state dir: while the first runs the
// shared job, the second does not start it, and exits 3 (the group is not
// over); the shared job ran once. Real processes, a real FIFO for the
// worker to say it runs.
func TestScheduleTwoPilotsShareAJobOnce(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "running.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	release := filepath.Join(dir, "release")
	f := newFixture(t, map[string][]string{
		"held": {"session=" + fifo, `sess={"running":true}`, "await=" + release, "out=done"},
	})
	graph := f.writeGraph(t, gjob("shared", "held", f))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	first := exec.Command(exe, f.scheduleArgs(graph)...)
	first.Env = append(os.Environ(), envRunMain+"=1")
	var firstOut, firstErr bytes.Buffer
	first.Stdout, first.Stderr = &firstOut, &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if first.ProcessState == nil {
			first.Process.Kill()
			first.Wait()
		}
	}()
	// The worker writes to the FIFO once it runs: reading it waits for that.
	r, err := os.Open(fifo)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	if !strings.Contains(line, "running") {
		t.Fatalf("the worker said %q", line)
	}

	second := exec.Command(exe, f.scheduleArgs(graph)...)
	second.Env = append(os.Environ(), envRunMain+"=1")
	out, err := second.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("second pilot: %v, want exit 3\n%s", err, out)
	}
	if !strings.Contains(string(out), `"status":"external-active"`) {
		t.Errorf("second pilot's verdicts: %s", out)
	}

	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("first pilot: %v\n%s\n%s", err, firstOut.String(), firstErr.String())
	}
	if !strings.Contains(firstOut.String(), `"status":"complete"`) {
		t.Errorf("first pilot's verdicts: %s", firstOut.String())
	}
	if runs, _ := os.ReadDir(f.runDir); len(runs) != 1 {
		t.Errorf("%d run dirs, want 1: the shared job ran once", len(runs))
	}
}
