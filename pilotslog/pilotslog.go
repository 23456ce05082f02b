// Package pilotslog logs pilot's events with log/slog: one record per event,
// with typed attributes and a level that fits it. It uses the standard
// library and pilot's exported API only.
//
// A record's message is the event's type ("worker_runner.verdict"), its time
// the event's, and its level:
//
//   - Error: pilot itself failed (an error from Dispatch, logged by
//     [Dispatcher]);
//   - Warn: a verdict that is not a success (error, empty), a blocked task,
//     leftover processes pilot killed, events an observer missed, a Fanout
//     warning, a scheduler's blocked or failed job;
//   - Info: a started worker, a successful verdict, stall inspections,
//     pilot ending a worker, retries, provider gates, the scheduler's done
//     jobs;
//   - Debug: phase changes, a Fanout job starting, the scheduler's selected
//     and deferred jobs.
//
// The attributes are those of the event (see [Attrs]): never a worker's
// output, its stderr tail or a stall inspection's stream tail. Evidence
// excerpts and messages are pilot's, with every provider's secret already
// redacted, as in events.log.
package pilotslog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/schedule"
)

// typeDispatchErr is the message of pilot's own failure, logged by Dispatcher.
const typeDispatchErr = "pilot.dispatch_error"

// Level is the level of e's record (see the package doc).
func Level(e pilot.Event) slog.Level {
	switch {
	case e.Verdict != nil:
		if e.Verdict.Verdict.Success() {
			return slog.LevelInfo
		}
		return slog.LevelWarn
	case e.Started != nil:
		return slog.LevelInfo
	}
	switch e.Type {
	case event.Phase, event.FanoutJobStarting:
		return slog.LevelDebug
	case event.Leftovers, event.Dropped, event.FanoutWarning, retry.EventBlocked:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// PilotFailure reports whether r is the result of a Fanout job pilot
// itself could not run: its verdict synthesized for a dispatch that
// returned an error (not for one interrupted), to log at Error.
func PilotFailure(r pilot.JobResult) bool {
	return r.Synthesized && !r.Interrupted && r.FailureSource == "pilot"
}

// Attrs are e's attributes, those it has of: run_id; for a started worker
// provider, mode, job, label, runner, model, pid; for a verdict provider,
// mode, job, label, verdict, failure_class, failure_source,
// evidence_source, evidence (the excerpt), termination_reason,
// termination_signal, exit_code, signal, duration, session_phase,
// leftovers, record and a usage group (input_tokens, output_tokens,
// cache_read_tokens, cache_write_tokens, cost_usd); for a phase change
// phase and phase_reason; for a stall inspection action, phase, silence
// and pending_tool_calls (a count); for a retry event retry_key, stage,
// attempt, failure_class, failures, max_failures, counted, delay, resume
// and reason; and the event's message.
func Attrs(e pilot.Event) []slog.Attr {
	var a attrs
	a.str("run_id", e.RunID)
	if s := e.Started; s != nil {
		a.str("provider", s.Provider)
		a.str("mode", string(s.Mode))
		a.str("job", s.Job)
		a.str("label", s.Label)
		a.str("runner", s.Runner)
		a.str("model", s.Model)
		a.add(slog.Int("pid", s.Pid))
	}
	if v := e.Verdict; v != nil {
		a.str("provider", v.Provider)
		a.str("mode", string(v.Mode))
		a.str("job", v.Job)
		a.str("label", v.Label)
		a.add(slog.String("verdict", string(v.Verdict)))
		a.str("failure_class", string(v.FailureClass))
		a.str("failure_source", v.FailureSource)
		a.str("evidence_source", v.EvidenceSource)
		a.str("evidence", v.EvidenceExcerpt)
		a.str("termination_reason", string(v.TerminationReason))
		a.str("termination_signal", v.TerminationSignal)
		if v.ExitCode != nil {
			a.add(slog.Int("exit_code", *v.ExitCode))
		}
		a.str("signal", v.Signal)
		a.add(slog.Duration("duration", time.Duration(v.DurationMS)*time.Millisecond))
		a.str("session_phase", string(v.SessionPhase))
		if v.Leftovers > 0 {
			a.add(slog.Int("leftovers", v.Leftovers))
		}
		a.str("record", v.Record)
		if u := v.Usage; u != nil {
			g := []any{
				slog.Int64("input_tokens", u.InputTokens),
				slog.Int64("output_tokens", u.OutputTokens),
				slog.Int64("cache_read_tokens", u.CacheReadTokens),
				slog.Int64("cache_write_tokens", u.CacheWriteTokens),
			}
			if u.CostUSD != nil {
				g = append(g, slog.Float64("cost_usd", *u.CostUSD))
			}
			a.add(slog.Group("usage", g...))
		}
	}
	if s := e.Session; s != nil {
		a.str("phase", string(s.Phase))
		a.str("phase_reason", s.Reason)
	}
	if in := e.Inspection; in != nil {
		a.str("action", in.Action)
		a.str("phase", string(in.Phase))
		a.add(slog.Duration("silence", time.Duration(in.SilenceSeconds*float64(time.Second))))
		a.add(slog.Int("pending_tool_calls", len(in.PendingToolCallIDs)))
	}
	if r, _ := e.Retry.(*retry.Info); r != nil {
		a.str("retry_key", r.Key)
		a.str("stage", r.Stage)
		if r.Attempt > 0 {
			a.add(slog.Int("attempt", r.Attempt))
		}
		a.str("failure_class", string(r.FailureClass))
		a.add(slog.Int("failures", r.Failures), slog.Int("max_failures", r.MaxFailures), slog.Bool("counted", r.Counted))
		if r.DelayMS > 0 {
			a.add(slog.Duration("delay", time.Duration(r.DelayMS)*time.Millisecond))
		}
		a.flag("resume", r.Resume)
		a.str("reason", r.Reason)
	}
	a.str("message", e.Message)
	return a
}

// attrs collects attributes, leaving out empty ones.
type attrs []slog.Attr

func (a *attrs) add(as ...slog.Attr) { *a = append(*a, as...) }

func (a *attrs) str(k, v string) {
	if v != "" {
		*a = append(*a, slog.String(k, v))
	}
}

func (a *attrs) flag(k string, v bool) {
	if v {
		*a = append(*a, slog.Bool(k, true))
	}
}

// Log writes e to l (nil: slog.Default()) as one record at Level(e), with
// Attrs(e) and extra after them, timed at the event.
func Log(ctx context.Context, l *slog.Logger, e pilot.Event, extra ...slog.Attr) {
	write(ctx, l, Level(e), e.Time, e.Type, append(Attrs(e), extra...))
}

func write(ctx context.Context, l *slog.Logger, level slog.Level, t time.Time, msg string, as []slog.Attr) {
	if l == nil {
		l = slog.Default()
	}
	if ctx == nil {
		ctx = context.Background()
	}
	h := l.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	if t.IsZero() {
		t = time.Now()
	}
	r := slog.NewRecord(t, level, msg, 0)
	r.AddAttrs(as...)
	_ = h.Handle(ctx, r) // a handler's error has nowhere to go
}

// Observer returns a function for Dispatcher.Observer or Task.Observer
// that logs every event to l (nil: slog.Default()).
func Observer(l *slog.Logger) func(pilot.Event) {
	return func(e pilot.Event) { Log(context.Background(), l, e) }
}

// FanoutObserver returns a function for Fanout.OnEvent that logs every
// event to l (nil: slog.Default()) with the job's index (job_index; -1 for
// the fanout's own events).
func FanoutObserver(l *slog.Logger) func(int, pilot.Event) {
	return func(i int, e pilot.Event) { Log(context.Background(), l, e, slog.Int("job_index", i)) }
}

// ScheduleObserver returns a function for schedule.Scheduler.OnEvent that
// logs every event to l (nil: slog.Default()): a job's dispatch events as
// the dispatch event with the job's id (schedule_job), the scheduler's
// decisions as "schedule.*" records with schedule_job, provider, reason,
// conflict and until.
func ScheduleObserver(l *slog.Logger) func(schedule.Event) {
	return func(e schedule.Event) {
		job := slog.String("schedule_job", e.Job)
		if e.Dispatch != nil {
			Log(context.Background(), l, *e.Dispatch, job)
			return
		}
		a := attrs{job}
		a.str("provider", e.Provider)
		a.str("reason", e.Reason)
		a.str("conflict", e.Conflict)
		if !e.Until.IsZero() {
			a.add(slog.Time("until", e.Until))
		}
		write(context.Background(), l, scheduleLevel(e), time.Time{}, e.Type, a)
	}
}

func scheduleLevel(e schedule.Event) slog.Level {
	switch e.Type {
	case schedule.EventSelected, schedule.EventDeferred:
		return slog.LevelDebug
	case schedule.EventBlocked:
		return slog.LevelWarn
	case schedule.EventDone:
		switch schedule.Status(e.Reason) {
		case schedule.StatusFailed, schedule.StatusBlocked:
			return slog.LevelWarn
		}
	}
	return slog.LevelInfo
}

// Dispatcher is a pilot.TaskDispatcher that logs every event of the tasks
// it runs to Logger (nil: slog.Default()), with the context Dispatch was
// given (for handlers that read it) and the number of the attempt each
// belongs to (attempt: counted from the task's Lineage.Attempt, so that a
// layer above that dispatches a task again, a retry layer or a scheduler,
// numbers its attempts), and logs pilot's own failure, an error from
// Dispatch, at Error ("pilot.dispatch_error", with provider, mode, label
// and error). Put it outside a retry layer to see the retry events too:
//
//	&pilotslog.Dispatcher{Dispatcher: &retry.Dispatcher{Dispatcher: d}}
//
// Its Unwrap lets a Fanout find Dispatcher's Check and Runs. A Fanout
// names a job in its events only after the task's observers have seen
// them: for the job attribute, log a Fanout's events with FanoutObserver
// as its OnEvent.
type Dispatcher struct {
	Dispatcher pilot.TaskDispatcher
	Logger     *slog.Logger
}

// Dispatch implements pilot.TaskDispatcher.
func (d *Dispatcher) Dispatch(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
	var (
		mu      sync.Mutex
		attempt = max(t.Lineage.Attempt, 1) - 1 // the attempts before this call's first
		open    bool                            // an attempt has started and has no verdict yet
	)
	next := t.Observer
	t.Observer = func(e pilot.Event) {
		mu.Lock()
		switch {
		case e.Started != nil:
			attempt++
			open = true
		case e.Verdict != nil:
			if !open {
				attempt++ // an attempt that never started its worker
			}
			open = false
		}
		n := attempt
		mu.Unlock()
		var extra []slog.Attr
		if n > 0 && e.Retry == nil {
			extra = append(extra, slog.Int("attempt", n))
		}
		Log(ctx, d.Logger, e, extra...)
		if next != nil {
			next(e)
		}
	}
	v, err := d.Dispatcher.Dispatch(ctx, t)
	if err != nil {
		a := attrs{}
		a.str("provider", t.Provider)
		a.str("mode", string(t.Mode))
		a.str("label", t.Label)
		a.str("run_id", v.RunID)
		a.add(slog.String("error", err.Error()))
		write(ctx, d.Logger, slog.LevelError, time.Time{}, typeDispatchErr, a)
	}
	return v, err
}

// Unwrap returns the Dispatcher it wraps, whose Check and Runs a Fanout
// uses.
func (d *Dispatcher) Unwrap() pilot.TaskDispatcher { return d.Dispatcher }
