package schedule

import (
	"testing"

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
