package schedule

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Ready holds which of a graph's jobs have every dependency complete and
// have not been taken yet, in the order they are tried: the jobs
// Scheduler.Run, and contrib/temporal's workflow across many machines,
// try to start, first to last. Jobs are named by their index in the graph.
// It reads no clock and no map, so a replayed workflow picks as the run
// did.
type Ready struct {
	dependents [][]int // each job's, ascending (NewReady adds them in graph order)
	pending    []int   // each job's dependencies not yet complete
	ready      []int   // in r.before's order
	// path is each job's longest remaining path (nil: graph order).
	path []float64
}

// NewReady returns the readiness of a graph whose job i depends on the
// jobs deps[i], tried in graph order. The jobs without dependencies are
// ready.
func NewReady(deps [][]int) *Ready {
	r := &Ready{dependents: make([][]int, len(deps)), pending: make([]int, len(deps))}
	for i, ds := range deps {
		r.pending[i] = len(ds)
		for _, d := range ds {
			r.dependents[d] = append(r.dependents[d], i)
		}
		if len(ds) == 0 {
			r.ready = append(r.ready, i)
		}
	}
	return r
}

// NewReadyCriticalFirst is NewReady with the ready jobs tried longest
// remaining path first: a job's path is its expected duration est[i] plus
// the longest path among its dependents, so the job the graph's end waits
// on longest starts first; graph order breaks ties. An unknown duration
// (zero or less) counts as the mean of the known ones, or as one unit when
// none is known, which makes the path the number of jobs on it.
func NewReadyCriticalFirst(deps [][]int, est []time.Duration) *Ready {
	r := NewReady(deps)
	r.path = remainingPaths(r.dependents, est)
	slices.SortFunc(r.ready, r.before)
	return r
}

// NewReadyPlanned is the readiness of the graph in whichever of two
// orders, longest remaining path first (NewReadyCriticalFirst) or graph
// order (NewReady), finishes the graph sooner when its jobs take est
// (unknown ones as NewReadyCriticalFirst counts them) and run with writes
// on slots at once (Simulate); critical path first when they tie. A
// priority order is not better on every graph (a long job started first
// can hold a file, or a slot, that a shorter chain needed), so the plan
// keeps graph order where, by the estimates, it wins. slots 0 or less,
// or more than the jobs, is one per job.
func NewReadyPlanned(deps [][]int, est []time.Duration, writes []Writes, slots int) *Ready {
	critical := NewReadyCriticalFirst(deps, est)
	if slots <= 0 || slots > len(deps) {
		slots = len(deps)
	}
	dur := make([]time.Duration, len(deps))
	for i, c := range costs(est, len(deps)) {
		dur[i] = max(1, time.Duration(c))
	}
	sim := func(r *Ready) (time.Duration, bool) { return Simulate(deps, dur, writes, slots, r) }
	c, cok := sim(NewReadyCriticalFirst(deps, est))
	o, ook := sim(NewReady(deps))
	if ook && (!cok || o < c) {
		return NewReady(deps)
	}
	return critical
}

// Simulate runs a graph whose job i depends on deps[i], takes dur[i] and
// writes writes[i] (nil: nothing) on a simulated clock, slots at a time,
// by the scheduler's rules: whenever a job ends the ready jobs are tried
// in r's order and each starts unless the slots are full or a running
// job's write set overlaps its own. It returns when the last job ended,
// and false when the graph cannot finish (a cycle). It consumes r.
func Simulate(deps [][]int, dur []time.Duration, writes []Writes, slots int, r *Ready) (time.Duration, bool) {
	n := len(deps)
	ws := func(i int) Writes {
		if i < len(writes) {
			return writes[i]
		}
		return Writes{}
	}
	var w Writers
	ends := make([]time.Duration, n)
	var running []int
	var now time.Duration
	name := func(i int) string { return fmt.Sprint(i) }
	for done := 0; done < n; done++ {
		// r.ready in place: a started job leaves it, a held one stays.
		for at := 0; at < len(r.ready) && len(running) < max(slots, 1); {
			i := r.ready[at]
			if k, _ := w.Conflict(ws(i), name); k >= 0 {
				at++
				continue
			}
			r.ready = slices.Delete(r.ready, at, at+1)
			w.Start(i, ws(i))
			ends[i] = now + dur[i]
			running = append(running, i)
		}
		if len(running) == 0 {
			return now, false
		}
		// The next job to end: the earliest, then the first in graph order.
		next := slices.MinFunc(running, func(a, b int) int {
			return cmp.Or(cmp.Compare(ends[a], ends[b]), cmp.Compare(a, b))
		})
		now = ends[next]
		running = slices.DeleteFunc(running, func(i int) bool { return i == next })
		w.Finish(next, ws(next))
		r.Complete(next)
	}
	return now, true
}

