package agents_test

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

func usageOf(t *testing.T, w pilot.Watcher) (pilot.Usage, bool, bool) {
	t.Helper()
	uw, ok := w.(interface {
		Reports() (bool, bool)
		Usage() pilot.Usage
	})
	if !ok {
		t.Fatalf("%T is no UsageWatcher", w)
	}
	tokens, cost := uw.Reports()
	return uw.Usage(), tokens, cost
}

func costOf(c float64) *float64 { return &c }

// The watchers of the CLIs whose streams report usage as they go say so
// while the worker runs, message by message, step by step; codex and
// gemini report it only at the end, and are no UsageWatcher.
func TestUsageWhileTheWorkerRuns(t *testing.T) {
	t.Run("pi", func(t *testing.T) {
		w := piWatcher(t)
		feed(w, piToolsTwo)
		u, tokens, cost := usageOf(t, w)
		if diff := cmp.Diff(pilot.Usage{InputTokens: 10, OutputTokens: 2, CostUSD: costOf(0.5)}, u); diff != "" || !tokens || !cost {
			t.Errorf("after one message: reports %v %v, usage (-want +got):\n%s", tokens, cost, diff)
		}
		feed(w, piStopText)
		u, _, _ = usageOf(t, w)
		if diff := cmp.Diff(pilot.Usage{InputTokens: 30, OutputTokens: 5, CacheReadTokens: 4, CacheWriteTokens: 1, CostUSD: costOf(0.75)}, u); diff != "" {
			t.Errorf("after two (-want +got):\n%s", diff)
		}
	})
	t.Run("claude", func(t *testing.T) {
		w := claudeWatcher(t)
		msg := func(id string, in, out int) string {
			return `{"type":"assistant","message":{"id":"` + id + `","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":` +
				strconv.Itoa(in) + `,"output_tokens":` + strconv.Itoa(out) + `,"cache_read_input_tokens":100,"cache_creation_input_tokens":10}}}`
		}
		feed(w, msg("m1", 5, 1), msg("m1", 5, 9), msg("m2", 2, 3))
		u, tokens, cost := usageOf(t, w)
		if diff := cmp.Diff(pilot.Usage{InputTokens: 7, OutputTokens: 12, CacheReadTokens: 200, CacheWriteTokens: 20}, u); diff != "" || !tokens || cost {
			t.Errorf("reports %v %v (want tokens, not cost), usage (-want +got):\n%s", tokens, cost, diff)
		}
	})
	t.Run("opencode", func(t *testing.T) {
		w := opencodeWatcher(t)
		step := `{"type":"step_finish","sessionID":"s","part":{"reason":"tool-calls","cost":0.5,"tokens":{"input":1,"output":2,"cache":{"read":3,"write":4}}}}`
		feed(w, step)
		u, tokens, cost := usageOf(t, w)
		if diff := cmp.Diff(pilot.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, CostUSD: costOf(0.5)}, u); diff != "" || !tokens || !cost {
			t.Errorf("after a step: reports %v %v, usage (-want +got):\n%s", tokens, cost, diff)
		}
		feed(w, step)
		if u, _, _ := usageOf(t, w); u.OutputTokens != 4 || u.CostUSD == nil || *u.CostUSD != 1 {
			t.Errorf("after two steps: %+v", u)
		}
	})
	codex := agentWatcher(t, agents.CodexRunner{}, agentAttempt(t, agents.RunnerCodex, pilot.Provider{}, pilot.ModeCode, "", "hi", ""))
	for name, w := range map[string]pilot.Watcher{"codex": codex, "gemini": geminiWatcher(t)} {
		if _, ok := w.(interface {
			Reports() (bool, bool)
			Usage() pilot.Usage
		}); ok {
			t.Errorf("%s's watcher is a UsageWatcher, but its stream reports usage only at the end", name)
		}
	}
}
