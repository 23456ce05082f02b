package pilot_test

import (
	"bytes"
	"context"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/supervise"
	"github.com/pilotworkers/pilot/tools/bench/measure"
)

const (
	fanoutBenchJobs     = 1000
	fanoutBenchParallel = 64
)

func keepSupervisor(b *testing.B) {
	supervise.SetLinger(time.Minute)
	b.Cleanup(func() {
		supervise.SetLinger(0)
		supervise.Shutdown(context.Background())
	})
}

// BenchmarkFanout1000 runs 1000 trivial jobs (/bin/echo) through Fanout,
// 64 at a time; one op is the whole fanout.
func BenchmarkFanout1000(b *testing.B) {
	keepSupervisor(b)
	d := testDispatcher(b, pilot.Provider{Name: "echo", Runner: "command", Argv: []string{"/bin/echo", "ok"}})
	wd := b.TempDir()
	jobs := make([]pilot.Job, fanoutBenchJobs)
	for i := range jobs {
		jobs[i] = pilot.Job{Task: pilot.Task{Provider: "echo", Mode: pilot.ModeReview, Prompt: "x", Workdir: wd}}
	}
	f := &pilot.Fanout{Dispatcher: d, MaxParallel: fanoutBenchParallel}
	run := func() {
		vs, err := f.Run(context.Background(), jobs)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range vs {
			if v := r.Verdict; v.Verdict != pilot.Completed {
				b.Fatalf("verdict %s (%s)", v.Verdict, v.FailureClass)
			}
		}
	}
	run()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/fanout")
}

// BenchmarkErrgroupExec1000 is the baseline: errgroup with the same limit
// and os/exec over the same worker.
func BenchmarkErrgroupExec1000(b *testing.B) {
	run := func() {
		var g errgroup.Group
		g.SetLimit(fanoutBenchParallel)
		for range fanoutBenchJobs {
			g.Go(func() error {
				var out, errb bytes.Buffer
				cmd := exec.Command("/bin/echo", "ok")
				cmd.Stdout, cmd.Stderr = &out, &errb
				return cmd.Run()
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	run()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/fanout")
}

// BenchmarkFanoutInFlightMemory (P6) measures pilot's memory per running
// job: 256 workers at once (a shell that prints ready and sleeps), measured
// once all have started, as the resident memory of this process and of
// its supervisor (the workers excluded) against the same with none
// running; heap-KiB/job is this process's Go heap alone.
func BenchmarkFanoutInFlightMemory(b *testing.B) {
	const n = 256
	keepSupervisor(b)
	d := testDispatcher(b,
		pilot.Provider{Name: "echo", Runner: "command", Argv: measure.TrivialArgv},
		pilot.Provider{Name: "block", Runner: "command", Argv: measure.BlockingArgv})
	if err := measure.DispatchOK(context.Background(), d, pilot.Task{Provider: "echo", Mode: pilot.ModeReview, Prompt: "x"}); err != nil {
		b.Fatal(err) // the warm-up starts the supervisor
	}
	var rss, heap float64
	for b.Loop() {
		var err error
		if rss, heap, err = measure.InFlight(d, n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(rss, "KiB/job")
	b.ReportMetric(heap, "heap-KiB/job")
}
