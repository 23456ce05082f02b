package schedule

import "slices"

// Ready holds which of a graph's jobs have every dependency complete and
// have not been taken yet, in graph order: the jobs Scheduler.Run, and
// contrib/temporal's workflow across many machines, try to start, first
// to last. Jobs are named by their index in the graph. It reads no clock
// and no map, so a replayed workflow picks as the run did.
type Ready struct {
	dependents [][]int // each job's, ascending (NewReady adds them in graph order)
	pending    []int   // each job's dependencies not yet complete
	ready      []int   // ascending
}

// NewReady returns the readiness of a graph whose job i depends on the
// jobs deps[i]. The jobs without dependencies are ready.
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

// Jobs returns a copy of the ready jobs, in graph order.
func (r *Ready) Jobs() []int { return slices.Clone(r.ready) }

// Take removes job i from the ready jobs: it started, or ended without
// starting.
func (r *Ready) Take(i int) {
	if at, ok := slices.BinarySearch(r.ready, i); ok {
		r.ready = slices.Delete(r.ready, at, at+1)
	}
}

// Again makes job i, taken before, ready again: it waits for its turn
// once more (a provider's rate limit sent it back).
func (r *Ready) Again(i int) {
	if at, ok := slices.BinarySearch(r.ready, i); !ok {
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
