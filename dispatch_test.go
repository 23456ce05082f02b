package pilot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/internal/procfs"
	"github.com/pilotworkers/pilot/internal/rundir"
)

func dispatch(t *testing.T, d *pilot.Dispatcher, tk pilot.Task) pilot.Verdict {
	t.Helper()
	v, err := d.Dispatch(context.Background(), tk)
	if err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	return v
}

func readRecord(t *testing.T, v pilot.Verdict) pilot.Record {
	t.Helper()
	r, err := pilot.ReadRecord(v.Record)
	if err != nil {
		t.Fatalf("reading record: %v", err)
	}
	return r
}

func intp(n int) *int { return &n }

// summary is the part of a verdict that a test pins exactly.
type summary struct {
	Verdict      pilot.Outcome
	FailureClass pilot.FailureClass
	ExitCode     *int
	Signal       string
}

func summarize(v pilot.Verdict) summary {
	return summary{v.Verdict, v.FailureClass, v.ExitCode, v.Signal}
}

func TestDispatchOutcomes(t *testing.T) {
	checkGoroutines(t)
	tests := []struct {
		name   string
		script []string
		want   summary
	}{
		{"completed", []string{"out=hello"}, summary{pilot.Completed, "", intp(0), ""}},
		{"empty", []string{"err=only stderr"}, summary{pilot.Empty, "", intp(0), ""}},
		{"non-zero exit", []string{"out=partial", "err=boom", "exit=3"}, summary{pilot.Failed, pilot.FailGeneric, intp(3), ""}},
		{"killed by a signal pilot did not send", []string{"out=x", "signal=11"}, summary{pilot.Failed, pilot.FailProcessTerminated, nil, "SIGSEGV"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := testDispatcher(t, fakeProvider(t, "fake", tt.script...))
			v := dispatch(t, d, task("fake"))
			if diff := cmp.Diff(tt.want, summarize(v)); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
			if v.Type != event.Verdict || v.Provider != "fake" || v.Mode != pilot.ModeCode || v.RunID == "" {
				t.Errorf("verdict header = %+v", v)
			}
			rec := readRecord(t, v)
			if rec.Status != string(tt.want.Verdict) {
				t.Errorf("record status = %q, want %q", rec.Status, tt.want.Verdict)
			}
		})
	}
}

func TestDispatchStderrTailAndLogs(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t, fakeProvider(t, "fake", "out=to stdout", "flood=100000", "err=the last words", "exit=1"))
	v := dispatch(t, d, task("fake"))
	if len([]rune(v.StderrTail)) > 500 {
		t.Errorf("stderr_tail has %d characters, want at most 500", len([]rune(v.StderrTail)))
	}
	if !strings.HasSuffix(v.StderrTail, "the last words\n") {
		t.Errorf("stderr_tail = %q, want it to end with the last stderr line", v.StderrTail)
	}
	rec := readRecord(t, v)
	stream, err := os.ReadFile(rec.StreamLog)
	if err != nil {
		t.Fatal(err)
	}
	// Lines keep their order within a stream; the two streams are read
	// side by side, so their lines interleave in no fixed order.
	var outLines, errLines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(stream), "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "out "):
			outLines = append(outLines, l[4:])
		case strings.HasPrefix(l, "err "):
			errLines = append(errLines, l[4:])
		default:
			t.Errorf("stream.log line %q has no stream tag", firstN([]byte(l), 40))
		}
	}
	if !cmp.Equal(outLines, []string{"to stdout"}) || len(errLines) < 2 || errLines[len(errLines)-1] != "the last words" {
		t.Errorf("stream.log: stdout lines %q, %d stderr lines ending %q", outLines, len(errLines), errLines[len(errLines)-1])
	}
	events := readEvents(t, rec.EventsLog)
	if len(events) < 2 || events[0]["type"] != event.Started || events[len(events)-1]["type"] != event.Verdict {
		t.Errorf("events.log types = %v, want started first and verdict last", eventTypes(events))
	}
	if rec.StderrBytes < 100000 || rec.StdoutBytes != int64(len("to stdout\n")) {
		t.Errorf("record byte counts: stdout %d, stderr %d", rec.StdoutBytes, rec.StderrBytes)
	}
}

