package pilototel_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/contrib/otel/pilototel"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/schedule"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// setup returns Telemetry over in-memory exporters.
func setup(t *testing.T) (*pilototel.Telemetry, *tracetest.InMemoryExporter, *sdkmetric.ManualReader) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	tel, err := pilototel.New(pilototel.Options{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	return tel, exp, reader
}

// scripted is a fake pilot.Dispatcher: each provider's attempts follow a
// script, with the events a real dispatch emits.
func scripted() pilot.TaskDispatcher {
	var mu sync.Mutex
	calls := map[string]int{}
	return pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		mu.Lock()
		calls[tk.Provider]++
		n := calls[tk.Provider]
		mu.Unlock()
		id := fmt.Sprintf("run-%s-%d", tk.Provider, n)
		at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
		emit := func(e pilot.Event) {
			e.RunID = id
			tk.Observer(e)
		}
		emit(pilot.Event{Type: "worker_runner.started", Time: at(0), Started: &pilot.Started{Provider: tk.Provider, Mode: tk.Mode, RunID: id, Runner: "pi", Model: "m-" + tk.Provider, Pid: 100 + n, StartedAt: at(0)}})
		code0, code1 := 0, 1
		v := pilot.Verdict{Type: "worker_runner.verdict", Provider: tk.Provider, Mode: tk.Mode, RunID: id, Verdict: pilot.Completed, ExitCode: &code0, DurationMS: 2000}
		switch {
		case tk.Provider == "fails":
			v.Verdict, v.ExitCode = pilot.Failed, &code1
			v.FailureClass, v.FailureSource = pilot.FailProviderAuth, "provider-terminal-diagnostic"
			v.EvidenceSource, v.EvidenceExcerpt = "pi:stderr", "401 invalid api key"
		case tk.Provider == "retried" && n == 1:
			v.Verdict, v.ExitCode = pilot.Failed, &code1
			v.FailureClass, v.FailureSource, v.EvidenceSource = pilot.FailProviderConnection, "provider-terminal-diagnostic", "pi:stderr"
		case tk.Provider == "stalls":
			emit(pilot.Event{Type: "worker_runner.phase", Time: at(100), Session: &pilot.SessionState{Phase: pilot.PhaseToolRunning, Reason: "tool call t1 has no result"}})
			emit(pilot.Event{Type: "worker_runner.stall_inspection", Time: at(600), Inspection: &pilot.StallInspection{Action: "inspect", SilenceSeconds: 0.5, Phase: pilot.PhaseToolRunning, PendingToolCallIDs: []string{"t1"}, StreamTail: "tail"}})
			emit(pilot.Event{Type: "worker_runner.stall_inspection", Time: at(1600), Inspection: &pilot.StallInspection{Action: "terminate", SilenceSeconds: 1.5, Phase: pilot.PhaseToolRunning, PendingToolCallIDs: []string{"t1"}, StreamTail: "tail"}})
			emit(pilot.Event{Type: "worker_runner.terminate", Time: at(1600), Message: "session-stall: SIGTERM"})
			v.Verdict, v.ExitCode, v.Signal = pilot.Failed, nil, "SIGTERM"
			v.FailureClass, v.FailureSource, v.TerminationReason = pilot.FailSessionStall, "pilot-policy", pilot.FailSessionStall
			v.SessionPhase = pilot.PhaseToolRunning
		default:
			cost := 0.25
			v.Usage = &pilot.Usage{InputTokens: 1000, OutputTokens: 100, CacheReadTokens: 10, CostUSD: &cost}
		}
		emit(pilot.Event{Type: "worker_runner.verdict", Time: at(2000), Verdict: &v})
		return v, nil
	})
}

type spanRow struct {
	Name, Parent, Job string
	Status            codes.Code
	Desc              string
	Events            []string
}

func attrOf(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, a := range s.Attributes() {
		if a.Key == k {
			return a.Value
		}
	}
	return attribute.Value{}
}

