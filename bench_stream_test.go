package pilot_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/tools/bench/measure"
)

// streamBenchFile writes the Claude stream-json input of the P3
// benchmarks: 64 MiB with one 16 MiB line by default;
// PILOT_BENCH_STREAM_MIB sets the size (the big line is then a tenth of
// it), e.g. for the 1 GiB:
//
//	PILOT_BENCH_STREAM_MIB=1024 go test -run '^$' -bench 'StreamJSONL|CatJSONL' -benchtime 3x .
func streamBenchFile(b *testing.B) (path string, n int64) {
	mib := int64(64)
	if v := os.Getenv("PILOT_BENCH_STREAM_MIB"); v != "" {
		m, err := strconv.ParseInt(v, 10, 64)
		if err != nil || m <= 0 {
			b.Fatalf("PILOT_BENCH_STREAM_MIB=%q: want a positive number of MiB", v)
		}
		mib = m
	}
	big := max(mib<<20/10, 16<<20)
	path = filepath.Join(b.TempDir(), "stream.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	n, err = measure.ClaudeStream(f, mib<<20, big, rand.New(rand.NewPCG(3, 3)))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	return path, n
}

// BenchmarkStreamJSONL (P3) dispatches a Claude Code worker whose output
// is the stream file: every line goes through the claude watcher and into
// stream.log. It reports throughput (MB/s) and the process's peak RSS.
func BenchmarkStreamJSONL(b *testing.B) {
	keepSupervisor(b)
	path, n := streamBenchFile(b)
	dir := b.TempDir()
	script, err := measure.CatScript(dir)
	if err != nil {
		b.Fatal(err)
	}
	runDir := filepath.Join(dir, "runs")
	d := testDispatcher(b, measure.StreamProvider(script, path))
	d.RunDir = runDir
	t := pilot.Task{Provider: "stream", Mode: pilot.ModeReview, Prompt: "x", Workdir: dir}
	ctx := context.Background()
	b.SetBytes(n)
	var peak int64
	for b.Loop() {
		b.StopTimer()
		os.RemoveAll(runDir)
		if err := measure.ResetPeakRSS(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := measure.StreamOK(ctx, d, t, n); err != nil {
			b.Fatal(err)
		}
		p, err := measure.PeakRSS()
		if err != nil {
			b.Fatal(err)
		}
		peak = max(peak, p)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
}

// BenchmarkCatJSONL is P3's baseline: cat of the same file into a pipe
// read to /dev/null.
func BenchmarkCatJSONL(b *testing.B) {
	path, n := streamBenchFile(b)
	b.SetBytes(n)
	for b.Loop() {
		got, err := measure.CatPipe(path)
		if err != nil || got != n {
			b.Fatalf("cat: %d bytes, %v; want %d", got, err, n)
		}
	}
}

// BenchmarkStreamRecorded (the P3-<runner> rows) dispatches each runner's
// worker whose output is its recorded stream's event lines repeated to
// 64 MiB: every line goes through the runner's watcher and into
// stream.log. Its "command" case sends codex's stream through the command
// runner, which has no stream watcher: pilot's own cost per line.
func BenchmarkStreamRecorded(b *testing.B) {
	keepSupervisor(b)
	for _, runner := range []string{agents.RunnerPi, agents.RunnerCodex, agents.RunnerOpencode, agents.RunnerGemini, "command"} {
		b.Run(runner, func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "stream.jsonl")
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			recorded := runner
			if runner == "command" {
				recorded = agents.RunnerCodex
			}
			n, err := measure.RecordedStream(f, recorded, 64<<20)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				b.Fatal(err)
			}
			script, err := measure.CatScript(dir)
			if err != nil {
				b.Fatal(err)
			}
			runDir := filepath.Join(dir, "runs")
			p := measure.RunnerStreamProvider(runner, script, path)
			if runner == "command" {
				p.Binary, p.Argv = "", []string{script}
			}
			d := testDispatcher(b, p)
			d.RunDir = runDir
			t := pilot.Task{Provider: "stream", Mode: pilot.ModeReview, Prompt: "x", Workdir: dir}
			b.SetBytes(n)
			for b.Loop() {
				b.StopTimer()
				os.RemoveAll(runDir)
				b.StartTimer()
				if err := measure.StreamOK(context.Background(), d, t, n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
