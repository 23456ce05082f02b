package measure

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pilotworkers/pilot/schedule"
)

// Two lone jobs and a chain of three on two slots: graph order starts the
// lone jobs first and the chain runs alone after them; critical path first
// starts the chain's head at once, which ends the graph at its bound.
func TestMakespanCriticalFirstBeatsGraphOrderOnAChain(t *testing.T) {
	const m = time.Minute
	// 0 and 1 are short and free; 2 → 3 → 4 is a chain of 10 min jobs.
	g := SimGraph{
		Deps:   [][]int{nil, nil, nil, {2}, {3}},
		Dur:    []time.Duration{10 * m, 10 * m, 10 * m, 10 * m, 10 * m},
		Writes: make([]schedule.Writes, 5),
	}
	graphOrder := g.Makespan(1, schedule.NewReady(g.Deps))
	critical := g.Makespan(1, schedule.NewReadyCriticalFirst(g.Deps, g.Dur))
	if graphOrder != 50*m || critical != 50*m {
		t.Errorf("one slot: %v and %v, want 50m either way", graphOrder, critical)
	}
	graphOrder = g.Makespan(2, schedule.NewReady(g.Deps))
	critical = g.Makespan(2, schedule.NewReadyCriticalFirst(g.Deps, g.Dur))
	if graphOrder != 40*m || critical != 30*m || g.LowerBound(2) != 30*m {
		t.Errorf("two slots: graph order %v, critical first %v, bound %v; want 40m, 30m, 30m", graphOrder, critical, g.LowerBound(2))
	}
}

// Write sets hold in the simulation: two jobs that write one file never
// overlap, so two of them on two slots take twice as long.
func TestMakespanKeepsWriteSetsApart(t *testing.T) {
	g := SimGraph{
		Deps:   [][]int{nil, nil},
		Dur:    []time.Duration{time.Minute, time.Minute},
		Writes: []schedule.Writes{{Files: []string{"a"}}, {Files: []string{"a"}}},
	}
	if got := g.Makespan(2, schedule.NewReady(g.Deps)); got != 2*time.Minute {
		t.Errorf("makespan %v, want 2m", got)
	}
}

func TestRandomGraphsNeverBeatTheirBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		g := RandomGraph(rng, 20+rng.IntN(60), 0.3)
		for _, slots := range []int{2, 8} {
			lb := g.LowerBound(slots)
			for _, r := range []*schedule.Ready{schedule.NewReady(g.Deps), schedule.NewReadyCriticalFirst(g.Deps, g.Dur)} {
				if got := g.Makespan(slots, r); got < lb {
					t.Fatalf("makespan %v under the bound %v", got, lb)
				}
			}
		}
	}
}
