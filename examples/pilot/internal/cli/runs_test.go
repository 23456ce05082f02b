//go:build unix

package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/pilot/internal/grouplog"
	"github.com/pilotworkers/pilot/internal/rundir"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/runs"
)

// dispatched runs 'pilot dispatch' with provider and returns its verdict.
func dispatched(t *testing.T, f fixture, provider string, extra ...string) pilot.Verdict {
	t.Helper()
	_, out, errOut := runCLI(f.args("dispatch", provider, extra...)...)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var v pilot.Verdict
	if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &v) != nil || v.RunID == "" {
		t.Fatalf("dispatch %s: stdout %q, stderr %q", provider, out, errOut)
	}
	return v
}

func readRecord(t *testing.T, f fixture, runID string) pilot.Record {
	t.Helper()
	rec, err := pilot.ReadRecord(filepath.Join(f.runDir, runID, "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// heldScript is a worker that says "ready RUN_ID" once its "running"
// record is written, and then waits for release to exist.
func heldScript(release string) []string {
	return []string{"await={run_dir}/record.json", "out=ready {run_id}", "await=" + release, "out=last line"}
}

// startHeld starts 'pilot run' of provider (a heldScript worker) in this
// process and returns its run id once the worker is ready, and a function
// that releases the worker and returns the command's exit status.
func startHeld(t *testing.T, f fixture, provider, release string) (runID string, finish func() int) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var errb bytes.Buffer
	go func() {
		code := run(context.Background(), f.args("run", provider), strings.NewReader(""), pw, &errb)
		pw.Close()
		done <- code
	}()
	br := bufio.NewReader(pr)
	line, err := br.ReadString('\n')
	drained := make(chan struct{})
	go func() {
		io.Copy(io.Discard, br) // the rest of its output, until it ends
		close(drained)
	}()
	var once sync.Once
	code := 0
	finish = func() int {
		once.Do(func() {
			os.WriteFile(release, nil, 0o600)
			code = <-done
			<-drained
		})
		return code
	}
	t.Cleanup(func() { finish() })
	id, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if err != nil || !ok {
		finish()
		t.Fatalf("pilot run %s: %q, %v; stderr %q", provider, line, err, errb.String())
	}
	return id, finish
}

// seenWriter collects output and closes seen once it holds want.
type seenWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func newSeenWriter(want string) *seenWriter {
	return &seenWriter{want: want, seen: make(chan struct{})}
}

func (w *seenWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *seenWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestRunsListsNewestFirst(t *testing.T) {
	release := filepath.Join(t.TempDir(), "release")
	f := newFixture(t, map[string][]string{"ok": {"out=hello"}, "broken": {"err=boom", "exit=3"}, "held": heldScript(release)})
	if code, out, _ := runCLI("runs", "--run-dir", f.runDir); code != 0 || !strings.Contains(out, "no runs") {
		t.Errorf("no runs yet: exit %d, %q", code, out)
	}
	ok := dispatched(t, f, "ok")
	broken := dispatched(t, f, "broken")
	held, _ := startHeld(t, f, "held", release)

	code, out, errOut := runCLI("runs", "--run-dir", f.runDir)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "RUN ID") {
		t.Fatalf("stdout:\n%s\nwant a header and three runs", out)
	}
	okRec := readRecord(t, f, ok.RunID)
	for i, want := range [][]string{
		{held, "held", "review", "running", "+"},
		{broken.RunID, "broken", "error", string(broken.FailureClass)},
		{ok.RunID, "ok", "review", "completed", "-", homeShort(f.workdir), " ago",
			runs.Duration(okRec.EndedAt.Sub(okRec.StartedAt))},
	} {
		fields := strings.Fields(lines[i+1])
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("line %d %q lacks %q", i+1, lines[i+1], w)
			}
		}
		if fields[0] != want[0] {
			t.Errorf("line %d is run %s, want %s (newest first)", i+1, fields[0], want[0])
		}
	}

	// Filters: a provider, the failed runs, an age.
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--provider", "broken"}, []string{broken.RunID}},
		{[]string{"--failed"}, []string{broken.RunID}},
		{[]string{"--since", "1h"}, []string{held, broken.RunID, ok.RunID}},
		{[]string{"--provider", "ok", "--failed"}, nil},
	} {
		code, out, errOut := runCLI(append([]string{"runs", "--run-dir", f.runDir, "--json"}, tt.args...)...)
		var got []runSummary
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
			t.Fatalf("runs %v: exit %d, %v: %s %s", tt.args, code, err, out, errOut)
		}
		var ids []string
		for _, s := range got {
			ids = append(ids, s.RunID)
		}
		if diff := cmp.Diff(tt.want, ids); diff != "" {
			t.Errorf("runs %v (-want +got):\n%s", tt.args, diff)
		}
	}
	if code, _, errOut := runCLI("runs", "--run-dir", f.runDir, "--since", "soon"); code != 2 || !strings.Contains(errOut, "--since: want a duration like 72h or 7d") {
		t.Errorf("--since soon: exit %d, %q", code, errOut)
	}
	if code, out, _ := runCLI("runs", "show", "last", "--run-dir", f.runDir); code != 0 || !strings.Contains(out, held) {
		t.Errorf("runs show last: exit %d:\n%s\nwant run %s, the newest", code, out, held)
	}

	code, out, _ = runCLI("runs", "--run-dir", f.runDir, "--json")
	var got []runSummary
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("--json: exit %d, %v:\n%s", code, err, out)
	}
	var ids, statuses []string
	for _, s := range got {
		ids = append(ids, s.RunID)
		statuses = append(statuses, s.Status)
	}
	if diff := cmp.Diff([]string{held, broken.RunID, ok.RunID}, ids); diff != "" {
		t.Errorf("--json run ids (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"running", "error", "completed"}, statuses); diff != "" {
		t.Errorf("--json statuses (-want +got):\n%s", diff)
	}
	if got[0].DurationMS != nil || got[0].DispatcherAlive == nil || !*got[0].DispatcherAlive ||
		got[2].DurationMS == nil || got[2].Record != ok.Record || got[1].FailureClass != broken.FailureClass {
		t.Errorf("--json: %+v", got)
	}
}