// The span tree, attributes and metrics of a fanout with one success, one
// failure, one retry and one stall.
func TestFanoutSpansAndMetrics(t *testing.T) {
	tel, exp, reader := setup(t)
	var retried atomic.Int32 // the attempts of the retried job
	d := &retry.Dispatcher{Dispatcher: scripted(), Policy: retry.Policy{
		MaxFailures:  3,
		NonRetryable: []pilot.FailureClass{pilot.FailSessionStall},
		Sleep:        func(context.Context, time.Duration) error { return nil },
		Backoff:      func(int) time.Duration { return 10 * time.Second },
	}, OnResult: func(t pilot.Task, r retry.Result) {
		if t.Provider == "retried" {
			retried.Store(int32(r.Attempts))
		}
	}}
	jobs := []pilot.Job{
		{Name: "job-ok", Task: pilot.Task{Provider: "ok", Mode: pilot.ModeExplore, Prompt: "p"}},
		{Name: "job-fails", Task: pilot.Task{Provider: "fails", Mode: pilot.ModeExplore, Prompt: "p"}},
		{Name: "job-retried", Task: pilot.Task{Provider: "retried", Mode: pilot.ModeExplore, Prompt: "p"}},
		{Name: "job-stalls", Task: pilot.Task{Provider: "stalls", Mode: pilot.ModeExplore, Prompt: "p"}},
	}
	vs, err := tel.Fanout(context.Background(), &pilot.Fanout{Dispatcher: d, MaxParallel: 1}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 4 || retried.Load() != 2 || vs[2].Verdict.Verdict != pilot.Completed {
		t.Fatalf("verdicts: %+v", vs)
	}

	spans := exp.GetSpans().Snapshots()
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID().String()] = s
	}
	var rows []spanRow
	for _, s := range spans {
		r := spanRow{Name: s.Name(), Status: s.Status().Code, Desc: s.Status().Description}
		if p, ok := byID[s.Parent().SpanID().String()]; ok {
			r.Parent = p.Name()
			if p.Name() == "pilot.task" {
				r.Job = attrOf(p, pilototel.KeyJob).AsString() + "#" + fmt.Sprint(attrOf(s, pilototel.KeyAttempt).AsInt64())
			}
		}
		if s.Name() == "pilot.task" {
			r.Job = attrOf(s, pilototel.KeyJob).AsString()
		}
		for _, e := range s.Events() {
			ev := e.Name
			for _, a := range e.Attributes {
				if a.Key == pilototel.KeyStallAction || a.Key == pilototel.KeyPhase && e.Name == "pilot.phase" {
					ev += " " + a.Value.AsString()
				}
			}
			r.Events = append(r.Events, ev)
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name+rows[i].Job < rows[j].Name+rows[j].Job })
	want := []spanRow{
		{Name: "invoke_agent pi", Parent: "pilot.task", Job: "job-fails#1", Status: codes.Error, Desc: "provider-auth"},
		{Name: "invoke_agent pi", Parent: "pilot.task", Job: "job-ok#1"},
		{Name: "invoke_agent pi", Parent: "pilot.task", Job: "job-retried#1", Status: codes.Error, Desc: "provider-connection"},
		{Name: "invoke_agent pi", Parent: "pilot.task", Job: "job-retried#2"},
		{Name: "invoke_agent pi", Parent: "pilot.task", Job: "job-stalls#1", Status: codes.Error, Desc: "session-stall",
			Events: []string{"pilot.phase tool-running", "pilot.stall_inspection inspect", "pilot.stall_inspection terminate", "pilot.terminate"}},
		{Name: "pilot.fanout", Status: codes.Error, Desc: "2 of 4 jobs failed"},
		{Name: "pilot.task", Parent: "pilot.fanout", Job: "job-fails", Status: codes.Error, Desc: "provider-auth"},
		{Name: "pilot.task", Parent: "pilot.fanout", Job: "job-ok"},
		{Name: "pilot.task", Parent: "pilot.fanout", Job: "job-retried", Events: []string{"pilot.retry"}},
		{Name: "pilot.task", Parent: "pilot.fanout", Job: "job-stalls", Status: codes.Error, Desc: "session-stall"},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("span tree (-want +got):\n%s", diff)
	}

	// The successful attempt's attributes, GenAI conventions first.
	var ok sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "invoke_agent pi" && attrOf(s, pilototel.KeyRunID).AsString() == "run-ok-1" {
			ok = s
		}
	}
	if ok == nil {
		t.Fatal("no span for run-ok-1")
	}
	gotAttrs := map[string]string{}
	for _, a := range ok.Attributes() {
		gotAttrs[string(a.Key)] = a.Value.Emit()
	}
	wantAttrs := map[string]string{
		"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "ok", "gen_ai.agent.name": "pi",
		"gen_ai.request.model": "m-ok", "gen_ai.usage.input_tokens": "1000", "gen_ai.usage.output_tokens": "100",
		"gen_ai.usage.cache_read.input_tokens": "10", "gen_ai.usage.cache_creation.input_tokens": "0",
		"process.pid": "101", "process.exit.code": "0",
		"pilot.mode": "explore", "pilot.run_id": "run-ok-1", "pilot.attempt": "1", "pilot.runner": "pi",
		"pilot.verdict": "completed", "pilot.cost_usd": "0.25",
	}
	if diff := cmp.Diff(wantAttrs, gotAttrs); diff != "" {
		t.Errorf("attributes of the successful attempt (-want +got):\n%s", diff)
	}
	if !ok.StartTime().Equal(t0) || !ok.EndTime().Equal(t0.Add(2*time.Second)) {
		t.Errorf("attempt span from %v to %v, want the worker's start and verdict", ok.StartTime(), ok.EndTime())
	}
	for _, s := range spans {
		if s.Name() == "invoke_agent pi" && attrOf(s, pilototel.KeyRunID).AsString() == "run-fails-1" {
			if got := attrOf(s, "error.type").AsString(); got != "provider-auth" {
				t.Errorf("error.type = %q, want provider-auth", got)
			}
			if got := attrOf(s, pilototel.KeyEvidenceSource).AsString(); got != "pi:stderr" {
				t.Errorf("pilot.evidence_source = %q", got)
			}
			for _, a := range s.Attributes() {
				if strings.Contains(a.Value.Emit(), "401 invalid api key") {
					t.Errorf("the evidence excerpt is on the span: %s", a.Key)
				}
			}
		}
	}

	m := collect(t, reader)
	if diff := cmp.Diff(map[string]int64{
		"verdict=completed":                            2,
		"verdict=error error.type=provider-auth":       1,
		"verdict=error error.type=provider-connection": 1,
		"verdict=error error.type=session-stall":       1,
	}, m.sums("pilot.attempts", "pilot.verdict", "error.type")); diff != "" {
		t.Errorf("pilot.attempts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{
		"verdict=completed":                      2,
		"verdict=error error.type=provider-auth": 1,
		"verdict=error error.type=session-stall": 1,
	}, m.sums("pilot.verdicts", "pilot.verdict", "error.type")); diff != "" {
		t.Errorf("pilot.verdicts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{"retried provider-connection": 1}, m.sums("pilot.retries", "gen_ai.provider.name", "pilot.failure_class")); diff != "" {
		t.Errorf("pilot.retries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{"ok": 0, "fails": 0, "retried": 0, "stalls": 0}, m.sums("pilot.jobs.running", "gen_ai.provider.name")); diff != "" {
		t.Errorf("pilot.jobs.running after the fanout (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{"ok input": 1000, "ok output": 100, "retried input": 1000, "retried output": 100},
		m.histSums("gen_ai.client.token.usage", "gen_ai.provider.name", "gen_ai.token.type")); diff != "" {
		t.Errorf("gen_ai.client.token.usage (-want +got):\n%s", diff)
	}
	if got := m.histCount("pilot.attempt.duration"); got != 5 {
		t.Errorf("pilot.attempt.duration has %d samples, want 5 (one per attempt)", got)
	}
	if got := m.floatSum("pilot.cost"); got != 0.5 {
		t.Errorf("pilot.cost = %v, want 0.5", got)
	}
}

// metrics is one collection, by instrument name.
type metrics map[string]metricdata.Aggregation

func collect(t *testing.T, r *sdkmetric.ManualReader) metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	m := metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, x := range sm.Metrics {
			m[x.Name] = x.Data
		}
	}
	return m
}

