package schedule

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReadyGivesJobsWhoseDependenciesCompleted(t *testing.T) {
	// 0 and 1 have no dependencies; 2 needs 0; 3 needs 0 and 1; 4 needs 3.
	r := NewReady([][]int{nil, nil, {0}, {0, 1}, {3}})
	if diff := cmp.Diff([]int{0, 1}, r.Jobs()); diff != "" {
		t.Fatalf("at the start (-want +got):\n%s", diff)
	}
	r.Take(1)
	r.Take(0)
	if got := r.Jobs(); len(got) != 0 {
		t.Fatalf("after both started: %v", got)
	}
	if made := r.Complete(1); len(made) != 0 {
		t.Errorf("1 completed, 3 still needs 0: made %v ready", made)
	}
	if diff := cmp.Diff([]int{2, 3}, r.Complete(0)); diff != "" {
		t.Errorf("0 completed (-want +got):\n%s", diff)
	}
	r.Take(3)
	r.Again(3) // a rate limit sent it back
	r.Again(3)
	if diff := cmp.Diff([]int{2, 3}, r.Jobs()); diff != "" {
		t.Errorf("3 back, once, in graph order (-want +got):\n%s", diff)
	}
	if r.Pending(4) != 1 || r.Pending(2) != 0 {
		t.Errorf("pending: 4 has %d, 2 has %d; want 1 and 0", r.Pending(4), r.Pending(2))
	}
	// 3 fails: it never completes, and 4 is never ready.
	r.Take(3)
	r.Take(2)
	if got := r.Jobs(); len(got) != 0 {
		t.Errorf("after 3 failed: %v ready; 4 must wait on it for ever", got)
	}
}

func TestReadyJobsIsACopy(t *testing.T) {
	r := NewReady([][]int{nil, nil})
	js := r.Jobs()
	js[0] = 7
	r.Take(1)
	if diff := cmp.Diff([]int{0}, r.Jobs()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestReadyCriticalFirstStartsTheLongestRemainingPath(t *testing.T) {
	const m = time.Minute
	// 0 → 2 → 3 is the long chain (1+1+10 min); 1 is long alone (5 min);
	// 4 is short and free.
	deps := [][]int{nil, nil, {0}, {2}, nil}
	est := []time.Duration{m, 5 * m, m, 10 * m, m}
	r := NewReadyCriticalFirst(deps, est)
	if diff := cmp.Diff([]int{0, 1, 4}, r.Jobs()); diff != "" {
		t.Fatalf("at the start, 0 (12 min to the end) before 1 (5) before 4 (1) (-want +got):\n%s", diff)
	}
	r.Take(1)
	r.Again(1) // a rate limit sent it back: its place, not the end
	if diff := cmp.Diff([]int{0, 1, 4}, r.Jobs()); diff != "" {
		t.Errorf("1 back (-want +got):\n%s", diff)
	}
	// Graph order breaks ties, and unknown durations count as the mean of
	// the known: 1 (unknown, so 3 min) ties with 0 (3 min).
	r = NewReadyCriticalFirst([][]int{nil, nil, nil}, []time.Duration{3 * m, 0, m})
	if diff := cmp.Diff([]int{0, 1, 2}, r.Jobs()); diff != "" {
		t.Errorf("ties (-want +got):\n%s", diff)
	}
	// With no estimate at all the path is counted in jobs: the head of a
	// chain of three goes before two lone jobs listed earlier.
	r = NewReadyCriticalFirst([][]int{nil, nil, nil, {2}, {3}}, nil)
	if diff := cmp.Diff([]int{2, 0, 1}, r.Jobs()); diff != "" {
		t.Errorf("no estimates (-want +got):\n%s", diff)
	}
	r.Take(2)
	if diff := cmp.Diff([]int{3}, r.Complete(2)); diff != "" {
		t.Errorf("2 completed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{3, 0, 1}, r.Jobs()); diff != "" {
		t.Errorf("3 (two jobs to the end) before the lone ones (-want +got):\n%s", diff)
	}
}

// A cycle, which a valid graph never has, does not hang the path count.
func TestReadyCriticalFirstSurvivesACycle(t *testing.T) {
	r := NewReadyCriticalFirst([][]int{{1}, {0}, nil}, nil)
	if diff := cmp.Diff([]int{2}, r.Jobs()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Longest remaining path first is not better on every graph: here job 3,
// the longest, holds file f for 6 minutes while the two short chains that
// also write f wait (13 minutes on two slots; graph order takes 10).
// NewReadyPlanned simulates both and keeps graph order; on a graph where
// the long chain should go first, it goes first.
func TestReadyPlannedKeepsGraphOrderWhereItWins(t *testing.T) {
	const m = time.Minute
	f := Writes{Files: []string{"f"}}
	deps := [][]int{nil, nil, {0}, nil, {1}}
	dur := []time.Duration{3 * m, m, 2 * m, 6 * m, 3 * m}
	ws := []Writes{f, f, {}, f, {}}
	critical, _ := Simulate(deps, dur, ws, 2, NewReadyCriticalFirst(deps, dur))
	order, _ := Simulate(deps, dur, ws, 2, NewReady(deps))
	if critical != 13*m || order != 10*m {
		t.Fatalf("critical first %v, graph order %v; want 13m and 10m", critical, order)
	}
	if diff := cmp.Diff([]int{0, 1, 3}, NewReadyPlanned(deps, dur, ws, 2).Jobs()); diff != "" {
		t.Errorf("planned order (-want +got):\n%s", diff)
	}
	planned, _ := Simulate(deps, dur, ws, 2, NewReadyPlanned(deps, dur, ws, 2))
	if planned != order {
		t.Errorf("planned makespan %v, want graph order's %v", planned, order)
	}

	// Two lone jobs and a chain: the chain's head first.
	deps = [][]int{nil, nil, nil, {2}, {3}}
	dur = []time.Duration{10 * m, 10 * m, 10 * m, 10 * m, 10 * m}
	if diff := cmp.Diff([]int{2, 0, 1}, NewReadyPlanned(deps, dur, nil, 2).Jobs()); diff != "" {
		t.Errorf("planned order of a chain (-want +got):\n%s", diff)
	}
	if d, ok := Simulate([][]int{{1}, {0}}, []time.Duration{m, m}, nil, 1, NewReady([][]int{{1}, {0}})); ok {
		t.Errorf("a cycle simulated to an end at %v", d)
	}
}