// The record and the verdict carry the run directory's size when the run
// ended: what the worker wrote there, and pilot's own files.
func TestRecordHasTheRunDirSize(t *testing.T) {
	checkGoroutines(t)
	const blob = 64 << 10
	d := testDispatcher(t, fakeProvider(t, "fake", "write={run_dir}/blob="+strings.Repeat("x", blob), "out=done"),
		fakeProvider(t, "small", "out=done"))
	v := dispatch(t, d, task("fake"))
	rec := readRecord(t, v)
	dir := filepath.Dir(v.Record)
	now, err := rundir.Size(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Since the size was taken, only the final record and the verdict's
	// line in events.log were written; the blob is the rest's bulk.
	if rec.RunDirBytes <= blob || rec.RunDirBytes > now || v.RunDirBytes != rec.RunDirBytes {
		t.Errorf("run_dir_bytes: record %d, verdict %d; want more than the worker's %d bytes, at most the %d there now",
			rec.RunDirBytes, v.RunDirBytes, blob, now)
	}
	if small := readRecord(t, dispatch(t, d, task("small"))); small.RunDirBytes <= 0 || small.RunDirBytes >= blob {
		t.Errorf("run_dir_bytes of a run that wrote nothing there: %d, want pilot's own few bytes", small.RunDirBytes)
	}
}

// firstN copies at most the first n bytes of b (a Line's Data is valid
// only during the call that receives it).
func firstN(b []byte, n int) []byte {
	return append([]byte(nil), b[:min(len(b), n)]...)
}

func readEvents(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("events.log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func eventTypes(events []map[string]any) []any {
	var out []any
	for _, e := range events {
		out = append(out, e["type"])
	}
	return out
}

func TestDispatchWallClockTimeout(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t, fakeProvider(t, "fake", "out=working", "block"))
	tk := task("fake")
	tk.Timeout = 300 * time.Millisecond
	v := dispatch(t, d, tk)
	if diff := cmp.Diff(summary{pilot.Failed, pilot.FailTimeout, nil, "SIGTERM"}, summarize(v)); diff != "" {
		t.Errorf("verdict (-want +got):\n%s", diff)
	}
}

func TestDispatchIdleTimeout(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t, fakeProvider(t, "fake", "out=one line, then silence", "block"))
	tk := task("fake")
	tk.IdleTimeout = 300 * time.Millisecond
	v := dispatch(t, d, tk)
	if diff := cmp.Diff(summary{pilot.Failed, pilot.FailIdleTimeout, nil, "SIGTERM"}, summarize(v)); diff != "" {
		t.Errorf("verdict (-want +got):\n%s", diff)
	}
}

