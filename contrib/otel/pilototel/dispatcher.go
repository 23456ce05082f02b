package pilototel

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/retry"
)

// Dispatcher is a pilot.TaskDispatcher that reports every task it runs to
// Telemetry: a pilot.task span (a child of the span in Dispatch's context)
// with an invoke_agent span per attempt, and the metrics. Put it outside a
// retry layer, so that one task span holds every attempt and the retry
// events:
//
//	tel.Dispatcher(&retry.Dispatcher{Dispatcher: tel.Instrument(d)})
//
// Its Unwrap lets a Fanout find Dispatcher's Check and Runs.
type Dispatcher struct {
	Dispatcher pilot.TaskDispatcher
	Telemetry  *Telemetry
}

// Dispatch implements pilot.TaskDispatcher.
func (d *Dispatcher) Dispatch(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
	tel := d.Telemetry
	ctx, span := tel.tracer.Start(ctx, "pilot.task", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(taskAttrs(t)...))
	tr := &tracker{tel: tel, ctx: ctx, task: span, provider: t.Provider, mode: t.Mode}
	next := t.Observer
	t.Observer = func(e pilot.Event) {
		tr.event(e)
		if next != nil {
			next(e)
		}
	}
	v, err := d.Dispatcher.Dispatch(ctx, t)
	tr.end(v, err)
	return v, err
}

// Unwrap returns the Dispatcher it wraps, whose Check and Runs a Fanout
// uses.
func (d *Dispatcher) Unwrap() pilot.TaskDispatcher { return d.Dispatcher }

func taskAttrs(t pilot.Task) []attribute.KeyValue {
	a := []attribute.KeyValue{semconv.GenAIProviderNameKey.String(t.Provider), KeyMode.String(string(t.Mode))}
	if t.Label != "" {
		a = append(a, KeyLabel.String(t.Label))
	}
	return a
}

// tracker follows one task: its span, the open attempt's span, and the run
// ids of its attempts.
type tracker struct {
	tel      *Telemetry
	ctx      context.Context // the task span's
	task     trace.Span
	provider string
	mode     pilot.Mode

	mu      sync.Mutex
	attempt int
	cur     trace.Span // the open attempt's span, or nil
	curRun  string
	model   string
	runner  string
	runIDs  []string
	blocked bool // a retry.EventBlocked came
}

// metricAttrs are the attributes every metric of the task carries.
func (tr *tracker) metricAttrs(extra ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append([]attribute.KeyValue{semconv.GenAIProviderNameKey.String(tr.provider), KeyMode.String(string(tr.mode))}, extra...)...)
}

func (tr *tracker) event(e pilot.Event) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	switch {
	case e.Started != nil:
		tr.endAttempt(nil, e.Time, "a new attempt started before this one's verdict")
		tr.startAttempt(e.RunID, e.Started.StartedAt, e.Started)
	case e.Verdict != nil:
		v := e.Verdict
		if tr.cur == nil || tr.curRun != e.RunID {
			// An attempt whose worker never started (spawn-failed).
			tr.endAttempt(nil, e.Time, "a new attempt ended before this one's verdict")
			tr.startAttempt(e.RunID, e.Time.Add(-time.Duration(v.DurationMS)*time.Millisecond), nil)
		}
		tr.endAttempt(v, e.Time, "")
	case retryInfo(e) != nil:
		r := retryInfo(e)
		a := []attribute.KeyValue{KeyAttempt.Int(r.Attempt), KeyFailureClass.String(string(r.FailureClass)),
			KeyFailures.Int(r.Failures), KeyMaxFailures.Int(r.MaxFailures), KeyRetryCounted.Bool(r.Counted)}
		tr.blocked = tr.blocked || e.Type == retry.EventBlocked
		if e.Type == retry.EventRetry {
			a = append(a, KeyRetryResume.Bool(r.Resume), KeyRetryDelay.Float64(float64(r.DelayMS)/1000))
			tr.tel.retries.Add(tr.ctx, 1, tr.metricAttrs(KeyFailureClass.String(string(r.FailureClass)), KeyRetryResume.Bool(r.Resume)))
		}
		tr.task.AddEvent(spanEventName(e.Type), trace.WithTimestamp(e.Time), trace.WithAttributes(a...))
	case e.Session != nil && e.Type == event.Phase:
		tr.attemptEvent(e, KeyPhase.String(string(e.Session.Phase)), KeyPhaseReason.String(e.Session.Reason))
	case e.Inspection != nil:
		in := e.Inspection
		tr.attemptEvent(e, KeyStallAction.String(in.Action), KeyPhase.String(string(in.Phase)),
			KeyStallSilence.Float64(in.SilenceSeconds), KeyPendingTools.Int(len(in.PendingToolCallIDs)))
	case e.Type == event.Terminate || e.Type == event.IdleDeferred || e.Type == event.Leftovers:
		tr.attemptEvent(e)
	}
}

