package rundir_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/pilotworkers/pilot/internal/rundir"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/internal/procfs"
	"github.com/pilotworkers/pilot/internal/supervise"
	"github.com/pilotworkers/pilot/pilottest"
)

// A real pilot, SIGKILLed while its worker runs, with its supervisor (so
// that nothing of pilot's is left to end the worker's tree): Reconcile
// marks the run abandoned, kills what is left of its tree, and removes the
// temporary file the pilot had prepared.
func TestReconcileAfterPilotSIGKILL(t *testing.T) {
	runDir, cmd, exited := startHelperPilot(t, os.Args[0])

	ents, _ := os.ReadDir(runDir)
	if len(ents) != 1 {
		t.Fatalf("run dir holds %v", ents)
	}
	runID := ents[0].Name()
	path := filepath.Join(runDir, runID, "record.json")
	rec, err := pilot.ReadRecord(path)
	if err != nil || rec.Status != rundir.Running || rec.Provenance.Pid != cmd.Process.Pid {
		t.Fatalf("record before the kill: %+v, %v", rec, err)
	}
	var spawned []int
	for _, p := range pilottest.Alive(runID) {
		if p != rec.Pid {
			spawned = append(spawned, p)
		}
	}
	if len(spawned) != 2 {
		t.Fatalf("processes of the run besides the worker %d: %v, want its two descendants", rec.Pid, spawned)
	}
	temps, _ := filepath.Glob(filepath.Join(runDir, runID, ".record.json.tmp-*"))
	if len(temps) == 0 {
		t.Fatal("the pilot prepared no temporary file for its final record")
	}

	sup := supervisorOf(t, cmd.Process.Pid)
	// Stopped, the supervisor cannot end the tree when the pilot dies.
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill()
	<-exited
	syscall.Kill(sup, syscall.SIGKILL)

	rep, err := rundir.Reconcile(runDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 1 {
		t.Fatalf("report %+v; want the run", rep)
	}
	run := rep.Runs[0]
	for _, p := range spawned {
		if !slices.Contains(run.Killed, p) {
			t.Errorf("descendant %d is not among the killed %v", p, run.Killed)
		}
	}
	if len(run.Survivors) > 0 || run.Note != "" {
		t.Errorf("survivors %v, note %q", run.Survivors, run.Note)
	}
	if diff := slices.Compare(temps, run.Removed); diff != 0 {
		t.Errorf("removed %v, want %v", run.Removed, temps)
	}
	if left := pilottest.Alive(runID); len(left) > 0 {
		t.Errorf("processes of the run left: %v", left)
	}
	after, err := pilot.ReadRecord(path)
	want := fmt.Sprintf("pilot pid %d is gone", cmd.Process.Pid)
	if err != nil || after.Status != rundir.Abandoned || after.EndedAt == nil || !strings.Contains(after.EvidenceExcerpt, want) ||
		!strings.Contains(after.EvidenceExcerpt, "killed") {
		t.Errorf("record after: %q, ended %v, evidence %q, %v; want abandoned, %q", after.Status, after.EndedAt, after.EvidenceExcerpt, err, want)
	}
}

// startHelperPilot starts the helper pilot (helperPilot) by argv, which
// ends with this test binary, and waits until its worker is ready; it
// returns the run directory, the command and a channel its Wait's error
// comes on.
func startHelperPilot(t *testing.T, argv ...string) (string, *exec.Cmd, <-chan error) {
	t.Helper()
	dir := t.TempDir()
	runDir := filepath.Join(dir, "runs")
	fifo := filepath.Join(dir, "ready.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), envHelperPilot+"="+runDir, envHelperFIFO+"="+fifo)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ready := make(chan string, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			ready <- err.Error()
			return
		}
		line, _ := bufio.NewReader(f).ReadString('\n')
		f.Close()
		ready <- line
	}()
	select {
	case line := <-ready:
		if line != "ready\n" {
			t.Fatalf("the worker said %q", line)
		}
	case err := <-exited:
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil { // unblock the reader
			w.Close()
		}
		<-ready
		t.Fatalf("the helper pilot exited before its worker was ready: %v\n%s", err, stderr.String())
	}
	return runDir, cmd, exited
}

