package pilot

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/size"
)

// A Fanout job's memory events count against its share of the budget, and
// its verdict (its tree is gone) gives back all but its expectation.
func TestFanoutMemoryFollowsTheJobsEvents(t *testing.T) {
	var seen []string
	m := (&Fanout{MemoryBudget: 250 * size.MiB}).memory()
	job := Job{Task: Task{Provider: "p", MemoryLimit: 100 * size.MiB, Observer: func(e Event) { seen = append(seen, e.Type) }}}
	hold, why := m.tryAcquire(job)
	if hold == nil {
		t.Fatalf("an empty budget kept the first job waiting: %s", why)
	}
	followed := m.follow(job, hold)
	fits := func(n size.Bytes) bool {
		h, _ := m.budget.TryAcquire(int64(n))
		h.Release()
		return h != nil
	}
	if !fits(150 * size.MiB) {
		t.Fatal("100 MiB expected of 250: 150 more did not fit")
	}
	followed.Task.Observer(Event{Type: event.Memory, Memory: &size.Tree{RSSBytes: int64(200 * size.MiB)}})
	if fits(100 * size.MiB) {
		t.Error("the tree holds 200 MiB of 250: 100 more fit")
	}
	followed.Task.Observer(Event{Type: event.Verdict, Verdict: &Verdict{}})
	if !fits(150*size.MiB) || fits(151*size.MiB) {
		t.Error("after the verdict the job should count its expected 100 MiB, no more")
	}
	hold.Release()
	if !fits(250 * size.MiB) {
		t.Error("a released job still counts")
	}
	if len(seen) != 2 {
		t.Errorf("the task's own observer saw %v, want both events", seen)
	}
}

// dispatchFunc is a TaskDispatcher from a function.
type dispatchFunc func(ctx context.Context, t Task) (Verdict, error)

func (f dispatchFunc) Dispatch(ctx context.Context, t Task) (Verdict, error) { return f(ctx, t) }

// A Fanout with a memory budget follows its jobs' memory samples, so its
// dispatches sample every heartbeat (a steady tree without a limit is
// sampled at every fifth otherwise); one without a budget does not ask.
func TestFanoutBudgetAsksForEverySample(t *testing.T) {
	for _, tt := range []struct {
		budget size.Bytes
		want   bool
	}{{0, false}, {size.GiB, true}} {
		var got atomic.Int32
		f := &Fanout{MemoryBudget: tt.budget, Dispatcher: dispatchFunc(func(ctx context.Context, _ Task) (Verdict, error) {
			if ctx.Value(memoryFollowedKey{}) != nil {
				got.Add(1)
			}
			return Verdict{Verdict: Completed}, nil
		})}
		if _, err := f.Run(context.Background(), []Job{{Task: Task{Provider: "p"}}, {Task: Task{Provider: "p"}}}); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int32{true: 2}[tt.want]; got.Load() != want {
			t.Errorf("budget %v: %d of 2 jobs marked followed, want %d", tt.budget, got.Load(), want)
		}
	}
}