// spanEventName is the span event of an event type:
// worker_runner.phase → pilot.phase.
func spanEventName(typ string) string {
	for i := 0; i < len(typ); i++ {
		if typ[i] == '.' {
			return "pilot" + typ[i:]
		}
	}
	return "pilot." + typ
}

// attemptEvent adds e to the open attempt's span (the task's when none is
// open).
func (tr *tracker) attemptEvent(e pilot.Event, a ...attribute.KeyValue) {
	s := tr.cur
	if s == nil {
		s = tr.task
	}
	s.AddEvent(spanEventName(e.Type), trace.WithTimestamp(e.Time), trace.WithAttributes(a...))
}

func (tr *tracker) startAttempt(runID string, at time.Time, st *pilot.Started) {
	tr.attempt++
	name := "invoke_agent"
	a := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIProviderNameKey.String(tr.provider),
		KeyMode.String(string(tr.mode)),
		KeyRunID.String(runID),
		KeyAttempt.Int(tr.attempt),
	}
	if st != nil {
		tr.runner, tr.model = st.Runner, st.Model
		name += " " + st.Runner
		a = append(a, semconv.GenAIAgentName(st.Runner), KeyRunner.String(st.Runner), semconv.ProcessPID(st.Pid))
		if st.Model != "" {
			a = append(a, semconv.GenAIRequestModel(st.Model))
		}
		if st.Label != "" {
			a = append(a, KeyLabel.String(st.Label))
		}
		tr.tel.running.Add(tr.ctx, 1, tr.metricAttrs())
	}
	_, tr.cur = tr.tel.tracer.Start(tr.ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(at), trace.WithAttributes(a...))
	tr.curRun = runID
	tr.runIDs = append(tr.runIDs, runID)
	tr.tel.openTask(runID, tr.task)
}

// endAttempt ends the open attempt's span, if any, with its verdict v, or
// (v nil) as cut short for why.
func (tr *tracker) endAttempt(v *pilot.Verdict, at time.Time, why string) {
	s := tr.cur
	if s == nil {
		return
	}
	tr.cur = nil
	started := tr.runner != ""
	if started {
		tr.tel.running.Add(tr.ctx, -1, tr.metricAttrs())
	}
	tr.runner = ""
	if v == nil {
		s.SetStatus(codes.Error, why)
		s.End(trace.WithTimestamp(at))
		return
	}
	s.SetAttributes(verdictAttrs(*v)...)
	if !v.Verdict.Success() {
		s.SetStatus(codes.Error, string(v.FailureClass))
	}
	outcome := outcomeAttrs(*v)
	tr.tel.attempts.Add(tr.ctx, 1, tr.metricAttrs(outcome...))
	tr.tel.duration.Record(tr.ctx, float64(v.DurationMS)/1000, tr.metricAttrs(outcome...))
	if u := v.Usage; u != nil {
		a := []attribute.KeyValue{semconv.GenAIOperationNameInvokeAgent}
		if tr.model != "" {
			a = append(a, semconv.GenAIRequestModel(tr.model))
		}
		tr.tel.tokens.Record(tr.ctx, u.InputTokens, tr.metricAttrs(append(a, semconv.GenAITokenTypeInput)...))
		tr.tel.tokens.Record(tr.ctx, u.OutputTokens, tr.metricAttrs(append(a, semconv.GenAITokenTypeOutput)...))
		if u.CostUSD != nil {
			tr.tel.cost.Add(tr.ctx, *u.CostUSD, tr.metricAttrs())
		}
	}
	tr.model = ""
	s.End(trace.WithTimestamp(at))
}

