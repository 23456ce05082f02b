package supervise

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/internal/landlock"
	"github.com/pilotworkers/pilot/internal/strayfds"
)

// A worker starts with exactly fds 0, 1 and 2, whether it is started alone
// or in a batch (forked at once: on the forker threads, or each confined
// one from a thread of its own), confined or not, though this process
// holds stray inheritable descriptors that the supervisor inherits in
// turn: the supervisor's control socket and whatever it inherited are
// close-on-exec.
func TestWorkersStartWithOnlyStdio(t *testing.T) {
	if !strayfds.InChild(t) {
		return
	}
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
	c, err := acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer release(c)

	// The supervisor did inherit the strays it can (its fd 3 is the
	// control socket): they stop there.
	sup := c.cmd.Process.Pid
	for _, fd := range strayfds.FDs {
		if fd == 3 {
			continue
		}
		if _, err := os.Readlink("/proc/" + strconv.Itoa(sup) + "/fd/" + strconv.Itoa(fd)); err != nil {
			t.Fatalf("the supervisor did not inherit the stray fd %d: %v", fd, err)
		}
	}

	rules := lightRuleset()
	type worker struct {
		j   *Job
		out *os.File
	}
	next := 0
	request := func(confined bool) worker {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		next++
		cookie := "PILOT_TEST_JOB=" + strconv.Itoa(next)
		spec := Spec{
			Path:   exe,
			Argv:   []string{exe, "fds"},
			Env:    []string{fakeagent.EnvFakeAgent + "=1", "GORACE=atexit_sleep_ms=0", cookie},
			Dir:    "/",
			Cookie: cookie,
		}
		if confined {
			spec.Sandbox = rules
		}
		j, err := c.request(spec, null, w, w)
		if err != nil {
			r.Close()
			t.Fatal(err)
		}
		return worker{j, r}
	}
	check := func(name string, w worker) {
		t.Helper()
		defer w.out.Close()
		if _, err := w.j.awaitStart(exe); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out, err := io.ReadAll(w.out)
		if err != nil {
			t.Fatal(err)
		}
		<-w.j.Done()
		if err := w.j.Err(); err != nil || w.j.Status().ExitStatus() != 0 {
			t.Errorf("%s: status %v, err %v; output %q", name, w.j.Status(), err, out)
		}
		if got := strings.TrimSuffix(string(out), "\n"); got != "fds 0 1 2" {
			t.Errorf("%s (pid %d) listed %q, want \"fds 0 1 2\"", name, w.j.Pid, got)
		}
	}

	const on, off = true, false
	for _, tc := range []struct {
		name     string
		confined []bool
	}{
		{"a worker started alone", []bool{off}},
		{"a batch", []bool{off, off, off, off, off, off}},
		{"a confined worker started alone", []bool{on}},
		{"a confined batch", []bool{on, on, on, on, on, on}},
		{"a mixed batch", []bool{on, off, on, off, off, on}},
	} {
		if rules == nil && slices.Contains(tc.confined, true) {
			t.Logf("%s: not run, this kernel has no Landlock", tc.name)
			continue
		}
		if len(tc.confined) == 1 {
			check(tc.name, request(tc.confined[0]))
			continue
		}
		// The supervisor is stopped while the requests are queued, so
		// that it reads them in one go and forks them at once
		// (startAll).
		if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		waitStopped(t, sup)
		var batch []worker
		for _, confined := range tc.confined {
			batch = append(batch, request(confined))
		}
		if err := syscall.Kill(sup, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		for i, w := range batch {
			check(fmt.Sprintf("worker %d of %s of %d", i, tc.name, len(batch)), w)
		}
	}
}

// lightRuleset confines a worker as lightly as this kernel allows: the
// signal and abstract-socket scopes (ABI 6), else every filesystem right
// granted beneath /; nil without Landlock.
func lightRuleset() *landlock.Ruleset {
	abi, err := landlock.ABI()
	switch {
	case err != nil || abi < 1:
		return nil
	case abi >= 6:
		return &landlock.Ruleset{Scope: landlock.ScopeSignal | landlock.ScopeAbstractUnixSocket}
	}
	all := landlock.FSRights(abi)
	return &landlock.Ruleset{FS: all, Paths: []landlock.PathRule{{Path: []byte("/"), Access: all}}}
}

// waitStopped waits until the child pid has stopped.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	const pPid = 1
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPid, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), syscall.WSTOPPED, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			t.Fatalf("waiting for the supervisor to stop: %v", errno)
		}
		return
	}
}

// The fallback of a kernel without close_range (before 5.11), and the
// path of other systems, mark every listed descriptor from 3 up
// close-on-exec, whatever the directory's own descriptor was.
func TestCloseOnExecListed(t *testing.T) {
	if !strayfds.InChild(t) {
		return
	}
	for _, dir := range []string{"/proc/self/fd", "/dev/fd"} {
		if err := closeOnExecListed(dir); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if have, err := fakeagent.InheritedFDs(); err != nil || !slices.Equal(have, []int{0, 1, 2}) {
			t.Errorf("after closeOnExecListed(%q): inheritable fds %v (%v), want [0 1 2]", dir, have, err)
		}
		// Inheritable again, for the next directory.
		for _, fd := range strayfds.FDs {
			if _, _, errno := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFD, 0); errno != 0 {
				t.Fatal(errno)
			}
		}
	}
}
