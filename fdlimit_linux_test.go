package pilot_test

import (
	"context"
	"errors"
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
// descriptors (fdChild); envFanoutFDChild one whose fanout would
// (fanoutFDChild).
const (
	envFDChild       = "PILOT_TEST_FD_CHILD"
	envFanoutFDChild = "PILOT_TEST_FANOUT_FD_CHILD"
)

func init() {
	if os.Getenv(envFDChild) != "" {
		os.Exit(fdChild())
	}
	if os.Getenv(envFanoutFDChild) != "" {
		os.Exit(fanoutFDChild())
	}
}

// fanoutFDChild lowers its open-file limit to 24 more than it holds, then
// runs a fanout of 50 jobs all at once, which does not fit, and one of
// them one at a time, which does, and prints what each came to and what
// the run directory holds after the first.
func fanoutFDChild() int {
	exe, _ := os.Executable()
	reg, err := pilot.NewRegistry(pilot.Provider{Name: "fake", Runner: "command", Argv: []string{exe, "out=hi"},
		Env: map[string]string{fakeagent.EnvFakeAgent: "1"}})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	runDir := os.Getenv("PILOT_TEST_RUN_DIR")
	d := &pilot.Dispatcher{Runners: agents.Runners(), Providers: reg, RunDir: runDir}
	jobs := make([]pilot.Job, 50)
	for i := range jobs {
		jobs[i] = pilot.Job{Task: pilot.Task{Provider: "fake", Mode: pilot.ModeReview, Prompt: "x", Workdir: os.TempDir()}}
	}
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		fmt.Println(err)
		return 2
	}
	l := syscall.Rlimit{Cur: uint64(len(open) + 24), Max: uint64(len(open) + 24)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		fmt.Println(err)
		return 2
	}
	_, err = (&pilot.Fanout{Dispatcher: d, MaxParallel: 50}).Run(context.Background(), jobs)
	fmt.Printf("at 50: names the limit %v, EMFILE %v: %v\n", err != nil && strings.Contains(err.Error(), "RLIMIT_NOFILE"), errors.Is(err, syscall.EMFILE), err)
	runs, _ := os.ReadDir(runDir)
	fmt.Printf("runs after it: %d\n", len(runs))
	res, err := (&pilot.Fanout{Dispatcher: d, MaxParallel: 1}).Run(context.Background(), jobs[:2])
	completed := 0
	for _, r := range res {
		if r.Verdict.Verdict == pilot.Completed {
			completed++
		}
	}
	fmt.Printf("at 1: %d of 2 completed, error %v\n", completed, err)
	pilot.Shutdown(context.Background())
	return 0
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
	got, err := runLimitChild(t, envFDChild)
	if err != nil || !strings.HasPrefix(got, "error: ") || !strings.Contains(got, "too many open files") ||
		!strings.Contains(got, "out of file descriptors: its limit is ") || !strings.Contains(got, "RLIMIT_NOFILE, ulimit -n") {
		t.Errorf("the child: %v\n%s\nwant the dispatch's error to name the limit", err, got)
	}
}

// A fanout whose jobs at once would not fit in the open-file limit fails
// before starting any, with an error naming the limit; one that fits
// under the same limit runs.
func TestFanoutOverTheFileLimitStartsNothing(t *testing.T) {
	got, err := runLimitChild(t, envFanoutFDChild)
	for _, want := range []string{
		"at 50: names the limit true, EMFILE true: pilot: 50 jobs at once need about 400 file descriptors",
		"RLIMIT_NOFILE of ", "(ulimit -n)", "run at most ",
		"runs after it: 0\n",
		"at 1: 2 of 2 completed, error <nil>\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the child's output lacks %q", want)
		}
	}
	if err != nil || t.Failed() {
		t.Logf("the child: %v\n%s", err, got)
	}
}

// runLimitChild runs this test binary as the child that env names (one
// that lowers its own open-file limit), with a run directory of its own,
// and returns what it printed.
func runLimitChild(t *testing.T, env string) (string, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env+"=1", "PILOT_TEST_RUN_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}
