//go:build linux

package pilot_test

// Tests of what only the Linux supervisor (a child subreaper) promises:
// descendants that leave the worker's process group or session are still
// found and killed. They read /proc and wait on pidfds.

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/procfs"
)

func TestSetsidGrandchildLeftBehindIsKilled(t *testing.T) {
	checkGoroutines(t)
	// A daemon: the worker's child starts a grandchild in its own session
	// and exits; then the worker exits too.
	d := testDispatcher(t, fakeProvider(t, "fake",
		"spawn", "spawn:setsid", "ready", "block", "end", "ready", "end", "out=done"))
	var spawned spawnedPIDs
	var mu sync.Mutex
	var lines []string
	d.OnLine = func(id string, l pilot.Line) {
		spawned.hook(id, l)
		mu.Lock()
		lines = append(lines, string(l.Data))
		mu.Unlock()
	}
	v := dispatch(t, d, task("fake"))
	if v.Verdict != pilot.Completed {
		t.Errorf("verdict = %s (%s), want completed", v.Verdict, v.FailureClass)
	}
	// The middle child's output went to /dev/null; find the daemon by its
	// run id instead: its pid was printed by the middle child, so look in
	// the worker's output for the middle child only and check the whole
	// system for anything still carrying this run's id.
	if left := processesWithEnv(t, pilot.EnvRunID+"="+v.RunID); len(left) > 0 {
		t.Errorf("processes of run %s still alive after Dispatch: %v (lines %q)", v.RunID, left, lines)
	}
	if v.Leftovers < 1 {
		t.Errorf("leftovers = %d, want at least 1 (the setsid'd grandchild)", v.Leftovers)
	}
}

func TestDispatcherSIGKILLedLeavesNoWorkerOrDescendant(t *testing.T) {
	checkGoroutines(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "spawn:setsid", "ignore-term", "ready", "block", "end", "out=ready", "block")
	cmd.Env = append(os.Environ(), envDispatcherChild+"=1", "PILOT_TEST_RUN_DIR="+t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if s, ok := strings.CutPrefix(line, "worker "); ok {
			n, _ := strconv.Atoi(s)
			pids = append(pids, n)
		}
		if s, ok := strings.CutPrefix(line, "line spawned "); ok {
			n, _ := strconv.Atoi(s)
			pids = append(pids, n)
		}
		if line == "line ready" {
			break
		}
	}
	if len(pids) != 2 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("dispatcher child reported pids %v, want worker and grandchild", pids)
	}
	// Find the supervisor too: it must not outlive its parent either.
	pids = append(pids, childrenOf(cmd.Process.Pid)...)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if left := waitGone(t, pids, 30*time.Second); len(left) > 0 {
		for _, p := range left {
			syscall.Kill(p, syscall.SIGKILL)
		}
		t.Fatalf("processes %v (of worker, grandchild, supervisor %v) outlived the SIGKILLed dispatcher", left, pids)
	}
}

func childrenOf(pid int) []int { return procfs.Children(pid) }

// waitGone waits, without polling, until every pid has exited or the
// deadline passes; it returns the pids still alive.
func waitGone(t *testing.T, pids []int, timeout time.Duration) []int {
	t.Helper()
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(ep)
	live := map[int32]int{}
	for _, pid := range pids {
		fd, _, errno := syscall.Syscall(434 /* pidfd_open */, uintptr(pid), 0, 0)
		if errno != 0 {
			continue // already gone
		}
		defer syscall.Close(int(fd))
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, int(fd), &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}); err != nil {
			t.Fatal(err)
		}
		live[int32(fd)] = pid
	}
	deadline := time.Now().Add(timeout)
	events := make([]syscall.EpollEvent, 8)
	for len(live) > 0 {
		ms := int(time.Until(deadline).Milliseconds())
		if ms <= 0 {
			break
		}
		n, err := syscall.EpollWait(ep, events, ms)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events[:n] {
			delete(live, ev.Fd)
			syscall.EpollCtl(ep, syscall.EPOLL_CTL_DEL, int(ev.Fd), nil)
		}
	}
	var left []int
	for _, pid := range live {
		if !gone(pid) {
			left = append(left, pid)
		}
	}
	return left
}