func TestRunsShow(t *testing.T) {
	f := newFixture(t, map[string][]string{"broken": {"err=fatal: boom", "exit=3"}})
	v := dispatched(t, f, "broken")
	rec := readRecord(t, f, v.RunID)
	code, out, errOut := runCLI("runs", "show", v.RunID, "--run-dir", f.runDir)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	dir := filepath.Join(f.runDir, v.RunID)
	for _, want := range [][2]string{
		{"run", v.RunID},
		{"provider", "broken"},
		{"runner", "command"},
		{"mode", "review"},
		{"workdir", f.workdir},
		{"task file", rec.TaskFile},
		{"status", "error"},
		{"verdict", "error"},
		{"failure class", string(rec.FailureClass)},
		{"exit", "status 3"},
		{"duration", runs.Duration(rec.EndedAt.Sub(rec.StartedAt))},
		{"pilot", fmt.Sprintf("pid %d", os.Getpid())},
		{"record", filepath.Join(dir, "record.json")},
		{"stream log", filepath.Join(dir, "stream.log")},
		{"events log", filepath.Join(dir, "events.log")},
	} {
		found := false
		for _, l := range strings.Split(out, "\n") {
			if k, val, ok := strings.Cut(l, "  "); ok && k == want[0] && strings.Contains(val, want[1]) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %q line with %q in:\n%s", want[0], want[1], out)
		}
	}
	if rec.EvidenceExcerpt != "" && !strings.Contains(out, rec.EvidenceSource+": "+rec.EvidenceExcerpt) {
		t.Errorf("the evidence %s: %q is not shown:\n%s", rec.EvidenceSource, rec.EvidenceExcerpt, out)
	}

	// A unique prefix, and the record's path, name the run too.
	prefix := v.RunID[:len(v.RunID)-3]
	for _, arg := range []string{prefix, v.Record, dir} {
		if code, out2, errOut := runCLI("runs", "show", "--run-dir", f.runDir, arg); code != 0 || out2 != out {
			t.Errorf("show %s: exit %d, stderr %q, stdout:\n%s", arg, code, errOut, out2)
		}
	}
	code, raw, _ := runCLI("runs", "show", v.RunID, "--run-dir", f.runDir, "--json")
	if data, _ := os.ReadFile(v.Record); code != 0 || raw != string(data) {
		t.Errorf("show --json: exit %d, %q; want the record as it is", code, raw)
	}
	for _, args := range [][]string{{"runs", "show"}, {"runs", "show", "nope"}, {"runs", "show", "a", "b"}} {
		if code, out, errOut := runCLI(append(args, "--run-dir", f.runDir)...); code != 2 || out != "" || errOut == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and a message", args, code, out, errOut)
		}
	}
}

