package measure

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/pilotworkers/pilot/schedule"
)

// A SimGraph is a graph of jobs for Makespan: job i depends on Deps[i],
// runs Dur[i] and writes Writes[i].
type SimGraph struct {
	Deps   [][]int
	Dur    []time.Duration
	Writes []schedule.Writes
}

// RandomGraph returns a graph of n jobs whose dependencies point at
// earlier jobs (each job depends on each of the 6 before it with
// probability p), whose write sets are 0 to 2 of 3n/4 files (a few share
// one) and whose durations are heavy-tailed: lognormal, median 5 minutes,
// with one job in ten fifteen times that.
func RandomGraph(rng *rand.Rand, n int, p float64) SimGraph {
	g := SimGraph{Deps: make([][]int, n), Dur: make([]time.Duration, n), Writes: make([]schedule.Writes, n)}
	files := max(1, 3*n/4)
	for i := range n {
		for d := max(0, i-6); d < i; d++ {
			if rng.Float64() < p {
				g.Deps[i] = append(g.Deps[i], d)
			}
		}
		mins := 5 * math.Exp(rng.NormFloat64())
		if rng.IntN(10) == 0 {
			mins *= 15
		}
		g.Dur[i] = time.Duration(mins * float64(time.Minute))
		var fs []string
		for range rng.IntN(3) {
			f := fmt.Sprintf("f%03d", rng.IntN(files))
			if !slices.Contains(fs, f) {
				fs = append(fs, f)
			}
		}
		slices.Sort(fs)
		g.Writes[i] = schedule.Writes{Files: fs}
	}
	return g
}

// LowerBound is the shortest any schedule of g on slots can take: its
// critical path, or its total work spread over every slot, whichever is
// longer (write sets only lengthen a schedule).
func (g SimGraph) LowerBound(slots int) time.Duration {
	n := len(g.Dur)
	finish := make([]time.Duration, n)
	var critical, total time.Duration
	for i := range n { // dependencies point at earlier jobs
		var start time.Duration
		for _, d := range g.Deps[i] {
			start = max(start, finish[d])
		}
		finish[i] = start + g.Dur[i]
		critical = max(critical, finish[i])
		total += g.Dur[i]
	}
	return max(critical, total/time.Duration(slots))
}

// Makespan simulates schedule's rules on g with slots jobs at once, on a
// simulated clock, trying the ready jobs in ready's order
// (schedule.Simulate). It returns when the last job ends.
func (g SimGraph) Makespan(slots int, ready *schedule.Ready) time.Duration {
	d, ok := schedule.Simulate(g.Deps, g.Dur, g.Writes, slots, ready)
	if !ok {
		panic("measure: a simulated graph stalled") // RandomGraph's never do
	}
	return d
}
