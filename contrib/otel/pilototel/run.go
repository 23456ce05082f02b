package pilototel

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/schedule"
)

// Fanout runs f's jobs under a pilot.fanout span (a child of the span in
// ctx), each job's task span its child, named after the job (pilot.job).
// f's Dispatcher is wrapped in a [Dispatcher] unless it is one already; f
// is not changed. The span's status is Error when Run fails or a job's
// verdict is not a success.
func (t *Telemetry) Fanout(ctx context.Context, f *pilot.Fanout, jobs []pilot.Job) ([]pilot.JobResult, error) {
	ctx, span := t.tracer.Start(ctx, "pilot.fanout", trace.WithAttributes(KeyJobs.Int(len(jobs))))
	defer span.End()
	c := *f
	if _, ok := c.Dispatcher.(*Dispatcher); !ok && c.Dispatcher != nil {
		c.Dispatcher = t.Dispatcher(c.Dispatcher)
	}
	onEvent := f.OnEvent
	c.OnEvent = func(i int, e pilot.Event) {
		if e.Started != nil {
			t.nameTask(e.RunID, e.Started.Job)
		}
		if e.Type == event.FanoutWarning {
			span.AddEvent("pilot.fanout.warning", trace.WithTimestamp(e.Time))
		}
		if onEvent != nil {
			onEvent(i, e)
		}
	}
	vs, err := c.Run(ctx, jobs)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return vs, err
	}
	failed := 0
	for _, v := range vs {
		if !v.Verdict.Verdict.Success() {
			failed++
		}
	}
	span.SetAttributes(KeyFailedJobs.Int(failed))
	if failed > 0 {
		span.SetStatus(codes.Error, fmt.Sprintf("%d of %d jobs failed", failed, len(vs)))
	}
	return vs, nil
}

// Schedule runs g on s under a pilot.schedule span (a child of the span in
// ctx), each job's task span its child, named after the job (pilot.job).
// The scheduler's decisions become span events (pilot.schedule.gated,
// pilot.schedule.blocked, ...) with the job (pilot.job), and a job that
// waits for its provider's rate limit counts in pilot.provider_gate.waits
// and, once it starts again, pilot.provider_gate.wait.duration (by s's
// clock). s's Dispatcher is wrapped in a [Dispatcher] unless it is one
// already; s is not changed.
func (t *Telemetry) Schedule(ctx context.Context, s *schedule.Scheduler, g schedule.Graph) ([]schedule.Result, error) {
	ctx, span := t.tracer.Start(ctx, "pilot.schedule", trace.WithAttributes(KeyJobs.Int(len(g.Jobs))))
	defer span.End()
	c := *s
	if _, ok := c.Dispatcher.(*Dispatcher); !ok && c.Dispatcher != nil {
		c.Dispatcher = t.Dispatcher(c.Dispatcher)
	}
	now := s.Now
	if now == nil {
		now = time.Now
	}
	var mu sync.Mutex
	gatedAt := map[string]time.Time{} // job → when it began to wait for its provider
	onEvent := s.OnEvent
	c.OnEvent = func(e schedule.Event) {
		switch e.Type {
		case schedule.EventDispatch:
			if d := e.Dispatch; d != nil && d.Started != nil {
				t.nameTask(d.RunID, e.Job)
			}
		case schedule.EventGated:
			provider := semconv.GenAIProviderNameKey.String(e.Provider)
			mu.Lock()
			if _, waiting := gatedAt[e.Job]; !waiting {
				gatedAt[e.Job] = now()
				t.gateWaits.Add(ctx, 1, metric.WithAttributes(provider))
			}
			mu.Unlock()
			span.AddEvent("pilot.schedule.gated", trace.WithAttributes(KeyJob.String(e.Job), provider,
				attribute.String("pilot.schedule.until", e.Until.UTC().Format(time.RFC3339Nano))))
		case schedule.EventSelected:
			mu.Lock()
			since, waited := gatedAt[e.Job]
			delete(gatedAt, e.Job)
			mu.Unlock()
			if waited {
				t.gateWaited.Record(ctx, now().Sub(since).Seconds(), metric.WithAttributes(semconv.GenAIProviderNameKey.String(e.Provider)))
			}
		case schedule.EventBlocked, schedule.EventDeferred:
			span.AddEvent("pilot."+e.Type, trace.WithAttributes(KeyJob.String(e.Job)))
		}
		if onEvent != nil {
			onEvent(e)
		}
	}
	rs, err := c.Run(ctx, g)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return rs, err
	}
	notDone := 0
	for _, r := range rs {
		if r.Status != schedule.StatusComplete {
			notDone++
		}
	}
	span.SetAttributes(KeyFailedJobs.Int(notDone), attribute.String("pilot.schedule.status", schedule.GroupStatus(rs)))
	if notDone > 0 {
		span.SetStatus(codes.Error, fmt.Sprintf("%d of %d jobs did not complete", notDone, len(rs)))
	}
	return rs, nil
}