func TestRunsLogs(t *testing.T) {
	release := filepath.Join(t.TempDir(), "release")
	f := newFixture(t, map[string][]string{"ok": {"out=one", "err=two", "out=three"}, "held": heldScript(release)})
	v := dispatched(t, f, "ok")
	code, out, _ := runCLI("runs", "logs", v.RunID, "--run-dir", f.runDir)
	want, _ := os.ReadFile(filepath.Join(f.runDir, v.RunID, "stream.log"))
	if code != 0 || out != string(want) || !strings.Contains(out, "three") {
		t.Errorf("logs: exit %d, %q; want stream.log, %q", code, out, want)
	}

	// -f follows a live run until it ends.
	id, finish := startHeld(t, f, "held", release)
	w := newSeenWriter("ready " + id)
	var errb bytes.Buffer
	followed := make(chan int, 1)
	go func() {
		followed <- run(context.Background(), []string{"runs", "logs", id, "-f", "--run-dir", f.runDir}, nil, w, &errb)
	}()
	<-w.seen // it follows the live log
	if code := finish(); code != 0 {
		t.Fatalf("the held run: exit %d", code)
	}
	if code := <-followed; code != 0 {
		t.Errorf("logs -f: exit %d, stderr %q", code, errb.String())
	}
	want, _ = os.ReadFile(filepath.Join(f.runDir, id, "stream.log"))
	if got := w.String(); got != string(want) || !strings.Contains(got, "last line") {
		t.Errorf("logs -f printed %q; want all of stream.log, %q", got, want)
	}

	// -f ends when its context does.
	release2 := filepath.Join(t.TempDir(), "release")
	f2 := newFixture(t, map[string][]string{"held": heldScript(release2)})
	id, finish = startHeld(t, f2, "held", release2)
	ctx, cancel := context.WithCancel(context.Background())
	w = newSeenWriter("ready " + id)
	go func() {
		followed <- run(ctx, []string{"runs", "logs", "-f", id, "--run-dir", f2.runDir}, nil, w, io.Discard)
	}()
	<-w.seen
	cancel()
	if code := <-followed; code != 0 || strings.Contains(w.String(), "last line") {
		t.Errorf("logs -f cancelled: exit %d, printed %q", code, w.String())
	}
	if rec := readRecord(t, f2, id); rec.Status != "running" {
		t.Errorf("the run is %q; -f ended before it", rec.Status)
	}
	finish()
}

