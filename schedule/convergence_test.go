package schedule_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/schedule"
)

// The seed's DispatcherConvergenceSimulationTest, its scheduling part: alpha
// and beta run side by side, join waits for both, and conflict, which
// writes alpha's file under another spelling ("./src/alpha.go"), never runs
// beside alpha; every job completes.
func TestConvergenceParallelJoinAndConflict(t *testing.T) {
	ws := t.TempDir()
	var mu sync.Mutex
	active := map[string]bool{}
	most := 0
	var overlaps, order []string
	both := make(chan struct{})
	s := &schedule.Scheduler{Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		mu.Lock()
		active[tk.Label] = true
		most = max(most, len(active))
		if active["alpha"] && active["conflict"] {
			overlaps = append(overlaps, tk.Label)
		}
		if active["alpha"] && active["beta"] {
			close(both)
		}
		order = append(order, tk.Label)
		mu.Unlock()
		if tk.Label == "alpha" || tk.Label == "beta" {
			<-both // alpha and beta must run at once
		}
		mu.Lock()
		delete(active, tk.Label)
		mu.Unlock()
		return ok(ctx, tk)
	})}
	write := func(j schedule.Job, files ...string) schedule.Job {
		j.WriteSet = files
		return j
	}
	rs := run(t, s, schedule.Graph{Workdir: ws, Jobs: []schedule.Job{
		write(job("alpha"), "src/alpha.go"),
		write(job("beta"), "src/beta.go"),
		write(job("join", "alpha", "beta"), "src/join.go"),
		write(job("conflict"), "./src/alpha.go"),
	}})
	want := map[string]string{"alpha": "alpha: complete", "beta": "beta: complete", "join": "join: complete", "conflict": "conflict: complete"}
	if diff := cmp.Diff(want, statuses(rs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if most < 2 || len(overlaps) > 0 {
		t.Errorf("at most %d at once, overlaps %v; want alpha and beta together, never alpha and conflict", most, overlaps)
	}
	if order[len(order)-1] != "join" && order[len(order)-1] != "conflict" {
		t.Errorf("order %v: join must follow alpha and beta", order)
	}
}
