// Package pilototel reports pilot's dispatches to OpenTelemetry: a span per
// task and per attempt, phase changes and stall inspections as span events,
// and metrics of running jobs, verdicts, durations, time to first output,
// tokens, cost, retries and provider gate waits. It is built on pilot's
// exported API only.
//
// # Spans
//
//	pilot.fanout | pilot.schedule          Telemetry.Fanout, Telemetry.Schedule
//	└── pilot.task                         one Dispatch of Dispatcher (a task, its retries included)
//	    ├── invoke_agent {runner}          one attempt: a worker, from its start to its verdict
//	    │     events: pilot.phase, pilot.stall_inspection, pilot.terminate,
//	    │             pilot.idle_deferred, pilot.leftovers
//	    └── invoke_agent {runner}          the next attempt, after a pilot.retry event on the task span
//
// A span's status is Error when its verdict is not a success (the
// description is the failure class) and when pilot itself failed (an error
// from Dispatch, recorded on the task span). The attempt span follows the
// OpenTelemetry GenAI conventions for an agent invocation
// (gen_ai.operation.name "invoke_agent", gen_ai.agent.name the runner,
// gen_ai.provider.name pilot's provider name, gen_ai.request.model,
// gen_ai.usage.input_tokens, gen_ai.usage.output_tokens,
// gen_ai.usage.cache_read.input_tokens,
// gen_ai.usage.cache_creation.input_tokens) and the general ones
// (error.type, the failure class; process.pid, process.exit.code). What no
// convention names is under pilot.*; see the attribute keys below.
//
// # Metrics
//
//	pilot.jobs.running              {job}     up-down counter: workers running now
//	pilot.attempts                  {attempt} counter: attempt verdicts, by outcome and class
//	pilot.verdicts                  {verdict} counter: task verdicts (what Dispatch returned), by outcome and class
//	pilot.attempt.duration          s         histogram: an attempt's duration
//	pilot.attempt.time_to_first_output s      histogram: from an attempt's start to its worker's first output line (Telemetry.Instrument)
//	gen_ai.client.token.usage       {token}   histogram (GenAI convention): tokens of an attempt, by gen_ai.token.type
//	pilot.cost                      {USD}     counter: the cost workers reported
//	pilot.retries                   {retry}   counter: retries, by failure class
//	pilot.provider_gate.waits       {wait}    counter: scheduler jobs that waited for their provider's rate limit
//	pilot.provider_gate.wait.duration s       histogram: how long they waited
//
// Metrics carry gen_ai.provider.name and pilot.mode, and the outcome ones
// pilot.verdict and error.type (the failure class).
//
// # Secrets
//
// Nothing here reads a worker's output: spans and metrics carry pilot's
// names, counts and classes, the evidence's source but never its excerpt,
// never a stderr tail, a stall inspection's stream tail or a message.
package pilototel

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pilotworkers/pilot"
)

// ScopeName is the instrumentation scope of pilot's tracer and meter.
const ScopeName = "github.com/pilotworkers/pilot/contrib/otel/pilototel"

// Attribute keys that no OpenTelemetry convention names (pilot's own).
const (
	KeyRunID          = attribute.Key("pilot.run_id")
	KeyMode           = attribute.Key("pilot.mode")
	KeyRunner         = attribute.Key("pilot.runner")
	KeyLabel          = attribute.Key("pilot.label")
	KeyJob            = attribute.Key("pilot.job")
	KeyAttempt        = attribute.Key("pilot.attempt")
	KeyAttempts       = attribute.Key("pilot.attempts")
	KeyVerdict        = attribute.Key("pilot.verdict")
	KeyFailureClass   = attribute.Key("pilot.failure_class")
	KeyFailureSource  = attribute.Key("pilot.failure_source")
	KeyEvidenceSource = attribute.Key("pilot.evidence_source")
	KeyTermination    = attribute.Key("pilot.termination_reason")
	KeySignal         = attribute.Key("pilot.signal")
	KeySessionPhase   = attribute.Key("pilot.session_phase")
	KeyCostUSD        = attribute.Key("pilot.cost_usd")
	KeySynthesized    = attribute.Key("pilot.synthesized")
	KeyInterrupted    = attribute.Key("pilot.interrupted")
	KeyBlocked        = attribute.Key("pilot.blocked")
	KeyPhase          = attribute.Key("pilot.phase")
	KeyPhaseReason    = attribute.Key("pilot.phase_reason")
	KeyStallAction    = attribute.Key("pilot.stall.action")
	KeyStallSilence   = attribute.Key("pilot.stall.silence_seconds")
	KeyPendingTools   = attribute.Key("pilot.stall.pending_tool_calls")
	KeyRetryResume    = attribute.Key("pilot.retry.resume")
	KeyRetryCounted   = attribute.Key("pilot.retry.counted")
	KeyRetryDelay     = attribute.Key("pilot.retry.delay_seconds")
	KeyFailures       = attribute.Key("pilot.retry.failures")
	KeyMaxFailures    = attribute.Key("pilot.retry.max_failures")
	KeyJobs           = attribute.Key("pilot.jobs")
	KeyFailedJobs     = attribute.Key("pilot.jobs.failed")
)

