package pilot

import (
	"fmt"
	"sync"
)

// checkBudget refuses a cap the run's watcher cannot follow while the
// worker runs: a cap pilot could not hold must not pass for one it holds.
func (r *run) checkBudget() error {
	if r.task.MaxTokens == 0 && r.task.MaxCostUSD == 0 {
		return nil
	}
	var tokens, cost bool
	if uw, ok := r.watcher.(usageWatcher); ok {
		tokens, cost = uw.Reports()
	}
	switch {
	case r.task.MaxTokens > 0 && !tokens:
		return fmt.Errorf("pilot: the task caps tokens (MaxTokens %d), but runner %s reports no token usage while its worker runs: drop the cap, or cap the fanout's or graph's cost instead, which counts finished jobs", r.task.MaxTokens, r.runner.Name())
	case r.task.MaxCostUSD > 0 && !cost:
		return fmt.Errorf("pilot: the task caps cost (MaxCostUSD %g), but runner %s reports no cost while its worker runs: cap its tokens instead, or the fanout's or graph's cost, which counts finished jobs", r.task.MaxCostUSD, r.runner.Name())
	}
	return nil
}

// budget is the supervisor's check of the task's caps, nil without any.
func (r *run) budget() func() (string, bool) {
	if r.task.MaxTokens == 0 && r.task.MaxCostUSD == 0 {
		return nil
	}
	uw := r.watcher.(usageWatcher) // checkBudget made sure
	return func() (string, bool) {
		r.lineMu.Lock()
		u := uw.Usage()
		r.lineMu.Unlock()
		return overBudget(u, r.task.MaxTokens, r.task.MaxCostUSD)
	}
}

// overBudget says, with the usage as evidence, whether u is past the caps
// maxTokens and maxCost (zero: none).
func overBudget(u Usage, maxTokens int64, maxCost float64) (string, bool) {
	if n := u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens; maxTokens > 0 && n > maxTokens {
		return fmt.Sprintf("%d tokens used (%d input, %d output, %d cache read, %d cache write), past the task's MaxTokens %d",
			n, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, maxTokens), true
	}
	if maxCost > 0 && u.CostUSD != nil && *u.CostUSD > maxCost {
		return fmt.Sprintf("$%.4f spent, past the task's MaxCostUSD $%.4f", *u.CostUSD, maxCost), true
	}
	return "", false
}

// spending is what the finished jobs of a Fanout cost, held against its
// MaxCostUSD (max; zero: none). It is safe for concurrent use.
type spending struct {
	max   float64
	mu    sync.Mutex
	total float64
}

func (s *spending) add(u *Usage) {
	if s.max > 0 && u != nil && u.CostUSD != nil {
		s.mu.Lock()
		s.total += *u.CostUSD
		s.mu.Unlock()
	}
}

// over says, with the total as the reason, whether the spending reached
// its bound: then no job of what (a "fanout") starts.
func (s *spending) over(what string) (string, bool) {
	if s.max <= 0 {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.total < s.max {
		return "", false
	}
	return fmt.Sprintf("budget: the %s's finished jobs spent $%.4f of its MaxCostUSD $%.4f; no further job starts", what, s.total, s.max), true
}