// outcomeAttrs are a verdict's outcome and failure class, for metrics.
func outcomeAttrs(v pilot.Verdict) []attribute.KeyValue {
	a := []attribute.KeyValue{KeyVerdict.String(string(v.Verdict))}
	if v.FailureClass != "" && !v.Verdict.Success() {
		a = append(a, semconv.ErrorTypeKey.String(string(v.FailureClass)))
	}
	return a
}

// verdictAttrs are a verdict's attributes for its span.
func verdictAttrs(v pilot.Verdict) []attribute.KeyValue {
	a := []attribute.KeyValue{KeyVerdict.String(string(v.Verdict))}
	str := func(k attribute.Key, s string) {
		if s != "" {
			a = append(a, k.String(s))
		}
	}
	if !v.Verdict.Success() && v.FailureClass != "" {
		a = append(a, semconv.ErrorTypeKey.String(string(v.FailureClass)))
	}
	str(KeyFailureClass, string(v.FailureClass))
	str(KeyFailureSource, v.FailureSource)
	str(KeyEvidenceSource, v.EvidenceSource)
	str(KeyTermination, string(v.TerminationReason))
	str(KeySignal, v.Signal)
	str(KeySessionPhase, string(v.SessionPhase))
	str(KeyJob, v.Job)
	if v.ExitCode != nil {
		a = append(a, semconv.ProcessExitCode(*v.ExitCode))
	}
	if u := v.Usage; u != nil {
		a = append(a,
			semconv.GenAIUsageInputTokens(int(u.InputTokens)),
			semconv.GenAIUsageOutputTokens(int(u.OutputTokens)),
			semconv.GenAIUsageCacheReadInputTokens(int(u.CacheReadTokens)),
			semconv.GenAIUsageCacheCreationInputTokens(int(u.CacheWriteTokens)))
		if u.CostUSD != nil {
			a = append(a, KeyCostUSD.Float64(*u.CostUSD))
		}
	}
	return a
}

// end closes the task: an attempt still open was cut short by pilot's own
// failure; the task span gets the verdict Dispatch returned.
func (tr *tracker) end(v pilot.Verdict, err error) {
	tr.mu.Lock()
	why := "the dispatch returned without this attempt's verdict"
	if err != nil {
		why = "pilot failed: " + err.Error()
	}
	tr.endAttempt(nil, time.Now(), why)
	runIDs := tr.runIDs
	attempts := tr.attempt
	blocked := tr.blocked
	tr.mu.Unlock()
	tr.tel.closeTask(runIDs)
	if err != nil {
		tr.task.RecordError(err)
		tr.task.SetStatus(codes.Error, "pilot failed: "+err.Error())
		tr.task.End()
		return
	}
	tr.task.SetAttributes(verdictAttrs(v)...)
	tr.task.SetAttributes(KeyAttempts.Int(attempts))
	// What the layers beneath add to the verdict, from their events: a
	// block (with no attempt, a verdict made up), a cut-short wait.
	if blocked {
		tr.task.SetAttributes(KeyBlocked.Bool(true))
		if attempts == 0 {
			tr.task.SetAttributes(KeySynthesized.Bool(true))
		}
	}
	if !v.Verdict.Success() {
		if tr.ctx.Err() != nil {
			tr.task.SetAttributes(KeyInterrupted.Bool(true))
		}
		tr.task.SetStatus(codes.Error, string(v.FailureClass))
	}
	tr.tel.verdicts.Add(tr.ctx, 1, tr.metricAttrs(append(outcomeAttrs(v), KeyBlocked.Bool(blocked))...))
	tr.task.End()
}

// retryInfo is e's retry account, nil for an event of no retry layer.
func retryInfo(e pilot.Event) *retry.Info {
	r, _ := e.Retry.(*retry.Info)
	return r
}
