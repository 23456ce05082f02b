package rundir_test

import (
	"context"
	"encoding/json"
	"github.com/pilotworkers/pilot/internal/rundir"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/pilottest"
)

func TestMain(m *testing.M) {
	if os.Getenv(envHelperPilot) != "" {
		os.Exit(helperPilot())
	}
	pilottest.Main(m)
}

// completedRun dispatches a real run that completes and returns its
// record's path.
func completedRun(t *testing.T, runDir string) string {
	t.Helper()
	d := pilottest.Dispatcher(t, []pilot.Provider{pilottest.FakeProvider(t, "ok", "out=hello")})
	d.RunDir = runDir
	v, err := d.Dispatch(context.Background(), pilot.Task{Provider: "ok", Mode: pilot.ModeReview, Prompt: "say hello", Workdir: t.TempDir()})
	if err != nil || v.Verdict != pilot.Completed {
		t.Fatalf("dispatch: %v, %+v", err, v)
	}
	return v.Record
}

// deadPid returns the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "exit=0")
	cmd.Env = append(os.Environ(), fakeagent.EnvFakeAgent+"=1", "GORACE=atexit_sleep_ms=0")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// setFields rewrites fields of the record at path, as raw JSON values.
func setFields(t *testing.T, path string, fields map[string]any) {
	t.Helper()
	var raw map[string]any
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		if v == nil {
			delete(raw, k)
		} else {
			raw[k] = v
		}
	}
	data, _ = json.MarshalIndent(raw, "", "  ")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// orphaned makes the record at path say what a SIGKILLed pilot leaves:
// "running", no end, a verdict-less record, its pilot pid gone.
func orphaned(t *testing.T, path string, extra map[string]any) {
	t.Helper()
	f := map[string]any{"status": "running", "ended_at": nil, "verdict": nil, "exit_code": nil, "dispatcher_pid": deadPid(t)}
	for k, v := range extra {
		f[k] = v
	}
	setFields(t, path, f)
}

func TestReconcileMarksARunWhosePilotIsGone(t *testing.T) {
	runDir := t.TempDir()
	path := completedRun(t, runDir)
	before, err := pilot.ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	orphaned(t, path, map[string]any{"future_field": map[string]any{"kept": true}})
	pid := func() int { r, _ := pilot.ReadRecord(path); return r.Provenance.Pid }()
	dir := filepath.Dir(path)
	temps := []string{".record.json.tmp-1234", ".line-spill-99"}
	others := []string{"notes.tmp-1", ".cache.tmp-x", ".tmp-12", "record.json.tmp-5", "sub/.record.json.tmp-7"}
	for _, name := range append(slices.Clone(temps), others...) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700)
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	recBefore, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	rep, err := rundir.Reconcile(runDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 1 {
		t.Fatalf("report %+v; want one run marked", rep)
	}
	run := rep.Runs[0]
	var wantRemoved []string
	for _, name := range temps {
		wantRemoved = append(wantRemoved, filepath.Join(dir, name))
	}
	if diff := cmp.Diff(wantRemoved, run.Removed, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	for _, name := range temps {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", name, err)
		}
	}
	for _, name := range others {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s, not a temporary file of pilot's, was removed: %v", name, err)
		}
	}
	if run.RunID != before.RunID || run.Record != path || !strings.Contains(run.Evidence, "is gone") {
		t.Errorf("report %+v", run)
	}

	after, err := pilot.ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != rundir.Abandoned || after.EndedAt == nil || after.EndedAt.Before(before.StartedAt) ||
		after.EvidenceSource != rundir.EvidenceSource || !strings.Contains(after.EvidenceExcerpt, "pilot pid") {
		t.Errorf("record after: status %q, ended_at %v, evidence %q: %q", after.Status, after.EndedAt, after.EvidenceSource, after.EvidenceExcerpt)
	}
	// Everything else is as the record said.
	want := before
	want.Status, want.EndedAt, want.Verdict, want.ExitCode = after.Status, after.EndedAt, "", nil
	want.Provenance.Pid = pid
	want.EvidenceSource, want.EvidenceExcerpt = after.EvidenceSource, after.EvidenceExcerpt
	// run_dir_bytes is the directory's size once the temporary files were
	// removed, before the record was rewritten.
	recAfter, _ := os.Stat(path)
	if size, err := rundir.Size(dir); err != nil || after.RunDirBytes != size-recAfter.Size()+recBefore.Size() {
		t.Errorf("run_dir_bytes %d; want %d (the dir's %d bytes, with the record's %d before instead of %d now; %v)",
			after.RunDirBytes, size-recAfter.Size()+recBefore.Size(), size, recBefore.Size(), recAfter.Size(), err)
	}
	want.RunDirBytes = after.RunDirBytes
	if diff := cmp.Diff(want, after); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	var raw map[string]json.RawMessage
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &raw); err != nil || string(raw["future_field"]) == "" {
		t.Errorf("the field pilot does not know is gone: %v\n%s", err, data)
	}

	// Nothing is left to do.
	if rep, err := rundir.Reconcile(runDir); err != nil || len(rep.Runs) != 0 {
		t.Errorf("second Reconcile: %+v, %v; want nothing done", rep, err)
	}
}

