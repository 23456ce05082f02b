package cli

import (
	"sync"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/retry"
)

// outVerdict is a verdict as the commands print it: the attempt's
// pilot.Verdict, then what the layers above it add (the fanout's, the
// retries'), in the order of pilot-workers' verdict contract.
type outVerdict struct {
	pilot.Verdict
	Worktree      *pilot.WorktreeInfo `json:"worktree,omitempty"`
	Synthesized   bool                `json:"synthesized,omitempty"`
	Interrupted   bool                `json:"interrupted,omitempty"`
	Attempts      int                 `json:"attempts,omitempty"`
	ResumedFrom   string              `json:"resumed_from,omitempty"`
	Blocked       bool                `json:"blocked,omitempty"`
	BlockedReason string              `json:"blocked_reason,omitempty"`
	Skipped       string              `json:"skipped,omitempty"`
}

// jobVerdict is a fanout job's result, with its retries' when r has them.
func jobVerdict(j pilot.JobResult, r *retryResults, key string) outVerdict {
	v := outVerdict{Verdict: j.Verdict, Worktree: j.Worktree, Synthesized: j.Synthesized, Interrupted: j.Interrupted, Skipped: j.Skipped}
	if res, ok := r.get(key); ok {
		v.addRetry(res)
	}
	return v
}

// addRetry adds what the retry layer said of the task.
func (v *outVerdict) addRetry(r retry.Result) {
	v.Synthesized = v.Synthesized || r.Synthesized
	v.Interrupted = v.Interrupted || r.Interrupted
	v.Attempts, v.ResumedFrom = r.Attempts, r.ResumedFrom
	v.Blocked, v.BlockedReason = r.Blocked, r.BlockedReason
}

// retryResults keeps the retry layer's Result of each task, by Task.Key
// (retry.UniqueKeys makes the keys of a fanout's jobs unique): the layers
// above it pass the verdict alone. The zero value is ready; a nil one
// keeps nothing.
type retryResults struct {
	mu sync.Mutex
	m  map[string]retry.Result
}

// layer returns the retry layer over d with policy p, reporting to r.
func (r *retryResults) layer(d pilot.TaskDispatcher, p retry.Policy) *retry.Dispatcher {
	return &retry.Dispatcher{Dispatcher: d, Policy: p, OnResult: func(t pilot.Task, res retry.Result) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.m == nil {
			r.m = map[string]retry.Result{}
		}
		r.m[t.Key] = res
	}}
}

func (r *retryResults) get(key string) (retry.Result, bool) {
	if r == nil {
		return retry.Result{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res, ok := r.m[key]
	return res, ok
}