// A live pilot in another pid namespace (a container without a shared
// /proc) writes its runs into a run directory this system shares: its
// dispatcher pid names no process here, or another one. Reconcile here
// leaves its run, and its worker, alone: the record's pid namespace is
// not this one's, so its pilot is not known dead.
func TestReconcileLeavesALivePilotOfAnotherPidNamespaceAlone(t *testing.T) {
	if out, err := exec.Command("unshare", "-rpf", "--mount-proc", "true").CombinedOutput(); err != nil {
		t.Skipf("no pid namespace can be made here (unshare -rpf --mount-proc: %v %s)", err, out)
	}
	runDir, cmd, exited := startHelperPilot(t, "unshare", "-rpf", "--mount-proc", os.Args[0])
	// The helper pilot is pid 1 of its namespace: unshare's child here.
	kids := procfs.Children(cmd.Process.Pid)
	t.Cleanup(func() {
		for _, k := range kids {
			syscall.Kill(k, syscall.SIGKILL) // the namespace's init: its whole namespace dies
		}
		<-exited
	})
	ents, _ := os.ReadDir(runDir)
	if len(ents) != 1 {
		t.Fatalf("run dir holds %v", ents)
	}
	runID := ents[0].Name()
	rec, err := pilot.ReadRecord(filepath.Join(runDir, runID, "record.json"))
	if err != nil || rec.Status != rundir.Running {
		t.Fatalf("record: %+v, %v", rec, err)
	}
	here := procfs.Self()
	if rec.Provenance.PidNamespace == "" || rec.Provenance.PidNamespace == here.PidNamespace {
		t.Fatalf("the record's pid namespace %q, this one's %q: want another", rec.Provenance.PidNamespace, here.PidNamespace)
	}
	workers := pilottest.Alive(runID)
	if len(workers) == 0 {
		t.Fatal("no process of the run is alive")
	}
	rep, err := rundir.Reconcile(runDir)
	if err != nil || len(rep.Runs) != 0 {
		t.Fatalf("reconcile of a live pilot's run in another pid namespace: %+v, %v; want it left alone", rep, err)
	}
	alive, ev := rundir.Owner(ownerOf(rec))
	if !alive || !strings.Contains(ev, "not known dead") {
		t.Errorf("Owner: %v %q; want alive, not known dead", alive, ev)
	}
	if left := pilottest.Alive(runID); len(left) != len(workers) {
		t.Errorf("the run's processes: %v before reconcile, %v after", workers, left)
	}
}

// supervisorOf returns pilot's supervisor process among pid's children.
func supervisorOf(t *testing.T, pid int) int {
	t.Helper()
	for _, c := range procfs.Children(pid) {
		env, err := procfs.Environ(c)
		if err == nil && bytes.Contains(env, []byte(supervise.EnvSupervisor+"=")) {
			return c
		}
	}
	t.Fatalf("no supervisor among the children of %d", pid)
	return 0
}

// A pilot pid that a process started after the run now holds is not the
// pilot: the run is abandoned. One that started before the run is.
func TestReconcileTellsAReusedPilotPid(t *testing.T) {
	other := exec.Command(os.Args[0], "block")
	other.Env = append(os.Environ(), fakeagent.EnvFakeAgent+"=1", "GORACE=atexit_sleep_ms=0")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()

	runDir := t.TempDir()
	path := completedRun(t, runDir)
	// A record from before pilot kept its start in ticks: judged by the
	// wall clock.
	orphaned(t, path, map[string]any{"dispatcher_pid": other.Process.Pid, "started_at": time.Now().Add(time.Minute),
		"dispatcher_start_ticks": nil})
	if rep, err := rundir.Reconcile(runDir); err != nil || len(rep.Runs) != 0 {
		t.Fatalf("a live pilot pid that started before the run: %+v, %v; want it left alone", rep, err)
	}
	setFields(t, path, map[string]any{"started_at": time.Now().Add(-time.Hour)})
	rep, err := rundir.Reconcile(runDir)
	if err != nil || len(rep.Runs) != 1 {
		t.Fatalf("a pilot pid that started an hour after the run: %+v, %v; want the run marked", rep, err)
	}
	want := fmt.Sprintf("pilot pid %d is alive but started at", other.Process.Pid)
	if ev := rep.Runs[0].Evidence; !strings.Contains(ev, want) || !strings.Contains(ev, "reused") || !strings.Contains(ev, "started_at") {
		t.Errorf("evidence %q; want %q, the pid reused, and the proof", ev, want)
	}
	if !procfs.Alive(other.Process.Pid) {
		t.Error("the process that reused the pid was killed")
	}
}