// A pilot SIGKILLed mid-dispatch, together with its supervisor, leaves a
// record saying "running", a temporary file and the worker's descendants;
// 'pilot runs' says the pilot is gone, and 'pilot runs --reconcile' closes
// the run out.
func TestRunsReconcileAfterPilotSIGKILL(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("finding the run's processes needs /proc")
	}
	dir := t.TempDir()
	fifo := filepath.Join(dir, "ready.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	f := newFixture(t, map[string][]string{"orphan": {
		"await={run_dir}/record.json",
		"spawn:setsid", "ignore-term", "ready", "block", "end",
		"spawn", "ignore-term", "ready", "block", "end",
		"write=" + fifo + `=ready\n`,
		"block",
	}})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pilotCmd := exec.Command(exe, f.args("dispatch", "orphan")...)
	pilotCmd.Env = append(os.Environ(), envRunMain+"=1")
	var pilotErr bytes.Buffer
	pilotCmd.Stderr = &pilotErr
	if err := pilotCmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- pilotCmd.Wait() }()
	ready := make(chan string, 1)
	go func() {
		r, err := os.Open(fifo)
		if err != nil {
			ready <- err.Error()
			return
		}
		line, _ := bufio.NewReader(r).ReadString('\n')
		r.Close()
		ready <- line
	}()
	select {
	case line := <-ready:
		if line != "ready\n" {
			t.Fatalf("the worker said %q", line)
		}
	case err := <-exited:
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-ready
		t.Fatalf("pilot dispatch exited before its worker was ready: %v\n%s", err, pilotErr.String())
	}
	var runID string
	ents, _ := os.ReadDir(f.runDir)
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			runID = e.Name()
		}
	}
	rec := readRecord(t, f, runID)
	if rec.Status != "running" || rec.Provenance.Pid != pilotCmd.Process.Pid {
		t.Fatalf("record before the kill: status %q, pilot pid %d", rec.Status, rec.Provenance.Pid)
	}
	if n := len(pilottest.Alive(runID)); n != 3 {
		t.Fatalf("%d processes of the run, want the worker and its two descendants", n)
	}
	temps, _ := filepath.Glob(filepath.Join(f.runDir, runID, ".record.json.tmp-*"))
	if len(temps) == 0 {
		t.Fatal("the pilot prepared no temporary file for its final record")
	}

	// SIGKILL the pilot; its supervisor, stopped first, cannot end the
	// worker's tree, and dies too.
	sup := pilottest.Supervisor(pilotCmd.Process.Pid)
	if sup == 0 {
		t.Fatal("pilot dispatch has no supervisor")
	}
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pilotCmd.Process.Kill()
	<-exited
	syscall.Kill(sup, syscall.SIGKILL)
	if len(pilottest.Alive(runID)) == 0 {
		t.Fatal("nothing of the run outlived its pilot: the test proves nothing")
	}
	gone := fmt.Sprintf("pilot pid %d is gone", pilotCmd.Process.Pid)

	// Before reconciling: the list, logs -f and a prune dry run all see
	// the pilot gone, and change nothing.
	if code, out, _ := runCLI("runs", "--run-dir", f.runDir); code != 0 || !strings.Contains(out, "running (pilot gone)") {
		t.Errorf("runs: exit %d:\n%s", code, out)
	}
	if code, _, errOut := runCLI("runs", "logs", runID, "-f", "--run-dir", f.runDir); code != 1 || !strings.Contains(errOut, gone) {
		t.Errorf("logs -f of the orphaned run: exit %d, stderr %q; want 1 and %q", code, errOut, gone)
	}
	if code, out, _ := runCLI("runs", "prune", "--older-than", "0s", "--dry-run", "--run-dir", f.runDir); code != 0 ||
		!strings.Contains(out, "kept "+runID+": its record still says running, but "+gone) {
		t.Errorf("prune --dry-run: exit %d:\n%s", code, out)
	}
	if readRecord(t, f, runID).Status != "running" {
		t.Fatal("a dry run changed the record")
	}

	code, out, errOut := runCLI("runs", "--reconcile", "--run-dir", f.runDir)
	if code != 0 {
		t.Fatalf("runs --reconcile: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{runID + " marked abandoned", gone, "killed", "removed 1 temporary file(s) [" + filepath.Base(temps[0]) + "]"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("runs --reconcile: stderr %q lacks %q", errOut, want)
		}
	}
	if !strings.Contains(out, "abandoned") {
		t.Errorf("runs --reconcile lists:\n%s", out)
	}
	if left := pilottest.Alive(runID); len(left) > 0 {
		t.Errorf("processes of the run left: %v", left)
	}
	if _, err := os.Stat(temps[0]); !os.IsNotExist(err) {
		t.Errorf("the temporary file is still there: %v", err)
	}
	after := readRecord(t, f, runID)
	if after.Status != "abandoned" || after.EndedAt == nil || !strings.Contains(after.EvidenceExcerpt, gone) {
		t.Errorf("record after: %q, ended %v, evidence %q", after.Status, after.EndedAt, after.EvidenceExcerpt)
	}
	if _, out, _ := runCLI("runs", "show", runID, "--run-dir", f.runDir); !strings.Contains(out, "pilot:reconcile: "+gone) {
		t.Errorf("runs show does not give the evidence:\n%s", out)
	}
	// Once is enough.
	if _, _, errOut := runCLI("runs", "--reconcile", "--run-dir", f.runDir); !strings.Contains(errOut, "no run to close out") {
		t.Errorf("a second --reconcile: %q", errOut)
	}
}