func TestDispatchContextCancel(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t, fakeProvider(t, "fake", "out=ready", "block"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.OnLine = onLine("ready", func(string) { cancel() })
	v, err := d.Dispatch(ctx, task("fake"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(summary{pilot.Failed, pilot.FailCancelled, nil, "SIGTERM"}, summarize(v)); diff != "" {
		t.Errorf("verdict (-want +got):\n%s", diff)
	}
	events := readEvents(t, readRecord(t, v).EventsLog)
	if !strings.Contains(strings.Join(anyStrings(eventTypes(events)), " "), event.Terminate) {
		t.Errorf("events.log has no %s event: %v", event.Terminate, eventTypes(events))
	}
}

func anyStrings(xs []any) []string {
	var out []string
	for _, x := range xs {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func TestDispatchAlreadyCancelledStartsNothing(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t, fakeProvider(t, "fake", "out=never"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Dispatch(ctx, task("fake")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Dispatch error = %v, want context.Canceled", err)
	}
	assertEmptyDir(t, d.RunDir)
}

func TestSIGTERMIgnoringWorkerIsKilledAfterGrace(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t, fakeProvider(t, "fake", "ignore-term", "out=ready", "block"))
	d.Grace = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pid int
	d.Observer = func(e pilot.Event) {
		if e.Started != nil {
			pid = e.Started.Pid
		}
	}
	d.OnLine = onLine("ready", func(string) { cancel() })
	v, err := d.Dispatch(ctx, task("fake"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(summary{pilot.Failed, pilot.FailCancelled, nil, "SIGKILL"}, summarize(v)); diff != "" {
		t.Errorf("verdict (-want +got):\n%s", diff)
	}
	if !gone(pid) {
		t.Errorf("worker %d still runs after Dispatch returned", pid)
	}
}

func TestGrandchildHoldingThePipeDoesNotHangDispatch(t *testing.T) {
	checkGoroutines(t)
	// The grandchild keeps the worker's stdout open and ignores SIGTERM;
	// the worker exits at once.
	d := testDispatcher(t, fakeProvider(t, "fake", "spawn:hold", "ignore-term", "ready", "block", "end", "out=done"))
	var spawned spawnedPIDs
	d.OnLine = spawned.hook
	v := dispatch(t, d, task("fake"))
	if diff := cmp.Diff(summary{pilot.Completed, "", intp(0), ""}, summarize(v)); diff != "" {
		t.Errorf("verdict (-want +got):\n%s", diff)
	}
	if v.Leftovers != 1 {
		t.Errorf("leftovers = %d, want 1", v.Leftovers)
	}
	pids := spawned.get()
	if len(pids) != 1 {
		t.Fatalf("spawned pids = %v, want one", pids)
	}
	if !gone(pids[0]) {
		t.Errorf("grandchild %d still runs after Dispatch returned", pids[0])
	}
}

// processesWithEnv lists live processes whose environment holds entry.
func processesWithEnv(t *testing.T, entry string) []int {
	t.Helper()
	return procfs.WithEnv(entry)
}

func TestSixteenMiBLineArrivesWholeWithBoundedMemory(t *testing.T) {
	checkGoroutines(t)
	const size = 16 << 20
	d := testDispatcher(t, fakeProvider(t, "fake", "out=before", "bigline="+strconv.Itoa(size), "out=after"))
	d.MaxLineBytes = 1 << 20
	var mu sync.Mutex
	var got []pilot.Line
	d.OnLine = func(_ string, l pilot.Line) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, pilot.Line{Stream: l.Stream, Size: l.Size, Truncated: l.Truncated, Data: firstN(l.Data, 8)})
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	v := dispatch(t, d, task("fake"))
	runtime.ReadMemStats(&after)
	if v.Verdict != pilot.Completed {
		t.Fatalf("verdict = %s (%s)", v.Verdict, v.FailureClass)
	}
	want := []pilot.Line{
		{Stream: pilot.Stdout, Data: []byte("before"), Size: 6},
		{Stream: pilot.Stdout, Data: []byte("01234567"), Size: size, Truncated: true},
		{Stream: pilot.Stdout, Data: []byte("after"), Size: 5},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines seen (-want +got):\n%s", diff)
	}
	// Everything Dispatch allocated, in total, is less than the line: it
	// never held the line in memory.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc >= size {
		t.Errorf("Dispatch allocated %d bytes for a %d-byte line; want less than the line", alloc, size)
	}
	stream, err := os.ReadFile(readRecord(t, v).StreamLog)
	if err != nil {
		t.Fatal(err)
	}
	wantLog := append(append([]byte("out before\nout "), fakeagent.Pattern(size)...), "\nout after\n"...)
	if !bytes.Equal(stream, wantLog) {
		t.Errorf("stream.log is %d bytes, want %d (the 16 MiB line whole)", len(stream), len(wantLog))
	}
	assertNoSpillLeft(t, filepath.Dir(v.Record))
}

func assertNoSpillLeft(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left in the run directory", e.Name())
		}
	}
}

func TestCredentialPreflightFailureSpawnsNothing(t *testing.T) {
	checkGoroutines(t)
	marker := filepath.Join(t.TempDir(), "spawned")
	p := pilot.Provider{
		Name:          "glm",
		Runner:        "command",
		Argv:          []string{"/bin/sh", "-c", "touch " + marker},
		CredentialEnv: "GLM_API_KEY",
	}
	d := testDispatcher(t, p)
	_, err := d.Dispatch(context.Background(), task("glm"))
	var ce *pilot.CredentialError
	if !errors.As(err, &ce) || ce.Provider != "glm" || !strings.Contains(err.Error(), "GLM_API_KEY") {
		t.Errorf("error %q should name the provider and the variable to set", err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the worker ran despite the missing credential")
	}
	assertEmptyDir(t, d.RunDir)
}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("%s holds %d entries, want none", dir, len(ents))
	}
}

func TestSecretCanaryStaysWithItsProvider(t *testing.T) {
	checkGoroutines(t)
	const canaryA = "canary-secret-A-5f1e2d3c"
	const canaryB = "canary-secret-B-9a8b7c6d"
	env := map[string]string{"A_API_KEY": canaryA, "B_API_KEY": canaryB, "PATH": os.Getenv("PATH")}
	a := fakeProvider(t, "a", "env", "printenv=A_API_KEY", "err=key is "+"$A", "exit=1")
	a.CredentialEnv = "A_API_KEY"
	b := fakeProvider(t, "b", "env")
	b.CredentialEnv = "B_API_KEY"
	d := testDispatcher(t, a, b)
	// Even an allowlist that names the other provider's variable must not
	// let it through.
	d.EnvAllow = []string{"PATH", "A_API_KEY", "B_API_KEY"}
	d.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	d.Credentials = config.EnvCredentials{LookupEnv: d.LookupEnv}
	var mu sync.Mutex
	var events bytes.Buffer
	d.Observer = func(e pilot.Event) {
		mu.Lock()
		defer mu.Unlock()
		data, _ := json.Marshal(e)
		events.Write(data)
	}
	// Worker a sees its own key (the test checks it through the redacted
	// output: "A_API_KEY=[REDACTED]"), and nothing pilot writes holds it.
	var linesA []string
	d.OnLine = func(_ string, l pilot.Line) {
		mu.Lock()
		linesA = append(linesA, string(l.Data))
		mu.Unlock()
	}
	va := dispatch(t, d, task("a"))
	if !contains(linesA, "A_API_KEY=[REDACTED]") {
		t.Errorf("worker a did not get its credential; its output was %q", linesA)
	}
	if contains(linesA, "B_API_KEY") || containsPrefix(linesA, "B_API_KEY=") {
		t.Errorf("worker a got provider b's credential variable: %q", linesA)
	}
	var linesB []string
	d.OnLine = func(_ string, l pilot.Line) {
		mu.Lock()
		linesB = append(linesB, string(l.Data))
		mu.Unlock()
	}
	vb := dispatch(t, d, task("b"))
	for _, l := range linesB {
		if strings.Contains(l, canaryA) || strings.HasPrefix(l, "A_API_KEY=") {
			t.Errorf("worker b's environment holds provider a's credential: %q", l)
		}
	}
	for _, v := range []pilot.Verdict{va, vb} {
		data, _ := json.Marshal(v)
		if bytes.Contains(data, []byte(canaryA)) || bytes.Contains(data, []byte(canaryB)) {
			t.Errorf("verdict holds a secret: %s", data)
		}
	}
	if bytes.Contains(events.Bytes(), []byte(canaryA)) || bytes.Contains(events.Bytes(), []byte(canaryB)) {
		t.Errorf("observed events hold a secret")
	}
	err := filepath.WalkDir(d.RunDir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(canaryA)) || bytes.Contains(data, []byte(canaryB)) {
			t.Errorf("%s holds a secret", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func containsPrefix(xs []string, p string) bool {
	for _, x := range xs {
		if strings.HasPrefix(x, p) {
			return true
		}
	}
	return false
}

// failingRunner's Command fails: pilot's own failure after the run
// directory exists.
type failingRunner struct{}

func (failingRunner) Name() string { return "failing" }
func (failingRunner) Command(context.Context, pilot.Attempt) (*pilot.Command, error) {
	return nil, errors.New("no command today")
}

func TestRecordIsClosedOutOnEveryPath(t *testing.T) {
	checkGoroutines(t)
	cases := []struct {
		name    string
		prov    pilot.Provider
		tweak   func(*pilot.Task)
		runners []pilot.Runner
		wantErr bool
	}{
		{name: "completed", prov: fakeProvider(t, "p", "out=ok")},
		{name: "error exit", prov: fakeProvider(t, "p", "exit=4")},
		{name: "timeout", prov: fakeProvider(t, "p", "block"), tweak: func(tk *pilot.Task) { tk.Timeout = 200 * time.Millisecond }},
		{name: "spawn failed", prov: pilot.Provider{Name: "p", Runner: "command", Argv: []string{"/nonexistent/agent"}}},
		{name: "runner failed", prov: pilot.Provider{Name: "p", Runner: "failing"}, runners: []pilot.Runner{failingRunner{}}, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := testDispatcher(t, c.prov)
			d.Runners = c.runners
			tk := task("p")
			if c.tweak != nil {
				c.tweak(&tk)
			}
			_, err := d.Dispatch(context.Background(), tk)
			if (err != nil) != c.wantErr {
				t.Fatalf("Dispatch error = %v, want error: %v", err, c.wantErr)
			}
			recs, _ := filepath.Glob(filepath.Join(d.RunDir, "*", "record.json"))
			if len(recs) != 1 {
				t.Fatalf("found %d records, want 1", len(recs))
			}
			rec, err := pilot.ReadRecord(recs[0])
			if err != nil {
				t.Fatal(err)
			}
			if rec.Status == "running" || rec.EndedAt == nil {
				t.Errorf("record left open: status %q, ended_at %v", rec.Status, rec.EndedAt)
			}
			// A runner that fails leaves the directory empty.
			if data, _ := os.ReadFile(recs[0]); !bytes.Contains(data, []byte(`"run_dir_bytes"`)) || rec.RunDirBytes <= 0 && !c.wantErr {
				t.Errorf("record's run_dir_bytes: %d, want the run directory's size", rec.RunDirBytes)
			}
			if c.wantErr && rec.PilotError == "" {
				t.Errorf("record of a failed dispatch has no pilot_error")
			}
		})
	}
}

func TestSpawnFailureIsAVerdict(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t, pilot.Provider{Name: "p", Runner: "command", Argv: []string{"no-such-agent-cli"}})
	v := dispatch(t, d, task("p"))
	if diff := cmp.Diff(summary{pilot.Failed, pilot.FailSpawn, nil, ""}, summarize(v)); diff != "" {
		t.Errorf("verdict (-want +got):\n%s", diff)
	}
	if v.EvidenceSource != "pilot" || !strings.Contains(v.EvidenceExcerpt, "no-such-agent-cli") || v.FailureSource != pilot.SourceSpawn {
		t.Errorf("failure = %+v, want the lookup failure as evidence", v.Failure)
	}
}

func TestNoGoroutineLeaks(t *testing.T) {
	checkGoroutines(t)
	base := runtime.NumGoroutine()
	d := testDispatcher(t, fakeProvider(t, "fake", "out=hi", "spawn:hold", "ready", "block", "end"))
	for i := 0; i < 3; i++ {
		dispatch(t, d, task("fake"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.OnLine = onLine("hi", func(string) { cancel() })
	if _, err := d.Dispatch(ctx, task("fake")); err != nil {
		t.Fatal(err)
	}
	// Goroutines that have signalled their end may take a moment to
	// return; give them a bounded chance.
	n := runtime.NumGoroutine()
	for i := 0; i < 100 && n > base; i++ {
		time.Sleep(10 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	if n > base {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("%d goroutines after the dispatches, %d before:\n%s", n, base, buf)
	}
}

func TestStartedEventAndVerdictContract(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t, fakeProvider(t, "fake", "out=hi"))
	var seen []pilot.Event
	d.Observer = func(e pilot.Event) { seen = append(seen, e) }
	v := dispatch(t, d, pilot.Task{Provider: "fake", Mode: pilot.ModeReview, Prompt: "x", Label: "first"})
	if len(seen) != 2 || seen[0].Started == nil || seen[1].Verdict == nil {
		t.Fatalf("events = %+v, want started then verdict", seen)
	}
	var started, verdict map[string]any
	s, _ := json.Marshal(seen[0])
	json.Unmarshal(s, &started)
	vb, _ := json.Marshal(v)
	json.Unmarshal(vb, &verdict)
	for _, k := range []string{"type", "provider", "mode", "run_id", "pid"} {
		if _, ok := started[k]; !ok {
			t.Errorf("started event lacks %q: %s", k, s)
		}
	}
	for _, k := range []string{"type", "provider", "mode", "run_id", "verdict", "exit_code", "stderr_tail", "duration_ms", "record"} {
		if _, ok := verdict[k]; !ok {
			t.Errorf("verdict lacks %q: %s", k, vb)
		}
	}
	if started["run_id"] != verdict["run_id"] || verdict["label"] != "first" {
		t.Errorf("started %s and verdict %s disagree", s, vb)
	}
}

// A command runner follows no session: its verdict claims no phase (it
// would say "starting" of a run that ended), while a runner that reads
// the phase from the stream (pi's) tells the one it saw last.
func TestVerdictSessionPhaseOnlyWhenFollowed(t *testing.T) {
	d := testDispatcher(t, fakeProvider(t, "fake", "out=hi"))
	if v := dispatch(t, d, pilot.Task{Provider: "fake", Mode: pilot.ModeReview, Prompt: "x"}); v.Verdict != pilot.Completed || v.SessionPhase != "" {
		t.Errorf("command runner: %s, session_phase %q; want completed and none", v.Verdict, v.SessionPhase)
	}
}

func TestTaskFileIsKeptWhetherOrNotTheWorkerReadsIt(t *testing.T) {
	checkGoroutines(t)
	reads := fakeProvider(t, "reads")
	reads.Argv = []string{"/bin/sh", "-c", `cat "$1"`, "sh", "{task_file}"}
	reads.Env = nil
	ignores := fakeProvider(t, "ignores", "out=ok")
	d := testDispatcher(t, reads, ignores)
	var mu sync.Mutex
	var out []string
	d.OnLine = func(_ string, l pilot.Line) {
		mu.Lock()
		out = append(out, string(l.Data))
		mu.Unlock()
	}
	for _, p := range []string{"reads", "ignores"} {
		tk := task(p)
		tk.Prompt = "the prompt for " + p
		v := dispatch(t, d, tk)
		rec := readRecord(t, v)
		data, err := os.ReadFile(rec.TaskFile)
		if err != nil || string(data) != tk.Prompt {
			t.Errorf("%s: task file %s = %q, %v; want the prompt", p, rec.TaskFile, data, err)
		}
	}
	if len(out) < 1 || out[0] != "the prompt for reads" {
		t.Errorf("the worker that reads {task_file} printed %q", out)
	}
}

// Many dispatches at once share one supervisor; each gets its own verdict
// and every tree, daemons included, is gone afterwards.
func TestConcurrentDispatchesShareTheSupervisor(t *testing.T) {
	checkGoroutines(t)
	scripts := map[string][]string{
		"plain":  {"out=hi"},
		"fails":  {"err=no", "exit=5"},
		"holder": {"spawn:hold", "ignore-term", "ready", "block", "end", "out=done"},
		"daemon": {"spawn", "spawn:setsid", "ready", "block", "end", "ready", "end", "out=done"},
		"hangs":  {"ignore-term", "out=x", "block"},
	}
	want := map[string]summary{
		"plain":  {pilot.Completed, "", intp(0), ""},
		"fails":  {pilot.Failed, pilot.FailGeneric, intp(5), ""},
		"holder": {pilot.Completed, "", intp(0), ""},
		"daemon": {pilot.Completed, "", intp(0), ""},
		"hangs":  {pilot.Failed, pilot.FailTimeout, nil, "SIGKILL"},
	}
	var ps []pilot.Provider
	for name, s := range scripts {
		ps = append(ps, fakeProvider(t, name, s...))
	}
	d := testDispatcher(t, ps...)
	d.Grace = 300 * time.Millisecond
	names := []string{"plain", "fails", "holder", "daemon", "hangs"}
	const rounds = 4
	got := make([]pilot.Verdict, len(names)*rounds)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := task(names[i%len(names)])
			if tk.Provider == "hangs" {
				tk.Timeout = 2 * time.Second
			}
			v, err := d.Dispatch(context.Background(), tk)
			if err != nil {
				t.Errorf("dispatch %d: %v", i, err)
			}
			got[i] = v
		}()
	}
	wg.Wait()
	for i, v := range got {
		name := names[i%len(names)]
		sum := summarize(v)
		if name == "hangs" && sum.Signal == "SIGTERM" {
			// Twenty race-detector builds starting at once on a small
			// machine: the timeout may come before the worker got to
			// ignore SIGTERM. The grace path has its own test.
			sum.Signal = "SIGKILL"
		}
		if diff := cmp.Diff(want[name], sum); diff != "" {
			t.Errorf("%s (dispatch %d) verdict (-want +got):\n%s", name, i, diff)
		}
		if left := processesWithEnv(t, pilot.EnvRunID+"="+v.RunID); len(left) > 0 {
			t.Errorf("%s (dispatch %d): processes %v still alive", name, i, left)
		}
	}
}
