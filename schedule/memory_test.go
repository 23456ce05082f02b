package schedule_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/schedule"
	"github.com/pilotworkers/pilot/size"
)

// A memory budget that fits two jobs' expected peaks runs at most two at
// once, and counts what a running tree holds when that is more: with a
// holding 240 MiB of 250, c waits though only a runs, until a's tree
// shrinks. Every job finishes.
//
// The order is forced without timing: a grows once c is told it waits
// (a and b were let in first), b ends once a has grown, b's end makes d
// ready, and d is told it waits for memory in the very pass that finds c
// still does not fit; only then does a shrink.
func TestAMemoryBudgetCountsWhatTheTreesHold(t *testing.T) {
	mib := func(n int64) *size.Tree { return &size.Tree{RSSBytes: n << 20} }
	aGrow, aGrew, aShrink := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var aHolds240 atomic.Bool
	var running, most atomic.Int32
	s := &schedule.Scheduler{
		MemoryBudget: 250 * size.MiB,
		Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			switch tk.Label {
			case "a":
				<-aGrow
				aHolds240.Store(true)
				tk.Observer(pilot.Event{Type: event.Memory, Memory: mib(240)})
				close(aGrew)
				<-aShrink
				aHolds240.Store(false)
				tk.Observer(pilot.Event{Type: event.Memory, Memory: mib(50)})
			case "b":
				<-aGrew
			case "c":
				if aHolds240.Load() {
					t.Error("c started while a held 240 MiB of the 250 MiB budget")
				}
			}
			return ok(ctx, tk)
		}),
	}
	var deferred []string
	var grow, shrink sync.Once
	s.OnEvent = func(e schedule.Event) {
		if e.Type != schedule.EventDeferred {
			return
		}
		if !e.ForMemory || !strings.HasPrefix(e.Reason, "waiting for memory: ") {
			t.Errorf("deferred %s: %q (for memory %v); want a wait for memory", e.Job, e.Reason, e.ForMemory)
		}
		deferred = append(deferred, e.Job+": "+e.Reason)
		switch e.Job {
		case "c":
			grow.Do(func() { close(aGrow) })
		case "d":
			shrink.Do(func() { close(aShrink) })
		}
	}
	g := schedule.Graph{Jobs: []schedule.Job{job("a"), job("b"), job("c"), job("d", "b")}}
	for i := range g.Jobs {
		g.Jobs[i].Task.MemoryLimit = 100 * size.MiB // each expects 100 MiB
	}
	rs := run(t, s, g)
	for _, r := range rs {
		if r.Status != schedule.StatusComplete {
			t.Errorf("%s", r)
		}
	}
	if most.Load() > 2 {
		t.Errorf("%d jobs ran at once; the budget fits 2", most.Load())
	}
	want := []string{
		"c: waiting for memory: 2 running job(s) count 200MiB of the 250MiB budget, and this one expects 100MiB",
		"d: waiting for memory: 1 running job(s) count 240MiB of the 250MiB budget, and this one expects 100MiB",
	}
	if len(deferred) < 2 || deferred[0] != want[0] || deferred[1] != want[1] {
		t.Errorf("deferred events:\n%s\nwant first:\n%s", strings.Join(deferred, "\n"), strings.Join(want, "\n"))
	}
}
