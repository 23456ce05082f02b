package schedule_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/schedule"
)

// benchGraph is 10,000 jobs with 50,000 dependency edges (each on earlier
// jobs) and write sets over 500 files.
func benchGraph(b *testing.B) schedule.Graph {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, edges = 10000, 50000
	g := schedule.Graph{Workdir: b.TempDir(), Jobs: make([]schedule.Job, n)}
	for i := range g.Jobs {
		g.Jobs[i] = schedule.Job{ID: fmt.Sprintf("j%05d", i), Task: pilot.Task{Provider: "p", Mode: pilot.ModeCode, Prompt: "x"},
			WriteSet: []string{fmt.Sprintf("src/f%03d.go", rng.IntN(500))}}
	}
	seen := map[[2]int]bool{}
	for e := 0; e < edges; {
		i := 1 + rng.IntN(n-1)
		d := rng.IntN(i)
		if seen[[2]int{i, d}] {
			continue
		}
		seen[[2]int{i, d}] = true
		g.Jobs[i].Deps = append(g.Jobs[i].Deps, g.Jobs[d].ID)
		e++
	}
	return g
}

// BenchmarkSchedule10kJobs is the scheduler's own cost over a no-op
// Dispatch: a graph of 10,000 jobs and 50,000 edges at parallelism 64,
// in decisions (job starts) per second; compare BenchmarkGraphWalk10kJobs.
func BenchmarkSchedule10kJobs(b *testing.B) {
	g := benchGraph(b)
	noop := pilottest.DispatchFunc(func(_ context.Context, t pilot.Task) (pilot.Verdict, error) {
		return pilot.Verdict{Verdict: pilot.Completed}, nil
	})
	s := &schedule.Scheduler{Dispatcher: noop, MaxParallel: 64}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rs, err := s.Run(context.Background(), g)
		if err != nil || schedule.GroupStatus(rs) != "complete" {
			b.Fatalf("%v %s", err, schedule.GroupStatus(rs))
		}
	}
	b.ReportMetric(float64(len(g.Jobs)*b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkGraphWalk10kJobs is the baseline: a plain topological walk of
// the same graph (Kahn's algorithm over ids), no scheduling.
func BenchmarkGraphWalk10kJobs(b *testing.B) {
	g := benchGraph(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		index := make(map[string]int, len(g.Jobs))
		for i, j := range g.Jobs {
			index[j.ID] = i
		}
		indeg := make([]int, len(g.Jobs))
		out := make([][]int, len(g.Jobs))
		for i, j := range g.Jobs {
			for _, d := range j.Deps {
				k := index[d]
				out[k] = append(out[k], i)
				indeg[i]++
			}
		}
		var queue []int
		for i, d := range indeg {
			if d == 0 {
				queue = append(queue, i)
			}
		}
		walked := 0
		for len(queue) > 0 {
			i := queue[0]
			queue = queue[1:]
			walked++
			for _, k := range out[i] {
				if indeg[k]--; indeg[k] == 0 {
					queue = append(queue, k)
				}
			}
		}
		if walked != len(g.Jobs) {
			b.Fatal("cycle")
		}
	}
	b.ReportMetric(float64(len(g.Jobs)*b.N)/b.Elapsed().Seconds(), "decisions/s")
}