// A record that names no pilot pid is closed out once no process of its
// run is left.
func TestReconcileRecordWithoutPilotPid(t *testing.T) {
	runDir := t.TempDir()
	path := completedRun(t, runDir)
	orphaned(t, path, map[string]any{"dispatcher_pid": nil, "pid": deadPid(t)})
	rep, err := rundir.Reconcile(runDir)
	if err != nil || len(rep.Runs) != 1 || !strings.Contains(rep.Runs[0].Evidence, "names no pilot pid") {
		t.Fatalf("Reconcile: %+v, %v", rep, err)
	}
}

func TestReconcileLeavesEndedRunsAndOtherDirsAlone(t *testing.T) {
	runDir := t.TempDir()
	path := completedRun(t, runDir)
	data, _ := os.ReadFile(path)
	os.MkdirAll(filepath.Join(runDir, "no-record-yet"), 0o700)
	os.WriteFile(filepath.Join(runDir, "no-record-yet", ".record.json.tmp-1"), nil, 0o600)
	rep, err := rundir.Reconcile(runDir)
	if err != nil || len(rep.Runs) != 0 {
		t.Fatalf("Reconcile: %+v, %v; want nothing done", rep, err)
	}
	if now, _ := os.ReadFile(path); string(now) != string(data) {
		t.Errorf("an ended record was rewritten:\n%s", now)
	}
	if _, err := os.Stat(filepath.Join(runDir, "no-record-yet", ".record.json.tmp-1")); err != nil {
		t.Errorf("a run with no record lost its files: %v", err)
	}
	if rep, err := rundir.Reconcile(filepath.Join(runDir, "missing")); err != nil || len(rep.Runs) != 0 {
		t.Errorf("a missing dir: %+v, %v", rep, err)
	}
}

// A real dispatch, running: its pilot (this process) is alive, so
// Reconcile leaves the record, and the temporary file it prepared, alone.
func TestReconcileLeavesARunningDispatchAlone(t *testing.T) {
	release := filepath.Join(t.TempDir(), "release")
	d := pilottest.Dispatcher(t, []pilot.Provider{pilottest.FakeProvider(t, "held",
		"await={run_dir}/record.json", "out=ready", "await="+release)})
	ready := make(chan string, 1)
	d.OnLine = func(runID string, l pilot.Line) {
		if string(l.Data) == "ready" {
			ready <- runID
		}
	}
	type result struct {
		v   pilot.Verdict
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := d.Dispatch(context.Background(), pilot.Task{Provider: "held", Mode: pilot.ModeReview, Prompt: "wait", Workdir: t.TempDir()})
		done <- result{v, err}
	}()
	runID := <-ready
	path := filepath.Join(d.RunDir, runID, "record.json")
	temps, _ := filepath.Glob(filepath.Join(d.RunDir, runID, ".record.json.tmp-*"))

	rep, err := rundir.Reconcile(d.RunDir)
	if err != nil || len(rep.Runs) != 0 {
		t.Errorf("Reconcile: %+v, %v; want nothing done", rep, err)
	}
	rec, err := pilot.ReadRecord(path)
	if err != nil || rec.Status != rundir.Running {
		t.Errorf("record: %q, %v; want it still running", rec.Status, err)
	}
	if alive, ev := rundir.Owner(ownerOf(rec)); !alive || !strings.Contains(ev, "alive") {
		t.Errorf("Owner: %v, %q; want alive", alive, ev)
	}
	for _, p := range temps {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the live run's temporary file %s: %v", p, err)
		}
	}

	os.WriteFile(release, nil, 0o600)
	r := <-done
	if r.err != nil || r.v.Verdict != pilot.Completed {
		t.Fatalf("dispatch: %v, %+v", r.err, r.v)
	}
	if rec, _ := pilot.ReadRecord(path); rec.Status != string(pilot.Completed) {
		t.Errorf("the dispatch's own final record: %q", rec.Status)
	}
}

