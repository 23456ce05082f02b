// Package cli is the pilot command (examples/pilot): Main and Run, with
// Hooks through which another main adds to its dispatches, as
// examples/pilot/otel adds OpenTelemetry (contrib/otel) without the core
// module depending on it.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/schedule"
)

// Hooks let a main add to the dispatches of dispatch, run, fanout,
// schedule and demo; a nil hook leaves that step as it is. Their shapes
// are those of pilototel's methods (contrib/otel):
//
//	cli.Hooks{
//		Dispatcher: tel.Instrument,
//		Task:       func(td pilot.TaskDispatcher) pilot.TaskDispatcher { return tel.Dispatcher(td) },
//		Fanout:     tel.Fanout,
//		Schedule:   tel.Schedule,
//	}
type Hooks struct {
	// Dispatcher returns the pilot.Dispatcher a command runs its workers
	// with, given the one it made (with its OnLine, when it set one).
	Dispatcher func(*pilot.Dispatcher) *pilot.Dispatcher
	// Task wraps the TaskDispatcher a command dispatches its tasks with:
	// the outermost layer, outside the retry layer and the --log one.
	Task func(pilot.TaskDispatcher) pilot.TaskDispatcher
	// Fanout runs fanout's jobs in place of f.Run (f's Dispatcher is
	// already wrapped by Task).
	Fanout func(ctx context.Context, f *pilot.Fanout, jobs []pilot.Job) ([]pilot.JobResult, error)
	// Schedule runs schedule's graph in place of s.Run (s's Dispatcher is
	// already wrapped by Task).
	Schedule func(ctx context.Context, s *schedule.Scheduler, g schedule.Graph) ([]schedule.Result, error)
}

func (h Hooks) dispatcher(d *pilot.Dispatcher) *pilot.Dispatcher {
	if h.Dispatcher == nil {
		return d
	}
	return h.Dispatcher(d)
}

func (h Hooks) task(td pilot.TaskDispatcher) pilot.TaskDispatcher {
	if h.Task == nil {
		return td
	}
	return h.Task(td)
}

func (h Hooks) fanout(ctx context.Context, f *pilot.Fanout, jobs []pilot.Job) ([]pilot.JobResult, error) {
	if h.Fanout == nil {
		return f.Run(ctx, jobs)
	}
	return h.Fanout(ctx, f, jobs)
}

func (h Hooks) schedule(ctx context.Context, s *schedule.Scheduler, g schedule.Graph) ([]schedule.Result, error) {
	if h.Schedule == nil {
		return s.Run(ctx, g)
	}
	return h.Schedule(ctx, s, g)
}

// ServeFakeAgent runs this process as the demo's fake agent when it was
// started as one (the demo's workers re-execute the pilot binary), and
// exits; otherwise it returns. Main calls it first; a main that sets
// things up before Main (telemetry exporters, say) calls it before that.
func ServeFakeAgent() { pilottest.ServeFakeAgent() }

// Main is the pilot command's process: ServeFakeAgent, then Run with the
// process's arguments, standard streams and h, SIGINT and SIGTERM
// cancelling it, then pilot.Shutdown. It returns the exit status and never
// exits itself, so that a caller can flush what it must before os.Exit.
//
// Shutdown reaps pilot's supervisor here. Left to the exit, the
// supervisor would outlive the command by a moment and be reaped by PID 1,
// which in a container without an init never happens: every command would
// leave a <defunct> process behind.
func Main(h Hooks) int {
	ServeFakeAgent()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, h)
	stop()
	EndSupervisor(os.Stderr)
	return code
}

// EndSupervisor ends and reaps pilot's supervisor (pilot.Shutdown, for up
// to 30 s while dispatches still end), saying on stderr if it could not:
// what a main that runs Run itself calls before it exits (see Main).
func EndSupervisor(stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pilot.Shutdown(ctx); err != nil {
		fmt.Fprintln(stderr, "pilot: ending pilot's supervisor:", err)
	}
}
