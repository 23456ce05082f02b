package runs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/rundir"
	"github.com/pilotworkers/pilot/runs"
	"github.com/pilotworkers/pilot/size"
)

var t0 = time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)

// writeRun makes run id in dir with record rec (its run id set) and, when
// log is not empty, a stream.log.
func writeRun(t testing.TB, dir, id string, rec pilot.Record, log string) string {
	t.Helper()
	d := filepath.Join(dir, id)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	rec.RunID = id
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "record.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if log != "" {
		if err := os.WriteFile(filepath.Join(d, "stream.log"), []byte(log), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// ended is a record of a run that started at start and took d.
func ended(start time.Time, d time.Duration, v pilot.Outcome) pilot.Record {
	end := start.Add(d)
	return pilot.Record{Provider: "fake", Status: string(v), Verdict: v, StartedAt: start, EndedAt: &end}
}

// deadPid is the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func ids(rs []runs.Run) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func ExampleList() {
	dir, _ := os.MkdirTemp("", "runs-example-")
	defer os.RemoveAll(dir)
	for i, v := range []pilot.Outcome{pilot.Completed, pilot.Failed} {
		d := filepath.Join(dir, fmt.Sprintf("run-%d", i))
		os.Mkdir(d, 0o700)
		data, _ := json.Marshal(ended(t0.Add(time.Duration(i)*time.Hour), 90*time.Second, v))
		os.WriteFile(filepath.Join(d, "record.json"), data, 0o600)
	}

	list, err := runs.List(dir)
	if err != nil {
		fmt.Println(err)
	}
	for _, r := range list {
		fmt.Println(r.ID, r.Record.Status, runs.Duration(r.Record.EndedAt.Sub(r.Record.StartedAt)))
	}
	// Output:
	// run-1 error 1m30s
	// run-0 completed 1m30s
}

func TestListNewestFirstSkipsWhatIsNoRun(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir, "a", ended(t0, time.Second, pilot.Completed), "")
	writeRun(t, dir, "c", ended(t0.Add(time.Hour), time.Second, pilot.Completed), "")
	writeRun(t, dir, "b", ended(t0.Add(time.Hour), time.Second, pilot.Completed), "") // same start: by id
	os.Mkdir(filepath.Join(dir, "no-record-yet"), 0o700)
	os.Mkdir(filepath.Join(dir, ".worktrees"), 0o700)
	os.WriteFile(filepath.Join(dir, "a-file"), nil, 0o600)
	bad := filepath.Join(dir, "corrupt")
	os.Mkdir(bad, 0o700)
	os.WriteFile(filepath.Join(bad, "record.json"), []byte("{"), 0o600)

	list, err := runs.List(dir)
	if diff := cmp.Diff([]string{"c", "b", "a"}, ids(list)); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	var re *runs.RecordError
	if !errors.As(err, &re) || re.Dir != bad {
		t.Errorf("List error = %v, want a *RecordError for %s", err, bad)
	}

	if list, err := runs.List(filepath.Join(dir, "missing")); list != nil || err != nil {
		t.Errorf("List of a missing dir = %v, %v; want no runs and no error", list, err)
	}
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir, "20250501-pi-aaaa", ended(t0, time.Second, pilot.Completed), "")
	writeRun(t, dir, "20250501-pi-aabb", ended(t0, time.Second, pilot.Completed), "")
	other := writeRun(t, t.TempDir(), "elsewhere", ended(t0, time.Second, pilot.Completed), "")

	for name, want := range map[string]string{
		"20250501-pi-aaaa":                     "20250501-pi-aaaa",
		"20250501-pi-aab":                      "20250501-pi-aabb",
		other:                                  "elsewhere",
		filepath.Join(other, "record.json"):    "elsewhere",
		filepath.Join(dir, "20250501-pi-aaaa"): "20250501-pi-aaaa",
	} {
		r, err := runs.Find(dir, name)
		if err != nil || r.ID != want || r.Record.RunID != want {
			t.Errorf("Find(%q) = %q (record %q), %v; want %q", name, r.ID, r.Record.RunID, err, want)
		}
	}
	if _, err := runs.Find(dir, "20250501-pi-a"); !errors.Is(err, runs.ErrAmbiguous) {
		t.Errorf("Find of a shared prefix: %v, want ErrAmbiguous", err)
	}
	if _, err := runs.Find(dir, "nope"); !errors.Is(err, runs.ErrNoRun) {
		t.Errorf("Find of no run: %v, want ErrNoRun", err)
	}
	writeRun(t, dir, "20250502-pi-later", ended(t0.Add(time.Hour), time.Second, pilot.Completed), "")
	if r, err := runs.Find(dir, runs.Last); err != nil || r.ID != "20250502-pi-later" {
		t.Errorf("Find(last) = %q, %v; want the run started last", r.ID, err)
	}
	if _, err := runs.Find(t.TempDir(), runs.Last); !errors.Is(err, runs.ErrNoRun) {
		t.Errorf("Find(last) of no runs: %v, want ErrNoRun", err)
	}
}

