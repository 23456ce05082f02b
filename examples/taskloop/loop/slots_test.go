package loop_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/taskloop/loop"
	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
)

// limited is a fake with a Limits capability, as *pilot.Dispatcher has:
// each provider's max_parallel.
type limited struct {
	*fake
	width map[string]int
}

func (l limited) Limits(t pilot.Task) pilot.Limits {
	return pilot.Limits{MaxParallel: l.width[t.Provider]}
}

// A provider's max_parallel bounds its stage attempts across the loop's
// tasks: with four independent tasks at once and "pi" (worker and
// selfcheck) at one, no two pi attempts run together; the attempts that
// wait say so, and every task completes.
func TestProviderMaxParallelBoundsStageAttempts(t *testing.T) {
	ws := workspace(t)
	for i := range 4 {
		addTask(t, ws, fmt.Sprintf("sim/0%d_t%d", i+1, i), fmt.Sprintf("src/t%d.go", i))
	}
	var mu sync.Mutex
	active := map[string]int{}
	most := map[string]int{}
	waited := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(waited) }) }
	first := true
	f := newFake(t, nil)
	f.act = func(ctx context.Context, c call, n int, pt pilot.Task) pilot.Verdict {
		mu.Lock()
		active[c.Provider]++
		most[c.Provider] = max(most[c.Provider], active[c.Provider])
		if c.Provider == "pi" && active["pi"] > 1 {
			release() // the bound is broken: nobody will wait
		}
		hold := c.Provider == "pi" && first
		first = first && !hold
		mu.Unlock()
		defer func() {
			mu.Lock()
			active[c.Provider]--
			mu.Unlock()
		}()
		if hold {
			// The first pi attempt runs until another one has had to
			// wait for its slot.
			select {
			case <-waited:
			case <-ctx.Done():
			}
		}
		return pilot.Verdict{}
	}
	l := newLoop(t, ws, limited{fake: f, width: map[string]int{"pi": 1}}, nil)
	l.MaxParallel = 4
	var waits []string
	l.OnEvent = func(e loop.Event) {
		if e.Type == loop.EventWaiting {
			waits = append(waits, e.Task+" "+e.Stage+": "+e.Reason)
			release()
		}
	}
	rep := run(t, l, "sim")
	for _, tr := range rep.Tasks {
		if tr.Status != "complete" {
			t.Errorf("task %s is %s (%s), want complete", tr.Name, tr.Status, tr.Reason)
		}
	}
	if most["pi"] != 1 {
		t.Errorf("at most %d pi attempts ran at once, want 1 (its max_parallel)", most["pi"])
	}
	if len(waits) == 0 {
		t.Fatal("no attempt waited for a slot of pi")
	}
	for _, w := range waits {
		if !strings.Contains(w, "waiting for a slot of provider pi: all 1 of its slots are running") {
			t.Errorf("waiting event %q does not say what it waits for", w)
		}
	}
	if got := f.count("sim/01_t0", taskfile.StageReview); got != 1 {
		t.Errorf("%d reviews of sim/01_t0, want 1", got)
	}
}