// key joins the values of keys in set (with "verdict=" and "error.type="
// prefixes for those keys, to read well).
func key(set attribute.Set, keys ...string) string {
	var parts []string
	for _, k := range keys {
		v, ok := set.Value(attribute.Key(k))
		if !ok {
			continue
		}
		switch k {
		case "pilot.verdict":
			parts = append(parts, "verdict="+v.Emit())
		case "error.type":
			parts = append(parts, "error.type="+v.Emit())
		default:
			parts = append(parts, v.Emit())
		}
	}
	return strings.Join(parts, " ")
}

func (m metrics) sums(name string, keys ...string) map[string]int64 {
	out := map[string]int64{}
	if s, ok := m[name].(metricdata.Sum[int64]); ok {
		for _, dp := range s.DataPoints {
			out[key(dp.Attributes, keys...)] += dp.Value
		}
	}
	return out
}

func (m metrics) histSums(name string, keys ...string) map[string]int64 {
	out := map[string]int64{}
	if h, ok := m[name].(metricdata.Histogram[int64]); ok {
		for _, dp := range h.DataPoints {
			out[key(dp.Attributes, keys...)] += dp.Sum
		}
	}
	return out
}

func (m metrics) histCount(name string) uint64 {
	var n uint64
	if h, ok := m[name].(metricdata.Histogram[float64]); ok {
		for _, dp := range h.DataPoints {
			n += dp.Count
		}
	}
	return n
}

