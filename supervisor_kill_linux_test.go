package pilot_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/procfs"
)

// ppid is pid's parent, from /proc/PID/stat.
func ppid(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	n, _ := strconv.Atoi(fields[1])
	return n
}

// A SIGKILLed supervisor takes nothing pilot started with it: its worker
// dies with it (the parent-death signal), and pilot ends the descendant
// that left the worker's process group (setsid), which would otherwise
// outlive both.
func TestASIGKILLedSupervisorLeavesNoProcessOfTheWorker(t *testing.T) {
	d := testDispatcher(t, fakeProvider(t, "daemon", "spawn:setsid", "ready", "block", "end", "block"))
	var mu sync.Mutex
	var daemon, worker, supervisor int
	d.OnLine = func(_ string, l pilot.Line) {
		rest, ok := strings.CutPrefix(string(l.Data), "spawned ")
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		daemon, _ = strconv.Atoi(rest)
		worker = ppid(t, daemon)
		supervisor = ppid(t, worker)
		if supervisor == os.Getpid() || supervisor <= 1 {
			t.Errorf("the worker's parent is %d, not a supervisor", supervisor)
			return
		}
		syscall.Kill(supervisor, syscall.SIGKILL)
	}
	_, err := d.Dispatch(context.Background(), task("daemon"))
	if err == nil || !strings.Contains(err.Error(), "supervisor process exited") {
		t.Fatalf("Dispatch error %v, want the lost supervisor", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if daemon == 0 {
		t.Fatal("the worker never spawned its daemon")
	}
	for name, pid := range map[string]int{"the setsid'd daemon": daemon, "the worker": worker, "the supervisor": supervisor} {
		if procfs.Alive(pid) {
			t.Errorf("%s (pid %d) outlived the supervisor", name, pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// The supervisor shows as pilot-supervise in ps and pstree, not "exe".
func TestTheSupervisorIsNamed(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "go")
	d := testDispatcher(t, fakeProvider(t, "named", "await="+gate, "out=hello"))
	var comm string
	d.Observer = func(e pilot.Event) {
		if e.Started == nil {
			return
		}
		// The worker waits for the gate: its parent is the supervisor.
		data, err := os.ReadFile("/proc/" + strconv.Itoa(ppid(t, e.Started.Pid)) + "/comm")
		if err != nil {
			t.Error(err)
		}
		comm = strings.TrimSpace(string(data))
		os.WriteFile(gate, nil, 0o600)
	}
	dispatch(t, d, task("named"))
	if comm != "pilot-supervise" {
		t.Errorf("the supervisor's comm is %q, want pilot-supervise", comm)
	}
}
