package pilotslog_test

import (
	"context"
	"log/slog"
	"os"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilotslog"
	"github.com/pilotworkers/pilot/pilottest"
)

// A fanout's events as slog records: the failed job's verdict at Warn,
// with its failure class and evidence.
func ExampleDispatcher() {
	// Without the time, for a stable output.
	h := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})
	fake := pilottest.DispatchFunc(func(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
		v := pilot.Verdict{Provider: t.Provider, Mode: t.Mode, RunID: "run-" + t.Provider, Verdict: pilot.Completed}
		if t.Provider == "flaky" {
			v.Verdict, v.FailureClass, v.EvidenceSource = pilot.Failed, pilot.FailProviderRateLimit, "pi:stderr"
		}
		t.Observer(pilot.Event{Type: "worker_runner.verdict", RunID: v.RunID, Verdict: &v})
		return v, nil
	})
	f := &pilot.Fanout{Dispatcher: &pilotslog.Dispatcher{Dispatcher: fake, Logger: slog.New(h)}, MaxParallel: 1}
	f.Run(context.Background(), []pilot.Job{
		{Name: "steady", Task: pilot.Task{Provider: "steady", Mode: pilot.ModeReview, Prompt: "review"}},
		{Name: "flaky", Task: pilot.Task{Provider: "flaky", Mode: pilot.ModeReview, Prompt: "review"}},
	})
	// Output:
	// level=INFO msg=worker_runner.verdict run_id=run-steady provider=steady mode=review verdict=completed duration=0s attempt=1
	// level=WARN msg=worker_runner.verdict run_id=run-flaky provider=flaky mode=review verdict=error failure_class=provider-rate-limit evidence_source=pi:stderr duration=0s attempt=1
}