func (m metrics) floatSum(name string) float64 {
	var n float64
	if s, ok := m[name].(metricdata.Sum[float64]); ok {
		for _, dp := range s.DataPoints {
			n += dp.Value
		}
	}
	return n
}

// A scheduler job whose provider is rate limited waits for the gate, and
// the wait is counted and measured by the scheduler's clock.
func TestScheduleGateWait(t *testing.T) {
	tel, exp, reader := setup(t)
	now := t0
	calls := 0
	fake := pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		calls++
		v := pilot.Verdict{Provider: tk.Provider, Mode: tk.Mode, RunID: fmt.Sprintf("run-%d", calls), Verdict: pilot.Completed}
		if calls == 1 {
			v.Verdict, v.FailureClass, v.RetryAfterMS = pilot.Failed, pilot.FailProviderRateLimit, 30000
		}
		tk.Observer(pilot.Event{Type: "worker_runner.started", RunID: v.RunID, Time: now, Started: &pilot.Started{Provider: tk.Provider, Runner: "pi", RunID: v.RunID, StartedAt: now}})
		tk.Observer(pilot.Event{Type: "worker_runner.verdict", RunID: v.RunID, Time: now, Verdict: &v})
		return v, nil
	})
	s := &schedule.Scheduler{
		Dispatcher: fake,
		Now:        func() time.Time { return now },
		After: func(d time.Duration) <-chan time.Time {
			now = now.Add(d)
			c := make(chan time.Time, 1)
			c <- now
			return c
		},
	}
	rs, err := tel.Schedule(context.Background(), s, schedule.Graph{Jobs: []schedule.Job{
		{ID: "api", Task: pilot.Task{Provider: "glm", Mode: pilot.ModeCode, Prompt: "p"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Status != schedule.StatusComplete || rs[0].Gated != 1 {
		t.Fatalf("result: %+v", rs[0])
	}
	m := collect(t, reader)
	if diff := cmp.Diff(map[string]int64{"glm": 1}, m.sums("pilot.provider_gate.waits", "gen_ai.provider.name")); diff != "" {
		t.Errorf("pilot.provider_gate.waits (-want +got):\n%s", diff)
	}
	h, _ := m["pilot.provider_gate.wait.duration"].(metricdata.Histogram[float64])
	if len(h.DataPoints) != 1 || h.DataPoints[0].Sum != 30 {
		t.Errorf("pilot.provider_gate.wait.duration: %+v, want one wait of 30 s", h.DataPoints)
	}
	var tasks, runs int
	for _, sp := range exp.GetSpans().Snapshots() {
		switch sp.Name() {
		case "pilot.task":
			tasks++
			if got := attrOf(sp, pilototel.KeyJob).AsString(); got != "api" {
				t.Errorf("task span's pilot.job = %q, want api", got)
			}
		case "pilot.schedule":
			runs++
			if len(sp.Events()) == 0 || sp.Events()[0].Name != "pilot.schedule.gated" {
				t.Errorf("schedule span events: %v", sp.Events())
			}
		}
	}
	if tasks != 2 || runs != 1 {
		t.Errorf("%d task spans and %d schedule spans, want 2 (the gated dispatch and its resumption) and 1", tasks, runs)
	}
}

// pilot's own failure: an error from Dispatch is recorded on the task
// span, whose status is Error.
func TestDispatchError(t *testing.T) {
	tel, exp, _ := setup(t)
	d := tel.Dispatcher(pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		tk.Observer(pilot.Event{Type: "worker_runner.started", RunID: "r1", Time: t0, Started: &pilot.Started{Runner: "pi", RunID: "r1", StartedAt: t0}})
		return pilot.Verdict{}, fmt.Errorf("pilot: writing record.json: disk full")
	}))
	if _, err := d.Dispatch(context.Background(), pilot.Task{Provider: "glm", Mode: pilot.ModeCode}); err == nil {
		t.Fatal("no error")
	}
	spans := exp.GetSpans().Snapshots()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the task and its cut-short attempt", len(spans))
	}
	for _, s := range spans {
		if s.Status().Code != codes.Error || !strings.Contains(s.Status().Description, "disk full") {
			t.Errorf("%s: status %v %q", s.Name(), s.Status().Code, s.Status().Description)
		}
	}
}
