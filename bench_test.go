package pilot_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/tools/bench/measure"
)

// The two benchmarks below run the same trivial worker, once through
// Dispatch and once through plain os/exec, so that their ratio is pilot's
// overhead per job. scripts/bench-dispatch.sh runs them side by side.

// BenchmarkDispatchTrivial measures one Dispatch of /bin/echo in steady
// state: the supervisor is started by a warm-up dispatch and reused.
func BenchmarkDispatchTrivial(b *testing.B) {
	// TestMain stops the supervisor after every job; keep it instead, as a
	// long-running program would, and stop it when the benchmark ends.
	keepSupervisor(b)
	d := testDispatcher(b, pilot.Provider{
		Name:   "echo",
		Runner: "command",
		Argv:   []string{"/bin/echo", "ok"},
	})
	tk := pilot.Task{Provider: "echo", Mode: pilot.ModeCode, Prompt: "x", Workdir: b.TempDir()}
	ctx := context.Background()
	dispatchOK := func() {
		v, err := d.Dispatch(ctx, tk)
		if err != nil {
			b.Fatalf("Dispatch: %v", err)
		}
		if v.Verdict != pilot.Completed {
			b.Fatalf("verdict = %q (%s), want %q", v.Verdict, v.FailureClass, pilot.Completed)
		}
	}
	dispatchOK() // warm-up: starts the supervisor; b.Loop does not time it
	for b.Loop() {
		dispatchOK()
	}
	reportMSPerJob(b)
}

// BenchmarkExecTrivial is the baseline: the same worker run with os/exec,
// both output streams read.
func BenchmarkExecTrivial(b *testing.B) {
	var stdout, stderr bytes.Buffer
	run := func() {
		stdout.Reset()
		stderr.Reset()
		cmd := exec.Command("/bin/echo", "ok")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("/bin/echo: %v", err)
		}
		if stdout.String() != "ok\n" {
			b.Fatalf("stdout = %q, want %q", stdout.String(), "ok\n")
		}
	}
	run() // warm-up, as for Dispatch
	for b.Loop() {
		run()
	}
	reportMSPerJob(b)
}

// reportMSPerJob reports the mean wall time of one iteration in
// milliseconds, the unit a human compares jobs in.
func reportMSPerJob(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/job")
}

// BenchmarkPythonStandInTrivial is P1b's baseline: the seed's architecture,
// a Python child process per job that itself runs the worker (a minimal
// stand-in of pilot-workers' dispatch child, tools/bench/measure's
// standin.py). Pilot's per-job overhead is BenchmarkDispatchTrivial minus
// BenchmarkExecTrivial; the stand-in's is this minus BenchmarkExecTrivial.
func BenchmarkPythonStandInTrivial(b *testing.B) {
	py, err := measure.NewPythonStandIn(b.TempDir())
	if errors.Is(err, exec.ErrNotFound) {
		b.Skip("python3 is not installed")
	}
	if err != nil {
		b.Fatal(err)
	}
	run := func() {
		if err := py.RunOK(measure.TrivialArgv); err != nil {
			b.Fatal(err)
		}
	}
	run() // warm-up, as for Dispatch
	for b.Loop() {
		run()
	}
	reportMSPerJob(b)
}
