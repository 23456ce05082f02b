package grouplog

import (
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
	"github.com/pilotworkers/pilot/internal/procfs"
)

func TestALogIsMadeAtTheFirstStartOnly(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	id := NewID(KindFanout, t0)
	if !ValidID(id) {
		t.Fatalf("NewID made %q, which ValidID refuses", id)
	}
	jobs := []Job{{Name: "a", Worker: "glm:code"}, {Name: "b", Worker: "kimi:test", Deps: []string{"a"}}}
	l, err := New(dir, id, KindFanout, jobs, t0)
	if err != nil {
		t.Fatal(err)
	}
	l.Add(Entry{Time: t0.Add(time.Second), Type: TypeWaiting, Job: 1, Why: "waiting on a"})
	if _, err := os.Stat(filepath.Join(dir, DirName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a log before any start: %v", err)
	}
	l.Add(Entry{Time: t0.Add(2 * time.Second), Type: TypeStarted, Job: 0, RunID: "r1"})
	l.Add(Entry{Time: t0.Add(3 * time.Second), Type: TypeVerdict, Job: 0, RunID: "r1", Status: "completed"})
	// A torn last line (a writer mid-write) is left out.
	f, _ := os.OpenFile(filepath.Join(dir, DirName, id+".jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"time":"2026-12-06T19:00:04Z","type":"started","job":1,"run_`)
	f.Close()
	g, err := Read(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	want := Group{ID: id, Kind: KindFanout, Jobs: jobs, Started: t0, Entries: []Entry{
		{Time: t0.Add(time.Second), Type: TypeWaiting, Job: 1, Why: "waiting on a"},
		{Time: t0.Add(2 * time.Second), Type: TypeStarted, Job: 0, RunID: "r1"},
		{Time: t0.Add(3 * time.Second), Type: TypeVerdict, Job: 0, RunID: "r1", Status: "completed"},
	}}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("read (-want +got):\n%s", diff)
	}
	os.Truncate(filepath.Join(dir, DirName, id+".jsonl"), int64(len(mustRead(t, filepath.Join(dir, DirName, id+".jsonl"))))-int64(len(`{"time":"2026-12-06T19:00:04Z","type":"started","job":1,"run_`)))
	if err := l.Close(t0.Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if g, _ := Read(dir, id); !g.Ended.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("ended %v after Close", g.Ended)
	}

	// A group that started nothing leaves nothing.
	other := NewID(KindGraph, t0.Add(time.Minute))
	l2, _ := New(dir, other, KindGraph, jobs, t0)
	l2.Add(Entry{Type: TypeEnded, Job: 0, Status: "external-active"})
	l2.Close(t0)
	if ids, _ := List(dir); !cmp.Equal(ids, []string{id}) {
		t.Errorf("List = %q, want only %q", ids, id)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestValidIDIsAFileName(t *testing.T) {
	for id, want := range map[string]bool{
		"fanout-20261206T190000.000Z-0a1b2c3d": true, "graph-20261206T190000.000Z-ff": true,
		"": false, "..": false, "../x": false, "fanout-2026/../x-aa": false, "fanout-20261206T190000.000Z-0a1b2c3d.jsonl": false,
		"Fanout-20261206T190000.000Z-aa": false, "fanout-20261206T190000.000Z-aa\n": false,
	} {
		if ValidID(id) != want {
			t.Errorf("ValidID(%q) = %v", id, !want)
		}
	}
	if _, err := Read(t.TempDir(), "../etc"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a path: %v", err)
	}
}

// A log whose pilot died before its end line (SIGKILLed) ends at its last
// line, saying how the pilot was found gone; one whose pilot lives goes on.
func TestALogOfADeadPilotEnds(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now().UTC()
	id := NewID(KindFanout, t0)
	l, err := New(dir, id, KindFanout, []Job{{Name: "a", Worker: "glm:code"}, {Name: "b", Worker: "glm:code"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	l.Add(Entry{Time: t0.Add(time.Second), Type: TypeStarted, Job: 0, RunID: "r1"})
	l.Add(Entry{Time: t0.Add(2 * time.Second), Type: TypeWaiting, Job: 1, Why: "waiting for a slot"})
	if g, err := Read(dir, id); err != nil || !g.Ended.IsZero() || g.Lost != "" {
		t.Fatalf("the log of a live pilot: ended %v, lost %q, %v; want it going on", g.Ended, g.Lost, err)
	}

	// The same log, written by a pilot that is gone now.
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	start, _ := procfs.StartTime(cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	path := filepath.Join(dir, DirName, id+".jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	me := fmt.Sprintf(`"pilot":{"pid":%d,"start_ticks":%d`, os.Getpid(), l.head.Pilot.StartTicks)
	gone := fmt.Sprintf(`"pilot":{"pid":%d,"start_ticks":%d`, cmd.Process.Pid, start)
	if !strings.Contains(string(data), me) {
		t.Fatalf("the group line keeps no pilot %s:\n%s", me, data)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), me, gone, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := Read(dir, id)
	if err != nil || !g.Ended.Equal(t0.Add(2*time.Second)) || !strings.Contains(g.Lost, fmt.Sprintf("pilot pid %d is gone", cmd.Process.Pid)) {
		t.Errorf("the log of a dead pilot: ended %v, lost %q, %v; want it ended at its last line, saying its pilot is gone", g.Ended, g.Lost, err)
	}
}

// A group's log goes when the group is over and its runs are gone; one
// with a run left, or still going on, stays. A dry run removes nothing.
func TestPruneRemovesALogWithItsLastRun(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now().UTC()
	jobs := []Job{{Name: "a", Worker: "glm:code"}, {Name: "b", Worker: "glm:code"}}
	logOf := func(kind string, at time.Time, runs []string, end bool) string {
		id := NewID(kind, at)
		l, err := New(dir, id, kind, jobs, at)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range runs {
			if err := os.Mkdir(filepath.Join(dir, r), 0o700); err != nil {
				t.Fatal(err)
			}
			l.Add(Entry{Time: at, Type: TypeStarted, Job: i, RunID: r})
		}
		if end {
			l.Close(at)
		}
		return id
	}
	over := logOf(KindFanout, t0, []string{"r1", "r2"}, true)
	going := logOf(KindGraph, t0.Add(time.Second), []string{"r3"}, false)
	if got, err := Prune(dir, nil, false); err != nil || len(got) != 0 {
		t.Fatalf("Prune with every run there: %q, %v; want nothing removed", got, err)
	}
	os.Remove(filepath.Join(dir, "r1"))
	if got, err := Prune(dir, nil, false); err != nil || len(got) != 0 {
		t.Fatalf("Prune with r2 left: %q, %v; want nothing removed", got, err)
	}
	if got, err := Prune(dir, map[string]bool{"r2": true, "r3": true}, true); err != nil || !cmp.Equal(got, []string{over}) {
		t.Fatalf("dry run with r2 and r3 going: %q, %v; want %q", got, err, over)
	}
	if ids, _ := List(dir); len(ids) != 2 {
		t.Fatalf("a dry run removed a log: %q left", ids)
	}
	os.Remove(filepath.Join(dir, "r2"))
	os.Remove(filepath.Join(dir, "r3"))
	if got, err := Prune(dir, nil, false); err != nil || !cmp.Equal(got, []string{over}) {
		t.Fatalf("Prune: %q, %v; want %q", got, err, over)
	}
	if ids, _ := List(dir); !cmp.Equal(ids, []string{going}) {
		t.Errorf("left %q, want the group still going on (%q)", ids, going)
	}
}
