package pilot_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/internal/fakeagent"
)

// envFDChild makes the test binary a dispatcher that runs out of file
// descriptors (fdChild).
const envFDChild = "PILOT_TEST_FD_CHILD"

func init() {
	if os.Getenv(envFDChild) != "" {
		os.Exit(fdChild())
	}
}

// fdChild dispatches once (starting pilot's supervisor), then lowers its
// own open-file limit to the descriptors it holds and dispatches again,
// and prints that dispatch's error.
func fdChild() int {
	exe, _ := os.Executable()
	reg, err := pilot.NewRegistry(pilot.Provider{Name: "fake", Runner: "command", Argv: []string{exe, "out=hi"},
		Env: map[string]string{fakeagent.EnvFakeAgent: "1"}})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	d := &pilot.Dispatcher{Runners: agents.Runners(), Providers: reg, RunDir: os.Getenv("PILOT_TEST_RUN_DIR")}
	task := pilot.Task{Provider: "fake", Mode: pilot.ModeReview, Prompt: "x", Workdir: os.TempDir()}
	if v, err := d.Dispatch(context.Background(), task); err != nil || v.Verdict != pilot.Completed {
		fmt.Println("the first dispatch:", v.Verdict, err)
		return 2
	}
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		fmt.Println(err)
		return 2
	}
	l := syscall.Rlimit{Cur: uint64(len(open)), Max: uint64(len(open))}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		fmt.Println(err)
		return 2
	}
	_, err = d.Dispatch(context.Background(), task)
	fmt.Println("error:", err)
	return 0
}

// A dispatcher out of file descriptors says so, with its limit and what
// to do, not a bare "too many open files".
func TestDispatchOutOfFileDescriptorsNamesTheLimit(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envFDChild+"=1", "PILOT_TEST_RUN_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	got := string(out)
	if err != nil || !strings.HasPrefix(got, "error: ") || !strings.Contains(got, "too many open files") ||
		!strings.Contains(got, "out of file descriptors: its limit is ") || !strings.Contains(got, "ulimit -n") {
		t.Errorf("the child: %v\n%s\nwant the dispatch's error to name the limit", err, got)
	}
}