// Pilots that reconcile one run dir at once close each run out once, and
// leave every record whole.
func TestReconcileConcurrently(t *testing.T) {
	runDir := t.TempDir()
	var paths []string
	for range 3 {
		p := completedRun(t, runDir)
		orphaned(t, p, nil)
		paths = append(paths, p)
	}
	const n = 8
	reports := make([]rundir.Report, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			reports[i], errs[i] = rundir.Reconcile(runDir)
		})
	}
	close(start)
	wg.Wait()
	marked := map[string]int{}
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Reconcile %d: %v", i, errs[i])
		}
		for _, r := range reports[i].Runs {
			marked[r.Record]++
		}
	}
	want := map[string]int{}
	for _, p := range paths {
		want[p] = 1
	}
	if diff := cmp.Diff(want, marked); diff != "" {
		t.Errorf("times each record was marked (-want +got):\n%s", diff)
	}
	for _, p := range paths {
		rec, err := pilot.ReadRecord(p)
		if err != nil || rec.Status != rundir.Abandoned {
			t.Errorf("%s: %q, %v", p, rec.Status, err)
		}
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".*.tmp-*")); len(left) > 0 {
			t.Errorf("temporary files left: %v", left)
		}
	}
}

func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{
		".record.json.tmp-123":   true,
		".inventory.json.tmp-1":  true,
		".line-spill-42":         true,
		".record.json.tmp-":      false,
		".record.json.tmp-12a":   false,
		"record.json.tmp-12":     false,
		".tmp-12":                false,
		".line-spill-":           false,
		"stream.log":             false,
		".reconcile.lock":        false,
		"..tmp-1":                false,
		".a.tmp-1.tmp-2":         true,
		".line-spill-1.tmp-2":    true,
		".record.json.tmp-1/x":   false,
		".record.json.tmp-1\x00": false,
	} {
		if got := rundir.IsTemp(name); got != want {
			t.Errorf("rundir.IsTemp(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestClockMargin(t *testing.T) {
	if m := rundir.ClockMargin(time.Now()); m < 2*time.Second || m > 3*time.Second {
		t.Errorf("margin for a run started now: %v", m)
	}
	if m := rundir.ClockMargin(time.Now().Add(-1000 * time.Hour)); m < time.Hour {
		t.Errorf("margin for a run started 1000 h ago: %v, want at least an hour", m)
	}
}

// The helper pilot: the test binary re-executed with envHelperPilot set to
// a run dir dispatches one run whose worker leaves two descendants (one in
// a session of its own) and then writes "ready" to the FIFO named by
// envHelperFIFO, and blocks; the test SIGKILLs it there.
const (
	envHelperPilot = "RUNDIR_TEST_PILOT_RUN_DIR"
	envHelperFIFO  = "RUNDIR_TEST_PILOT_FIFO"
)

func helperPilot() int {
	runDir := os.Getenv(envHelperPilot)
	p, err := pilottest.FakeAgent("held",
		"await={run_dir}/record.json",
		"spawn:setsid", "ignore-term", "ready", "block", "end",
		"spawn", "ignore-term", "ready", "block", "end",
		"write="+os.Getenv(envHelperFIFO)+`=ready\n`,
		"block")
	if err != nil {
		return 2
	}
	reg, err := pilot.NewRegistry(p)
	if err != nil {
		return 2
	}
	d := &pilot.Dispatcher{Providers: reg, RunDir: runDir, LookupEnv: func(k string) (string, bool) {
		if k == "PATH" {
			return os.LookupEnv(k)
		}
		return "", false
	}}
	if _, err := d.Dispatch(context.Background(), pilot.Task{Provider: "held", Mode: pilot.ModeReview, Prompt: "wait", Workdir: filepath.Dir(runDir)}); err != nil {
		return 1
	}
	return 0
}

// ownerOf is what rundir reads of a pilot.Record.
func ownerOf(r pilot.Record) rundir.Record {
	pv := r.Provenance
	return rundir.Record{RunID: r.RunID, Status: r.Status, Pid: r.Pid, Pgid: r.Pgid, StartedAt: r.StartedAt, DispatcherPid: pv.Pid,
		DispatcherStart: pv.Start, BootID: pv.BootID, PidNamespace: pv.PidNamespace, Host: pv.Host}
}

// rundir keeps its own name of pilot's run id variable.
func TestEnvRunIDIsPilots(t *testing.T) {
	if rundir.EnvRunID != pilot.EnvRunID {
		t.Errorf("rundir's %q, pilot's %q", rundir.EnvRunID, pilot.EnvRunID)
	}
}
