package cli

import (
	"slices"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/runs"
	"github.com/pilotworkers/pilot/schedule"
)

// maxEstimateRuns is how many of a job's latest completed runs its
// estimate is the median of.
const maxEstimateRuns = 5

// historyEstimates returns schedule.Scheduler's Estimate from the run
// history in runDir: a job's expected duration is the median of its latest
// completed runs (at most maxEstimateRuns) with the same label (the job's
// id) and task file; zero when there are none. The history is read once,
// when the first job asks; an unreadable run directory gives no estimates.
func historyEstimates(runDir string) func(schedule.Job) time.Duration {
	type key struct{ label, taskFile string }
	var byJob map[key][]pilot.Record
	return func(j schedule.Job) time.Duration {
		if byJob == nil {
			byJob = map[key][]pilot.Record{}
			list, _ := runs.List(runDir)
			for _, r := range list {
				rec := r.Record
				if rec.Verdict == pilot.Completed && rec.Label != "" && rec.EndedAt != nil {
					k := key{rec.Label, rec.TaskFile}
					byJob[k] = append(byJob[k], rec)
				}
			}
		}
		recs := byJob[key{j.Task.Label, j.Task.TaskFile}]
		slices.SortFunc(recs, func(a, b pilot.Record) int { return b.StartedAt.Compare(a.StartedAt) })
		var ds []time.Duration
		for _, rec := range recs[:min(len(recs), maxEstimateRuns)] {
			if d := rec.EndedAt.Sub(rec.StartedAt); d > 0 {
				ds = append(ds, d)
			}
		}
		if len(ds) == 0 {
			return 0
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
}