// A pilot's record keeps its start in clock ticks after boot: a live
// pilot is told from a reused pid exactly, whatever the wall clock did
// since. A forward step of an hour (NTP's first sync, a VM resumed) made
// the wall-clock judgement take a live pilot for a reused pid and kill its
// run's worker.
func TestReconcileIsBlindToAClockStep(t *testing.T) {
	pilot := exec.Command(os.Args[0], "block")
	pilot.Env = append(os.Environ(), fakeagent.EnvFakeAgent+"=1", "GORACE=atexit_sleep_ms=0")
	if err := pilot.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { pilot.Process.Kill(); pilot.Wait() }()
	ticks, ok := procfs.StartTime(pilot.Process.Pid)
	if !ok {
		t.Fatal("no start time of a live process")
	}
	runDir := t.TempDir()
	path := completedRun(t, runDir)
	// The run started an hour before its pilot did, by the wall clock now.
	orphaned(t, path, map[string]any{"dispatcher_pid": pilot.Process.Pid, "dispatcher_start_ticks": ticks,
		"started_at": time.Now().Add(-time.Hour)})
	if rep, err := rundir.Reconcile(runDir); err != nil || len(rep.Runs) != 0 {
		t.Fatalf("a live pilot after a clock step: %+v, %v; want its run left alone", rep, err)
	}
	// The same pid with another start is another process: the pid was
	// reused, and the run's pilot is gone.
	setFields(t, path, map[string]any{"dispatcher_start_ticks": ticks - 1})
	rep, err := rundir.Reconcile(runDir)
	if err != nil || len(rep.Runs) != 1 || !strings.Contains(rep.Runs[0].Evidence, "another process") {
		t.Fatalf("a reused pid: %+v, %v; want the run marked, naming the other process", rep, err)
	}
	if !procfs.Alive(pilot.Process.Pid) {
		t.Error("the process that reused the pid was killed")
	}
}

// A pilot in another pid namespace, or on another host sharing the run
// directory, runs processes this system's pids do not name: its run is
// not known dead and is left alone, its pid gone here or not.
func TestReconcileLeavesAnotherNamespacesRunAlone(t *testing.T) {
	runDir := t.TempDir()
	path := completedRun(t, runDir)
	for _, f := range []map[string]any{
		{"dispatcher_pid_namespace": "pid:[1]"},
		{"dispatcher_host": "another-host"},
	} {
		orphaned(t, path, f)
		rep, err := rundir.Reconcile(runDir)
		if err != nil || len(rep.Runs) != 0 {
			t.Errorf("%v: %+v, %v; want the run left alone", f, rep, err)
		}
		alive, ev := rundir.Owner(readRec(t, path))
		if !alive || !strings.Contains(ev, "not known dead") {
			t.Errorf("%v: Owner %v %q", f, alive, ev)
		}
		setFields(t, path, map[string]any{"dispatcher_pid_namespace": nil, "dispatcher_host": nil})
	}
	// A run of an earlier boot of this system is dead.
	orphaned(t, path, map[string]any{"dispatcher_boot_id": "00000000-0000-0000-0000-000000000000"})
	rep, err := rundir.Reconcile(runDir)
	if err != nil || len(rep.Runs) != 1 || !strings.Contains(rep.Runs[0].Evidence, "before this system booted") {
		t.Errorf("a run of an earlier boot: %+v, %v; want it marked", rep, err)
	}
}

func readRec(t *testing.T, path string) rundir.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec rundir.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}