func TestLogs(t *testing.T) {
	dir := t.TempDir()
	done := writeRun(t, dir, "done", ended(t0, time.Second, pilot.Completed), "one\ntwo\n")
	r, err := runs.Find(dir, "done")
	if err != nil {
		t.Fatal(err)
	}
	for _, follow := range []bool{false, true} {
		var out bytes.Buffer
		if err := runs.Logs(context.Background(), &out, r, follow); err != nil || out.String() != "one\ntwo\n" {
			t.Errorf("Logs(follow %v) = %q, %v; want the whole log", follow, out.String(), err)
		}
	}

	os.Remove(filepath.Join(done, "stream.log"))
	if err := runs.Logs(context.Background(), &bytes.Buffer{}, r, false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Logs of a run with no log: %v, want fs.ErrNotExist", err)
	}

	// A running record whose pilot is gone: following ends at once.
	pid := deadPid(t)
	writeRun(t, dir, "orphan", pilot.Record{Status: runs.StatusRunning, StartedAt: time.Now(),
		Provenance: pilot.Provenance{Pid: pid}}, "partial\n")
	r, err = runs.Find(dir, "orphan")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = runs.Logs(context.Background(), &out, r, true)
	var gone *runs.GoneError
	if !errors.As(err, &gone) || gone.RunID != "orphan" || !strings.Contains(gone.Evidence, fmt.Sprintf("pilot pid %d is gone", pid)) {
		t.Errorf("following an orphaned run: %v, want a *GoneError naming pid %d", err, pid)
	}
	if out.String() != "partial\n" {
		t.Errorf("following an orphaned run printed %q, want its log", out.String())
	}
}

