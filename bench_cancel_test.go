package pilot_test

import (
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/tools/bench/measure"
)

// BenchmarkCancelTree (P5) measures the time from cancelling a dispatch to
// Dispatch's return with the process tree gone, when the worker and its two
// grandchildren (one in a session of its own) ignore SIGTERM: the grace
// period plus pilot's own cost, which over-grace-ms reports (goal: at most
// 100 ms).
func BenchmarkCancelTree(b *testing.B) {
	const grace = 500 * time.Millisecond
	keepSupervisor(b)
	d := testDispatcher(b, fakeProvider(b, "tree", measure.CancelScript...))
	d.Grace = grace
	t := pilot.Task{Provider: "tree", Mode: pilot.ModeReview, Prompt: "x"}
	var total time.Duration
	for b.Loop() {
		took, err := measure.CancelTree(d, t)
		if err != nil {
			b.Fatal(err)
		}
		total += took
	}
	mean := total / time.Duration(b.N)
	b.ReportMetric(float64(mean)/float64(time.Millisecond), "ms/cancel")
	b.ReportMetric(float64(mean-grace)/float64(time.Millisecond), "over-grace-ms")
}