// setClock makes 'runs' see the time now.
func setClock(t *testing.T, now time.Time) {
	old := runsNow
	runsNow = func() time.Time { return now }
	t.Cleanup(func() { runsNow = old })
}

func TestRunsPrune(t *testing.T) {
	release := filepath.Join(t.TempDir(), "release")
	f := newFixture(t, map[string][]string{"ok": {"out=hello"}, "broken": {"err=boom", "exit=3"}, "held": heldScript(release)})
	older := dispatched(t, f, "ok")
	newer := dispatched(t, f, "broken")
	live, finish := startHeld(t, f, "held", release)
	olderEnd, newerEnd := *readRecord(t, f, older.RunID).EndedAt, *readRecord(t, f, newer.RunID).EndedAt
	dirOf := func(id string) string { return filepath.Join(f.runDir, id) }
	// The two runs as one fanout's, whose log goes with the last of them.
	group := grouplog.NewID(grouplog.KindFanout, olderEnd)
	gl, err := grouplog.New(f.runDir, group, grouplog.KindFanout, []grouplog.Job{{Name: "ok"}, {Name: "broken"}}, olderEnd)
	if err != nil {
		t.Fatal(err)
	}
	gl.Add(grouplog.Entry{Time: olderEnd, Type: grouplog.TypeStarted, Job: 0, RunID: older.RunID})
	gl.Add(grouplog.Entry{Time: newerEnd, Type: grouplog.TypeStarted, Job: 1, RunID: newer.RunID})
	gl.Close(newerEnd)
	groupLog := filepath.Join(f.runDir, grouplog.DirName, group+".jsonl")

	// An age between the two runs': the older one goes, the newer stays.
	setClock(t, newerEnd.Add(time.Hour))
	age := (time.Hour + newerEnd.Sub(olderEnd)/2).String()
	code, out, errOut := runCLI("runs", "prune", "--older-than", age, "--dry-run", "--run-dir", f.runDir)
	for _, want := range []string{"would remove " + older.RunID + " (completed, ended 1h00m ago, ",
		"kept " + newer.RunID + ": ended 1h00m ago, not longer than", "kept " + live + ": still running", "would remove 1 run(s) ("} {
		if !strings.Contains(out, want) {
			t.Errorf("prune --dry-run: stdout lacks %q:\n%s", want, out)
		}
	}
	if code != 0 || !exists(dirOf(older.RunID)) {
		t.Fatalf("prune --dry-run: exit %d (stderr %q); removed: %v", code, errOut, !exists(dirOf(older.RunID)))
	}
	code, out, _ = runCLI("runs", "prune", "--older-than", age, "--run-dir", f.runDir)
	if code != 0 || exists(dirOf(older.RunID)) || !exists(dirOf(newer.RunID)) || !strings.Contains(out, "removed "+older.RunID) {
		t.Fatalf("prune: exit %d:\n%s", code, out)
	}

	// --keep-failed keeps a run whose verdict is not completed; a live run
	// is never removed, however old.
	setClock(t, newerEnd.Add(8*24*time.Hour))
	code, out, _ = runCLI("runs", "prune", "--older-than", "7d", "--keep-failed", "--run-dir", f.runDir)
	if code != 0 || !exists(dirOf(newer.RunID)) || !strings.Contains(out, "kept "+newer.RunID+": its verdict is error, and failed runs are kept") {
		t.Errorf("prune --keep-failed: exit %d:\n%s", code, out)
	}
	if !exists(groupLog) {
		t.Errorf("prune removed the group log of a run it kept (%s)", newer.RunID)
	}
	code, out, _ = runCLI("runs", "prune", "--older-than", "7d", "--run-dir", f.runDir)
	if code != 0 || exists(dirOf(newer.RunID)) || !exists(dirOf(live)) || !strings.Contains(out, "kept "+live+": still running") {
		t.Errorf("prune: exit %d:\n%s", code, out)
	}
	if exists(groupLog) || !strings.Contains(out, "removed group log "+group+": its runs are gone") {
		t.Errorf("the group log of runs all removed: still there %v; stdout:\n%s", exists(groupLog), out)
	}
	if code := finish(); code != 0 {
		t.Errorf("the live run: exit %d", code)
	}

	for _, args := range [][]string{{}, {"--older-than", "soon"}, {"--older-than", "-1d"}, {"--older-than", "7d", "extra"},
		{"--max-size", "5X"}, {"--max-size", "0"}, {"--max-size", "-1GiB"}, {"--max-size", "lots"}} {
		if code, out, errOut := runCLI(append([]string{"runs", "prune", "--run-dir", f.runDir}, args...)...); code != 2 || out != "" || errOut == "" {
			t.Errorf("prune %v: exit %d, stdout %q, stderr %q; want 2 and a message", args, code, out, errOut)
		}
	}
}

