package pilot_test

import (
	"bytes"
	"context"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/supervise"
)

const (
	fanoutBenchJobs     = 1000
	fanoutBenchParallel = 64
)

func keepSupervisor(b *testing.B) {
	supervise.SetLinger(time.Minute)
	b.Cleanup(func() {
		supervise.SetLinger(0)
		supervise.Shutdown()
	})
}

// BenchmarkFanout1000 runs 1000 trivial jobs (/bin/echo) through Fanout,
// 64 at a time; one op is the whole fanout.
func BenchmarkFanout1000(b *testing.B) {
	keepSupervisor(b)
	d := testDispatcher(b, pilot.Provider{Name: "echo", Runner: pilot.RunnerCommand, Argv: []string{"/bin/echo", "ok"}})
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
		for _, v := range vs {
			if v.Verdict != pilot.Completed {
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

// BenchmarkFanoutInFlightMemory measures pilot's heap per running job: 64
// workers that block, measured once all have started.
func BenchmarkFanoutInFlightMemory(b *testing.B) {
	keepSupervisor(b)
	d := testDispatcher(b, fakeProvider(b, "w", "out=ready", "block"))
	jobs := make([]pilot.Job, fanoutBenchParallel)
	for i := range jobs {
		jobs[i] = pilot.Job{Task: pilot.Task{Provider: "w", Mode: pilot.ModeReview, Prompt: "x"}}
	}
	var perJob float64
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		var ready atomic.Int32
		all := make(chan struct{})
		d.OnLine = func(_ string, l pilot.Line) {
			if string(l.Data) == "ready" && ready.Add(1) == fanoutBenchParallel {
				close(all)
			}
		}
		runtime.GC()
		var before, during runtime.MemStats
		runtime.ReadMemStats(&before)
		done := make(chan struct{})
		go func() {
			(&pilot.Fanout{Dispatcher: d}).Run(ctx, jobs)
			close(done)
		}()
		<-all
		runtime.GC()
		runtime.ReadMemStats(&during)
		perJob = float64(int64(during.HeapInuse)-int64(before.HeapInuse)) / fanoutBenchParallel / 1024
		cancel()
		<-done
	}
	b.ReportMetric(perJob, "KiB/job")
}