// remainingPaths returns each job's longest path to the graph's end, its
// own expected duration included (see NewReadyCriticalFirst). A job on a
// cycle, which a valid graph has none of, counts its own duration only.
func remainingPaths(dependents [][]int, est []time.Duration) []float64 {
	n := len(dependents)
	cost := costs(est, n)
	path := make([]float64, n)
	state := make([]byte, n) // 0 new, 1 on the stack, 2 done
	type frame struct{ job, next int }
	for root := range n {
		if state[root] != 0 {
			continue
		}
		stack := []frame{{root, 0}}
		state[root] = 1
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next < len(dependents[f.job]) {
				d := dependents[f.job][f.next]
				f.next++
				if state[d] == 0 {
					state[d] = 1
					stack = append(stack, frame{d, 0})
				}
				continue
			}
			longest := 0.0
			for _, d := range dependents[f.job] {
				if state[d] == 2 && path[d] > longest {
					longest = path[d]
				}
			}
			path[f.job] = cost[f.job] + longest
			state[f.job] = 2
			stack = stack[:len(stack)-1]
		}
	}
	return path
}

// costs returns the n jobs' expected durations: est[i] when known (more
// than zero), else the mean of the known ones, or 1 when none is known.
func costs(est []time.Duration, n int) []float64 {
	var known float64
	var count int
	for _, d := range est {
		if d > 0 {
			known += float64(d)
			count++
		}
	}
	unknown := 1.0
	if count > 0 {
		unknown = known / float64(count)
	}
	cost := make([]float64, n)
	for i := range cost {
		cost[i] = unknown
		if i < len(est) && est[i] > 0 {
			cost[i] = float64(est[i])
		}
	}
	return cost
}

// before orders two ready jobs: the longer remaining path first (with
// paths), then graph order.
func (r *Ready) before(a, b int) int {
	if r.path != nil {
		if c := cmp.Compare(r.path[b], r.path[a]); c != 0 {
			return c
		}
	}
	return cmp.Compare(a, b)
}

// Jobs returns a copy of the ready jobs, in the order they are tried.
func (r *Ready) Jobs() []int { return slices.Clone(r.ready) }

// Take removes job i from the ready jobs: it started, or ended without
// starting.
func (r *Ready) Take(i int) {
	if at, ok := slices.BinarySearchFunc(r.ready, i, r.before); ok {
		r.ready = slices.Delete(r.ready, at, at+1)
	}
}

// Again makes job i, taken before, ready again: it waits for its turn
// once more (a provider's rate limit sent it back).
func (r *Ready) Again(i int) {
	if at, ok := slices.BinarySearchFunc(r.ready, i, r.before); !ok {
		r.ready = slices.Insert(r.ready, at, i)
	}
}

// Complete records that job i completed, and returns the dependents it
// made ready, in graph order. A job fails by not completing: its
// dependents are never ready.
func (r *Ready) Complete(i int) []int {
	var made []int
	for _, d := range r.dependents[i] {
		if r.pending[d]--; r.pending[d] == 0 {
			r.Again(d)
			made = append(made, d)
		}
	}
	return made
}

// Pending reports how many of job i's dependencies have not completed.
func (r *Ready) Pending(i int) int { return r.pending[i] }
