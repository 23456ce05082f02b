package supervise

import (
	"bufio"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/pilotworkers/pilot/internal/fakeagent"
)

// A sample adds up the resident memory of every process of the tree and
// names the one that holds the most; the leader's own peak comes with its
// exit.
func TestSampleMeasuresTheWholeTree(t *testing.T) {
	t.Setenv("GORACE", "atexit_sleep_ms=0") // the supervisor and workers are this binary
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const parent, child = 48 << 20, 24 << 20
	cookie := "PILOT_TEST_JOB=" + t.Name()
	j, err := Start(Spec{
		Path: exe,
		Argv: []string{exe, "alloc=48MiB", "spawn", "alloc=24MiB", "ready", "block", "end", "out=ready", "block"},
		Env:  []string{fakeagent.EnvFakeAgent + "=1", "GORACE=atexit_sleep_ms=0", cookie},
		Dir:  "/", Cookie: cookie,
	}, null, w, null)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() && sc.Text() != "ready" {
	}
	if err := j.Sample(); err != nil {
		t.Fatal(err)
	}
	m := <-j.Memory()
	if m.Procs != 2 || m.RSS < parent+child {
		t.Errorf("sample = %+v; want 2 processes holding at least %d bytes", m, parent+child)
	}
	if m.Top != j.Pid || m.TopRSS < parent || m.TopRSS > m.RSS || m.TopComm != exeComm(exe) {
		t.Errorf("sample = %+v; want the worker (pid %d, %q) on top with at least %d bytes", m, j.Pid, exeComm(exe), parent)
	}
	if err := j.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-j.Done()
	if j.MaxRSS() < parent {
		t.Errorf("the leader's MaxRSS = %d, want at least the %d bytes it touched", j.MaxRSS(), parent)
	}
}

// exeComm is the command name the kernel gives a process running exe.
func exeComm(exe string) string {
	base := exe[strings.LastIndexByte(exe, '/')+1:]
	return base[:min(len(base), 15)]
}