// Options configure New. Nil providers mean OpenTelemetry's global ones.
type Options struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// Telemetry holds pilot's tracer and instruments. It is safe for
// concurrent use.
type Telemetry struct {
	tracer trace.Tracer

	running    metric.Int64UpDownCounter
	attempts   metric.Int64Counter
	verdicts   metric.Int64Counter
	duration   metric.Float64Histogram
	firstOut   metric.Float64Histogram
	tokens     metric.Int64Histogram
	cost       metric.Float64Counter
	retries    metric.Int64Counter
	gateWaits  metric.Int64Counter
	gateWaited metric.Float64Histogram

	mu    sync.Mutex
	tasks map[string]trace.Span // run id → its open task span
	first map[string]time.Time  // run id → its first output line (Instrument)
}

// New makes the tracer and the instruments.
func New(o Options) (*Telemetry, error) {
	tp, mp := o.TracerProvider, o.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	t := &Telemetry{tracer: tp.Tracer(ScopeName), tasks: map[string]trace.Span{}, first: map[string]time.Time{}}
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	t.running, err = m.Int64UpDownCounter("pilot.jobs.running", metric.WithUnit("{job}"), metric.WithDescription("Workers running now."))
	check(err)
	t.attempts, err = m.Int64Counter("pilot.attempts", metric.WithUnit("{attempt}"), metric.WithDescription("Attempt verdicts, by outcome and failure class."))
	check(err)
	t.verdicts, err = m.Int64Counter("pilot.verdicts", metric.WithUnit("{verdict}"), metric.WithDescription("Task verdicts (retries included), by outcome and failure class."))
	check(err)
	t.duration, err = m.Float64Histogram("pilot.attempt.duration", metric.WithUnit("s"), metric.WithDescription("Duration of an attempt, from its start to its verdict."))
	check(err)
	t.firstOut, err = m.Float64Histogram("pilot.attempt.time_to_first_output", metric.WithUnit("s"), metric.WithDescription("Time from an attempt's start to its worker's first output line."))
	check(err)
	t.tokens, err = m.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"), metric.WithDescription("Number of input and output tokens used."))
	check(err)
	t.cost, err = m.Float64Counter("pilot.cost", metric.WithUnit("{USD}"), metric.WithDescription("Cost the workers reported, in US dollars."))
	check(err)
	t.retries, err = m.Int64Counter("pilot.retries", metric.WithUnit("{retry}"), metric.WithDescription("Retries of failed attempts, by failure class."))
	check(err)
	t.gateWaits, err = m.Int64Counter("pilot.provider_gate.waits", metric.WithUnit("{wait}"), metric.WithDescription("Scheduler jobs that waited for their provider's rate limit to reset."))
	check(err)
	t.gateWaited, err = m.Float64Histogram("pilot.provider_gate.wait.duration", metric.WithUnit("s"), metric.WithDescription("How long a scheduler job waited for its provider's rate limit to reset."))
	check(err)
	if len(errs) > 0 {
		return nil, fmt.Errorf("pilototel: making instruments: %v", errs)
	}
	return t, nil
}

// Instrument returns a copy of d whose OnLine and Observer also note each
// worker's first output line, for pilot.attempt.time_to_first_output (d's
// own OnLine and Observer still get everything). d is not changed.
func (t *Telemetry) Instrument(d *pilot.Dispatcher) *pilot.Dispatcher {
	c := *d
	onLine, observe := d.OnLine, d.Observer
	c.OnLine = func(runID string, l pilot.Line) {
		t.mu.Lock()
		if _, ok := t.first[runID]; !ok {
			t.first[runID] = time.Now()
		}
		t.mu.Unlock()
		if onLine != nil {
			onLine(runID, l)
		}
	}
	c.Observer = func(e pilot.Event) {
		if v := e.Verdict; v != nil {
			t.mu.Lock()
			first, ok := t.first[e.RunID]
			delete(t.first, e.RunID)
			t.mu.Unlock()
			if ok {
				start := e.Time.Add(-time.Duration(v.DurationMS) * time.Millisecond)
				t.firstOut.Record(context.Background(), max(first.Sub(start), 0).Seconds(),
					metric.WithAttributes(semconv.GenAIProviderNameKey.String(v.Provider), KeyMode.String(string(v.Mode))))
			}
		}
		if observe != nil {
			observe(e)
		}
	}
	return &c
}

// Dispatcher returns d wrapped in a [Dispatcher] reporting to t.
func (t *Telemetry) Dispatcher(d pilot.TaskDispatcher) *Dispatcher {
	return &Dispatcher{Dispatcher: d, Telemetry: t}
}

// nameTask names the open task span of the attempt runID after its job
// (a Fanout's or a scheduler's), when it is still open.
func (t *Telemetry) nameTask(runID, job string) {
	if runID == "" || job == "" {
		return
	}
	t.mu.Lock()
	s := t.tasks[runID]
	t.mu.Unlock()
	if s != nil {
		s.SetAttributes(KeyJob.String(job))
	}
}

func (t *Telemetry) openTask(runID string, s trace.Span) {
	t.mu.Lock()
	t.tasks[runID] = s
	t.mu.Unlock()
}

func (t *Telemetry) closeTask(runIDs []string) {
	t.mu.Lock()
	for _, id := range runIDs {
		delete(t.tasks, id)
	}
	t.mu.Unlock()
}