func TestReconcile(t *testing.T) {
	dir := t.TempDir()
	pid := deadPid(t)
	d := writeRun(t, dir, "orphan", pilot.Record{Status: runs.StatusRunning, StartedAt: time.Now(),
		Provenance: pilot.Provenance{Pid: pid}}, "")
	temp := filepath.Join(d, ".record.json.tmp-123")
	os.WriteFile(temp, nil, 0o600)
	writeRun(t, dir, "done", ended(t0, time.Second, pilot.Completed), "")

	closed, err := runs.Reconcile(dir)
	if err != nil || len(closed) != 1 || closed[0].RunID != "orphan" {
		t.Fatalf("Reconcile = %+v, %v; want the orphaned run", closed, err)
	}
	if diff := cmp.Diff([]string{temp}, closed[0].Removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	r, err := runs.Find(dir, "orphan")
	if err != nil || r.Record.Status != runs.StatusAbandoned || r.Record.EndedAt == nil {
		t.Errorf("the record after Reconcile: %+v, %v; want it abandoned and ended", r.Record, err)
	}
	if closed, err := runs.Reconcile(dir); len(closed) != 0 || err != nil {
		t.Errorf("Reconcile again = %+v, %v; want nothing to do", closed, err)
	}
}

func TestPrune(t *testing.T) {
	dir := t.TempDir()
	now := t0.Add(24 * time.Hour)
	writeRun(t, dir, "old-ok", ended(t0, time.Minute, pilot.Completed), "")
	writeRun(t, dir, "old-failed", ended(t0.Add(time.Hour), time.Minute, pilot.Failed), "")
	writeRun(t, dir, "recent", ended(now.Add(-time.Hour), time.Minute, pilot.Completed), "")
	writeRun(t, dir, "live", pilot.Record{Status: runs.StatusRunning, StartedAt: time.Now(),
		Provenance: pilot.Provenance{Pid: os.Getpid()}}, "")

	type decision struct{ ID, Kept string }
	prune := func(opt runs.PruneOptions) []decision {
		t.Helper()
		opt.Now = now
		pruned, err := runs.Prune(context.Background(), dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		var out []decision
		for _, p := range pruned {
			if p.Err != nil {
				t.Errorf("%s: %v", p.Run.ID, p.Err)
			}
			out = append(out, decision{p.Run.ID, p.Kept})
		}
		return out
	}
	want := []decision{
		{"live", "still running"}, // the newest start: the last
		{"recent", "ended 59m00s ago, not longer than 2h00m"},
		{"old-failed", "its verdict is error, and failed runs are kept"},
		{"old-ok", ""},
	}
	for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
		want[i], want[j] = want[j], want[i] // oldest first
	}
	if diff := cmp.Diff(want, prune(runs.PruneOptions{OlderThan: 2 * time.Hour, KeepFailed: true, DryRun: true})); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	if list, _ := runs.List(dir); len(list) != 4 {
		t.Fatalf("a dry run removed runs: %v left", ids(list))
	}
	prune(runs.PruneOptions{OlderThan: 2 * time.Hour})
	list, _ := runs.List(dir)
	if diff := cmp.Diff([]string{"live", "recent"}, ids(list)); diff != "" {
		t.Errorf("runs left (-want +got):\n%s", diff)
	}
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0.0s", 4200 * time.Millisecond: "4.2s", 185 * time.Second: "3m05s",
		130 * time.Minute: "2h10m", 76 * time.Hour: "3d04h",
	} {
		if got := runs.Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestPruneMaxSize(t *testing.T) {
	// Oldest first: a live run, then four that ended (started later, for
	// the live run to come first), each with a stream.log of its own size.
	base := time.Now().Add(time.Hour)
	now := base.Add(24 * time.Hour)
	setup := func(t *testing.T) (string, map[string]int64) {
		dir := t.TempDir()
		writeRun(t, dir, "live", pilot.Record{Status: runs.StatusRunning, StartedAt: time.Now(),
			Provenance: pilot.Provenance{Pid: os.Getpid()}}, strings.Repeat("l", 4000))
		for i, r := range []struct {
			id string
			v  pilot.Outcome
		}{{"a", pilot.Completed}, {"b", pilot.Failed}, {"c", pilot.Completed}, {"d", pilot.Completed}} {
			writeRun(t, dir, r.id, ended(base.Add(time.Duration(i)*time.Hour), time.Minute, r.v), strings.Repeat("x", 1000*(i+1)))
		}
		sizes := map[string]int64{}
		for _, id := range []string{"live", "a", "b", "c", "d"} {
			n, err := rundir.Size(filepath.Join(dir, id))
			if err != nil {
				t.Fatal(err)
			}
			sizes[id] = n
		}
		return dir, sizes
	}
	type decision struct {
		ID    string
		Bytes int64
		Kept  string
	}
	prune := func(t *testing.T, dir string, opt runs.PruneOptions) []decision {
		t.Helper()
		opt.Now = now
		pruned, err := runs.Prune(context.Background(), dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		var out []decision
		for _, p := range pruned {
			if p.Err != nil {
				t.Errorf("%s: %v", p.Run.ID, p.Err)
			}
			out = append(out, decision{p.Run.ID, p.Bytes, p.Kept})
		}
		return out
	}
	within := func(left, limit int64) string {
		return "the runs left take " + size.Bytes(left).Approx() + ", within the size limit " + size.Bytes(limit).Approx()
	}
	left := func(t *testing.T, dir string) []string {
		t.Helper()
		list, err := runs.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		return ids(list)
	}

	t.Run("dry run", func(t *testing.T) {
		dir, s := setup(t)
		limit := s["live"] + s["b"] + s["c"] + s["d"]
		want := []decision{
			{"live", s["live"], "still running"},
			{"a", s["a"], ""},
			{"b", s["b"], within(limit, limit)},
			{"c", s["c"], within(limit, limit)},
			{"d", s["d"], within(limit, limit)},
		}
		if diff := cmp.Diff(want, prune(t, dir, runs.PruneOptions{MaxSize: limit, DryRun: true})); diff != "" {
			t.Errorf("decisions (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"d", "c", "b", "a", "live"}, left(t, dir)); diff != "" {
			t.Errorf("a dry run removed runs (-want +got):\n%s", diff)
		}
	})

	t.Run("newest kept within the size", func(t *testing.T) {
		dir, s := setup(t)
		limit := s["live"] + s["c"] + s["d"] + 1
		want := []decision{
			{"live", s["live"], "still running"},
			{"a", s["a"], ""},
			{"b", s["b"], ""},
			{"c", s["c"], within(limit-1, limit)},
			{"d", s["d"], within(limit-1, limit)},
		}
		if diff := cmp.Diff(want, prune(t, dir, runs.PruneOptions{MaxSize: limit})); diff != "" {
			t.Errorf("decisions (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"d", "c", "live"}, left(t, dir)); diff != "" {
			t.Errorf("runs left (-want +got):\n%s", diff)
		}
	})

	t.Run("keep failed", func(t *testing.T) {
		dir, s := setup(t)
		limit := s["live"] + s["b"] + s["d"]
		want := []decision{
			{"live", s["live"], "still running"},
			{"a", s["a"], ""},
			{"b", s["b"], "its verdict is error, and failed runs are kept"},
			{"c", s["c"], ""},
			{"d", s["d"], within(limit, limit)},
		}
		if diff := cmp.Diff(want, prune(t, dir, runs.PruneOptions{MaxSize: limit, KeepFailed: true})); diff != "" {
			t.Errorf("decisions (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"d", "b", "live"}, left(t, dir)); diff != "" {
			t.Errorf("runs left (-want +got):\n%s", diff)
		}
	})

	t.Run("the kept runs alone are too big", func(t *testing.T) {
		dir, _ := setup(t)
		// Age still counts: d ended within OlderThan and stays.
		got := prune(t, dir, runs.PruneOptions{MaxSize: 1, OlderThan: 21*time.Hour + 30*time.Minute})
		if got[0].Kept != "still running" || got[1].Kept != "" || got[2].Kept != "" || got[3].Kept != "" || got[4].Kept == "" {
			t.Errorf("decisions: %+v; want all but the live run and the recent one removed", got)
		}
		if diff := cmp.Diff([]string{"d", "live"}, left(t, dir)); diff != "" {
			t.Errorf("runs left (-want +got):\n%s", diff)
		}
	})
}
