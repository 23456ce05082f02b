package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/schedule"
)

// statusInterrupted is the status schedule prints for a job that Ctrl-C
// (or SIGTERM) stopped, running or not yet started, as fanout says
// "interrupted": the library's result is failed, with the run's context
// ended.
const statusInterrupted schedule.Status = "interrupted"

// scheduleNow and scheduleAfter are the scheduler's clock, for the waits
// for a provider's rate limit; nil means real time. Tests set them.
var (
	scheduleNow   func() time.Time
	scheduleAfter func(time.Duration) <-chan time.Time
)

// limit is a graph job's timeout or idle_timeout as the file gives it: a
// number of seconds (90, 1.5) or a string --timeout takes ("30s", "5m",
// "90"); loadGraph checks it.
type limit string

func (l *limit) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*l = limit(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("timeout and idle_timeout take a number of seconds or a duration such as \"30s\", got %s", b)
	}
	*l = limit(n)
	return nil
}

// duration is l as a duration, 0 when it is not given; the parsing is
// --timeout's.
func (l limit) duration() (time.Duration, error) {
	var d time.Duration
	if l == "" {
		return 0, nil
	}
	err := seconds{&d}.Set(string(l))
	return d, err
}

// interrupted reports whether r is a job the run's end (ctx done) stopped:
// one not started, or one whose dispatch was cancelled.
func interrupted(ctx context.Context, r schedule.Result) bool {
	return r.Interrupted || ctx.Err() != nil && r.Status == schedule.StatusFailed && r.Verdict.FailureClass == pilot.FailCancelled
}

// jobAttempts numbers the dispatches of each job of a schedule (by
// Task.Key, the job's id), the first and those after the job waited for
// its provider's rate limit: each dispatch's Task.Lineage says its number
// and the record before it, for its record and the --log records (a
// pilotslog.Dispatcher under it numbers from there). It counts the
// verdicts of each job's dispatches, so that a retry layer under it would
// have its attempts counted too.
type jobAttempts struct {
	next pilot.TaskDispatcher

	mu   sync.Mutex
	n    map[string]int    // verdicts so far
	last map[string]string // the last verdict's record
}

func (a *jobAttempts) Dispatch(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
	key := t.Key
	a.mu.Lock()
	if a.n == nil {
		a.n, a.last = map[string]int{}, map[string]string{}
	}
	if t.Lineage == (pilot.Lineage{}) {
		t.Lineage = pilot.Lineage{Key: key, Attempt: a.n[key] + 1, PreviousRecord: a.last[key]}
		if t.Resume != "" && a.last[key] != "" {
			t.Lineage.ResumedFrom = a.last[key] // the scheduler resumes the limited session
		}
	}
	a.mu.Unlock()
	next := t.Observer
	t.Observer = func(e pilot.Event) {
		if e.Verdict != nil {
			a.mu.Lock()
			a.n[key]++
			a.last[key] = e.Verdict.Record
			a.mu.Unlock()
		}
		if next != nil {
			next(e)
		}
	}
	return a.next.Dispatch(ctx, t)
}

// Unwrap returns the dispatcher it numbers the dispatches of.
func (a *jobAttempts) Unwrap() pilot.TaskDispatcher { return a.next }

// attempts is the number of verdicts job id's dispatches came to.
func (a *jobAttempts) attempts(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[id]
}

// depState says what became of a dependency a job waits on, after its
// id: "a failed", "a is blocked", "a waits on b".
func depState(v scheduledVerdict) string {
	switch v.Status {
	case schedule.StatusFailed:
		return v.ID + " failed"
	case statusInterrupted:
		return v.ID + " was interrupted"
	case schedule.StatusBlocked:
		return v.ID + " is blocked"
	case schedule.StatusExternalActive:
		return v.ID + " runs in another pilot"
	case schedule.StatusSkipped:
		return v.ID + " was skipped for the budget"
	case schedule.StatusWaiting:
		return v.ID + " waits on " + strings.Join(v.WaitingOn, ", ")
	}
	return v.ID + " is " + string(v.Status)
}

// waitingReasons fills the waiting_reason of every waiting job of out:
// "waiting on c because c failed".
func waitingReasons(out []scheduledVerdict) {
	byID := map[string]scheduledVerdict{}
	for _, v := range out {
		byID[v.ID] = v
	}
	for i, v := range out {
		if v.Status != schedule.StatusWaiting || len(v.WaitingOn) == 0 {
			continue
		}
		var why []string
		for _, d := range v.WaitingOn {
			why = append(why, depState(byID[d]))
		}
		out[i].WaitingReason = "waiting on " + strings.Join(v.WaitingOn, ", ") + " because " + strings.Join(why, " and ")
	}
}

// scheduleProgress shows the scheduler's decisions in the table: a job
// given its slot, waiting for one (and why), for its provider's rate
// limit, or for a dependency that ended without completing. index is each
// job's row, dependents the rows of the jobs that depend on each job, and
// maxParallel --max-parallel.
func scheduleProgress(ctx context.Context, prog *progress, index map[string]int, dependents map[string][]int, maxParallel int, e schedule.Event) {
	i, ok := index[e.Job]
	if !ok {
		return
	}
	switch e.Type {
	case schedule.EventSelected:
		prog.selected(i)
	case schedule.EventDeferred:
		why := e.Reason
		if e.Conflict == "" && !e.ForMemory && maxParallel > 0 {
			why = fmt.Sprintf("waiting for a slot (--max-parallel %d)", maxParallel)
		}
		prog.waiting(i, why)
	case schedule.EventGated:
		prog.gated(i, e.Until)
	case schedule.EventDone:
		st := schedule.Status(e.Reason)
		if st == schedule.StatusFailed && ctx.Err() != nil {
			st = statusInterrupted
		}
		prog.ended(i, st)
		if st != schedule.StatusComplete {
			for _, k := range dependents[e.Job] {
				prog.waiting(k, "waiting on "+e.Job+" because "+depState(scheduledVerdict{ID: e.Job, Status: st}))
			}
		}
	}
}
