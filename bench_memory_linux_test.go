package pilot_test

import (
	"bufio"
	"os"
	"syscall"
	"testing"

	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/internal/supervise"
)

// BenchmarkMemorySample measures what following a worker's memory costs:
// one sample of a running tree of four processes (the supervisor walks
// the tree and reads each one's RSS from /proc, then answers over its
// socket), which a dispatch takes once per heartbeat. At the default
// heartbeat of a second, its time per op is the cost per worker per
// second; scripts/bench-memory.sh puts it beside BenchmarkDispatchTrivial,
// a whole dispatch that samples nothing (its worker exits within a
// heartbeat).
func BenchmarkMemorySample(b *testing.B) {
	keepSupervisor(b)
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	// The leader and three children, each holding a little memory, as an
	// agent CLI's node process and its tools' shells do.
	argv := []string{exe, "alloc=8MiB"}
	for range 3 {
		argv = append(argv, "spawn", "alloc=4MiB", "ready", "block", "end")
	}
	argv = append(argv, "out=ready", "block")
	cookie := "PILOT_TEST_JOB=bench-memory-sample"
	j, err := supervise.Start(supervise.Spec{
		Path: exe, Argv: argv,
		Env: []string{fakeagent.EnvFakeAgent + "=1", "GORACE=atexit_sleep_ms=0", cookie},
		Dir: "/", Cookie: cookie,
	}, null, w, null)
	w.Close()
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() && sc.Text() != "ready" {
	}
	sample := func() {
		if err := j.Sample(); err != nil {
			b.Fatal(err)
		}
		if m := <-j.Memory(); m.Procs < 1 || m.RSS <= 0 {
			b.Fatalf("sample %+v, want the running tree", m)
		}
	}
	sample()
	for b.Loop() {
		sample()
	}
	perSample := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	// At one sample per second, the share of one core a worker's
	// following takes.
	b.ReportMetric(perSample/1e9*100, "%core/worker")
	if err := j.Signal(syscall.SIGKILL); err != nil {
		b.Fatal(err)
	}
	<-j.Done()
}
