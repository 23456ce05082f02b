package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/schedule"
)

// A job's estimate is the median of its latest completed runs with its
// label and task file; failed runs, other jobs' runs and runs older than
// the latest five do not count.
func TestHistoryEstimatesAreTheMedianOfTheLatestCompletedRuns(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	n := 0
	write := func(label, taskFile string, verdict pilot.Outcome, ago int, d time.Duration) {
		t.Helper()
		n++
		began := start.Add(-time.Duration(ago) * time.Hour)
		ended := began.Add(d)
		rec := pilot.Record{RunID: "r" + string(rune('a'+n)), Label: label, TaskFile: taskFile, Status: "closed",
			Verdict: verdict, StartedAt: began, EndedAt: &ended}
		run := filepath.Join(dir, rec.RunID)
		if err := os.MkdirAll(run, 0o700); err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(rec)
		if err := os.WriteFile(filepath.Join(run, "record.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const m = time.Minute
	write("api", "/t/api.md", pilot.Completed, 1, 4*m)
	write("api", "/t/api.md", pilot.Completed, 2, 2*m)
	write("api", "/t/api.md", pilot.Completed, 3, 9*m)
	write("api", "/t/api.md", pilot.Failed, 4, 100*m)     // failed: no estimate
	write("api", "/t/other.md", pilot.Completed, 5, 50*m) // another task file
	write("web", "/t/api.md", pilot.Completed, 6, 70*m)   // another job
	for i := range 3 {                                    // older than the latest five
		write("api", "/t/api.md", pilot.Completed, 10+i, 60*m)
	}
	est := historyEstimates(dir)
	job := func(label, taskFile string) schedule.Job {
		return schedule.Job{ID: label, Task: pilot.Task{Label: label, TaskFile: taskFile}}
	}
	// The latest five completed api runs: 4, 2, 9, 60, 60 → median 9.
	if got := est(job("api", "/t/api.md")); got != 9*m {
		t.Errorf("api's estimate %v, want 9m", got)
	}
	if got := est(job("new", "/t/new.md")); got != 0 {
		t.Errorf("a job never run: %v, want 0 (unknown)", got)
	}
	if got := historyEstimates(filepath.Join(dir, "missing"))(job("api", "/t/api.md")); got != 0 {
		t.Errorf("no run directory: %v", got)
	}
}
