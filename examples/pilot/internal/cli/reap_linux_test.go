package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// envSubreaper makes the test binary a child subreaper that runs the pilot
// command with its arguments (this binary again, as main) and then says
// which processes the command left for it to reap: what PID 1 gets in a
// container, and never reaps without an init.
const envSubreaper = "PILOT_TEST_SUBREAPER"

func init() {
	if os.Getenv(envSubreaper) != "" {
		os.Exit(subreaper())
	}
}

const prSetChildSubreaper = 36

func subreaper() int {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Println("subreaper:", errno)
		return 2
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), envRunMain+"=1", envSubreaper+"=")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	err := cmd.Run()
	fmt.Printf("pilot: %v\n", err)
	var left []string
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.ECHILD):
			fmt.Printf("left: %d %s\n", len(left), strings.Join(left, " "))
			return 0
		case err != nil:
			fmt.Println("wait4:", err)
			return 2
		case pid == 0:
			// Alive, still to be reaped by us: say what it is, end it.
			out, _ := os.ReadFile("/proc/self/task/" + fmt.Sprint(syscall.Gettid()) + "/children")
			for _, p := range strings.Fields(string(out)) {
				comm, _ := os.ReadFile("/proc/" + p + "/comm")
				left = append(left, p+":"+strings.TrimSpace(string(comm)))
				var n int
				fmt.Sscan(p, &n)
				syscall.Kill(n, syscall.SIGKILL)
			}
			var ws syscall.WaitStatus
			syscall.Wait4(-1, &ws, 0, nil)
		default:
			left = append(left, fmt.Sprintf("%d:exited", pid))
		}
	}
}

// A pilot command ends its supervisor itself: where PID 1 does not reap
// (a container without an init), a supervisor left to it would stay
// <defunct> after every command.
func TestTheCommandLeavesNoProcessToReap(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=hello"}})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, f.args("dispatch", "ok")...)
	cmd.Env = append(os.Environ(), envSubreaper+"=1")
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the subreaper: %v\n%s\n%s", err, out, errb.String())
	}
	if got := string(out); got != "pilot: <nil>\nleft: 0 \n" {
		t.Errorf("the subreaper says:\n%s\nwant the command to exit 0 and leave no process (its stderr:\n%s)", got, errb.String())
	}
}
