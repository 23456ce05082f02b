package supervise

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
	"unsafe"

	"github.com/pilotworkers/pilot/internal/fakeagent"
)

// A supervisor that has no descriptors left to take a start request's
// stdio into answers that start with EMFILE and serves on: the other
// jobs are not dropped with the socket, and a start after it has
// descriptors again runs.
func TestSupervisorOutOfDescriptorsRefusesTheStartOnly(t *testing.T) {
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := func(n int, argv ...string) (*Job, *os.File, error) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		cookie := "PILOT_TEST_JOB=emfile" + strconv.Itoa(n)
		j, err := Start(Spec{
			Path: exe, Argv: append([]string{exe}, argv...), Dir: "/", Cookie: cookie,
			Env: []string{fakeagent.EnvFakeAgent + "=1", "GORACE=atexit_sleep_ms=0", cookie},
		}, w, w, w)
		if err != nil {
			r.Close()
			return nil, nil, err
		}
		return j, r, nil
	}
	// A job that runs until its stdin ends holds the supervisor's pidfd
	// for it while the limit is lowered.
	running, out, err := start(1, "out=up", "block")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()

	// Start keeps the supervisor for as long as a job holds it: the
	// running one does.
	sup := running.c.cmd.Process.Pid
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(sup) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := prlimit(sup, nil, &old); err != nil {
		t.Skipf("prlimit of the supervisor: %v", err)
	}
	// As many as it holds: the three descriptors of a start do not fit.
	lowered := syscall.Rlimit{Cur: uint64(len(fds)), Max: old.Max}
	if err := prlimit(sup, &lowered, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err = start(2, "out=never")
	var se *StartError
	if !errors.As(err, &se) || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("a start with the supervisor out of descriptors: %v, want a StartError for EMFILE", err)
	}
	if err := prlimit(sup, &old, nil); err != nil {
		t.Fatal(err)
	}
	j, out3, err := start(3, "out=ok")
	if err != nil {
		t.Fatalf("a start once the supervisor has descriptors again: %v", err)
	}
	defer out3.Close()
	<-j.Done()
	j.Close()
	if err := j.Err(); err != nil || !j.Status().Exited() || j.Status().ExitStatus() != 0 {
		t.Errorf("the later job: %v, status %v; want exit 0", err, j.Status())
	}
	select {
	case <-running.Exited():
		t.Fatalf("the running job ended (%v) when the supervisor ran out of descriptors", running.Err())
	default:
	}
	running.Signal(syscall.SIGKILL)
	<-running.Done()
	running.Close()
}

// prlimit sets process pid's RLIMIT_NOFILE to set, and reads what it was
// into old; either may be nil.
func prlimit(pid int, set, old *syscall.Rlimit) error {
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_NOFILE,
		uintptr(unsafe.Pointer(set)), uintptr(unsafe.Pointer(old)), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