// prune --max-size removes the oldest runs until the rest fit, keeps
// failed ones with --keep-failed and never removes a live run; a dry run
// changes nothing.
func TestRunsPruneMaxSize(t *testing.T) {
	release := filepath.Join(t.TempDir(), "release")
	blob := "write={run_dir}/blob=" + strings.Repeat("x", 64<<10)
	f := newFixture(t, map[string][]string{"big": {blob, "out=hello"}, "broken": {blob, "err=boom", "exit=3"},
		"held": heldScript(release)})
	oldest, failed, newest := dispatched(t, f, "big"), dispatched(t, f, "broken"), dispatched(t, f, "big")
	live, finish := startHeld(t, f, "held", release)
	setClock(t, time.Now().Add(time.Hour))
	dirOf := func(id string) string { return filepath.Join(f.runDir, id) }
	sizeOf := func(id string) int64 {
		t.Helper()
		n, err := rundir.Size(dirOf(id))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// A margin far below a blob: the held run's files may still grow a
	// little.
	const margin = 1 << 10
	prune := func(args ...string) (string, string) {
		t.Helper()
		code, out, errOut := runCLI(append([]string{"runs", "prune", "--run-dir", f.runDir}, args...)...)
		if code != 0 {
			t.Fatalf("prune %v: exit %d, stderr %q", args, code, errOut)
		}
		return out, errOut
	}
	fits := strconv.FormatInt(sizeOf(newest.RunID)+sizeOf(live)+margin, 10)
	out, _ := prune("--max-size", fits, "--dry-run")
	for _, want := range []string{"would remove " + oldest.RunID + " (completed, ended ", "would remove " + failed.RunID + " (error, ended ",
		"kept " + newest.RunID + ": the runs left take ", "kept " + live + ": still running", "would remove 2 run(s) ("} {
		if !strings.Contains(out, want) {
			t.Errorf("prune --max-size --dry-run: stdout lacks %q:\n%s", want, out)
		}
	}
	for _, id := range []string{oldest.RunID, failed.RunID, newest.RunID, live} {
		if !exists(dirOf(id)) {
			t.Fatalf("a dry run removed %s", id)
		}
	}

	withFailed := strconv.FormatInt(sizeOf(failed.RunID)+sizeOf(newest.RunID)+sizeOf(live)+margin, 10)
	out, _ = prune("--max-size", withFailed, "--keep-failed")
	if exists(dirOf(oldest.RunID)) || !exists(dirOf(failed.RunID)) || !exists(dirOf(newest.RunID)) ||
		!strings.Contains(out, "kept "+failed.RunID+": its verdict is error, and failed runs are kept") || !strings.Contains(out, "removed 1 run(s) (") {
		t.Errorf("prune --max-size --keep-failed:\n%s", out)
	}

	// Nothing but the live run fits in a byte: the rest go, and stderr
	// says the limit is not met.
	out, errOut := prune("--max-size", "1")
	if exists(dirOf(failed.RunID)) || exists(dirOf(newest.RunID)) || !exists(dirOf(live)) || !strings.Contains(out, "kept "+live+": still running") ||
		!strings.Contains(errOut, "more than --max-size 1B") {
		t.Errorf("prune --max-size 1: stdout:\n%s\nstderr:\n%s", out, errOut)
	}
	if code := finish(); code != 0 {
		t.Errorf("the live run: exit %d", code)
	}
	if rec := readRecord(t, f, live); rec.Status != string(pilot.Completed) || rec.RunDirBytes <= 0 {
		t.Errorf("the live run's record after the prunes: status %q, run_dir_bytes %d", rec.Status, rec.RunDirBytes)
	}
}

// A run whose worktree holds work that is nowhere else is kept: the commit
// pilot made of the worker's work on its branch alone, then uncommitted
// changes. Once the work is merged and nothing is left uncommitted, it goes.
func TestRunsPruneKeepsAWorktreeWithWork(t *testing.T) {
	f := newFixture(t, map[string][]string{"writer": {`write={workdir}/made.txt=by the worker\n`}})
	repo := pilottest.GitRepo(t)
	args := f.args("dispatch", "writer", "--worktree")
	for i := range args {
		if args[i] == f.workdir {
			args[i] = repo
		}
	}
	_, out, errOut := runCLI(args...)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var v outVerdict
	if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &v) != nil || v.Worktree == nil || !v.Worktree.Kept {
		t.Fatalf("dispatch --worktree: %q, %q", out, errOut)
	}
	wt := v.Worktree
	setClock(t, time.Now().Add(48*time.Hour))
	prune := func() string {
		t.Helper()
		code, out, errOut := runCLI("runs", "prune", "--older-than", "1d", "--run-dir", f.runDir)
		if code != 0 {
			t.Fatalf("prune: exit %d, stderr %q", code, errOut)
		}
		return out
	}
	gitIn := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.invalid"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	runDir := filepath.Join(f.runDir, v.RunID)

	// pilot committed the worker's work on the branch, and nowhere else.
	if out := prune(); !strings.Contains(out, "kept "+v.RunID+": its branch "+wt.Branch) || !strings.Contains(out, "1 commit(s) on no other branch") || !exists(runDir) {
		t.Errorf("a worktree whose branch has a commit of its own:\n%s", out)
	}
	gitIn(repo, "merge", "-q", "--ff-only", wt.Branch)
	if err := os.WriteFile(filepath.Join(wt.Path, "more.txt"), []byte("more\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := prune(); !strings.Contains(out, "kept "+v.RunID+": its worktree "+wt.Path+" has uncommitted changes") || !exists(runDir) {
		t.Errorf("a worktree with uncommitted changes:\n%s", out)
	}
	os.Remove(filepath.Join(wt.Path, "more.txt"))
	if out := prune(); !strings.Contains(out, "removed "+v.RunID) || exists(runDir) {
		t.Errorf("a worktree whose work is merged:\n%s", out)
	}
}

func TestRunsHelpAndBadInput(t *testing.T) {
	for _, args := range [][]string{{"runs", "--help"}, {"runs", "show", "-h"}, {"runs", "logs", "--help"}, {"runs", "prune", "--help"}} {
		code, out, errOut := runCLI(args...)
		if code != 0 || !strings.Contains(out, "usage: pilot "+strings.Join(args[:len(args)-1], " ")) || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	if code, out, errOut := runCLI("runs", "extra"); code != 2 || out != "" || !strings.Contains(errOut, `"extra"`) {
		t.Errorf("runs extra: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runCLI("runs", "logs"); code != 2 || !strings.Contains(errOut, "want one run ID") {
		t.Errorf("runs logs: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ := runCLI("--help"); code != 0 || !strings.Contains(out, "\n  runs ") {
		t.Errorf("the usage does not list runs:\n%s", out)
	}
}

func TestParseAge(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"72h", 72 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"0s", 0, true},
		{"7d", 7 * 24 * time.Hour, true},
		{"1.5d", 36 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"0d", 0, true},
		{"", 0, false},
		{"d", 0, false},
		{"7", 0, false},
		{"-1d", 0, false},
		{"-5h", 0, false},
		{"7days", 0, false},
		{"1d-1h", 0, false},
		{"infd", 0, false},
		{"1e3d", 0, false},
	} {
		got, err := parseAge(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseAge(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
