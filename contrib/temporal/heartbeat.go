package temporal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"go.temporal.io/sdk/activity"
)

// A heartbeater keeps a job's Progress, fed by the dispatch's events, and
// heartbeats it from a goroutine of its own.
type heartbeater struct {
	mu      sync.Mutex
	p       Progress
	started *pilot.Started // the started event, until the fence records it
	wake    chan struct{}
	// record sends a heartbeat: activity.RecordHeartbeat, but for tests.
	record func(context.Context, Progress)
}

func newHeartbeater(p Progress) *heartbeater {
	return &heartbeater{p: p, wake: make(chan struct{}, 1), record: recordHeartbeat}
}

// recordHeartbeat sends a heartbeat; a test replaces it to see each one.
var recordHeartbeat = func(ctx context.Context, p Progress) {
	activity.RecordHeartbeat(ctx, p)
}

// observe is the dispatch's Task.Observer.
func (h *heartbeater) observe(e pilot.Event) {
	h.mu.Lock()
	if !e.Time.IsZero() {
		h.p.LastActivity = e.Time
	}
	switch {
	case e.Started != nil:
		h.p.RunID, h.p.Phase = e.Started.RunID, "running"
		s := *e.Started
		h.started = &s
	case e.Session != nil:
		h.p.Phase = string(e.Session.Phase)
	case e.Type == event.StallInspection && e.Inspection != nil:
		// pilot's stall policy found the worker silent. It still lives:
		// the heartbeats go on, so that a retry elsewhere does not take
		// over a run that may yet answer and a cancel still reaches it,
		// and say what pilot saw.
		in := *e.Inspection
		in.StreamTail, in.PendingToolCallIDs = "", nil
		h.p.Inspection = &in
	}
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// snapshot returns the progress and the started event not yet handed
// out.
func (h *heartbeater) snapshot() (Progress, *pilot.Started) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.started
	h.started = nil
	return h.p, s
}

// start heartbeats every interval (and on each event) until the returned
// stop is called, which waits for the goroutine to end. tick, when set,
// runs after each heartbeat with the started event not yet seen.
func (h *heartbeater) start(ctx context.Context, interval time.Duration, tick func(context.Context, *pilot.Started)) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			p, started := h.snapshot()
			// Events may come faster than heartbeats are worth sending:
			// the SDK keeps the latest and sends at its throttle interval
			// (0.8 of the heartbeat timeout).
			h.record(ctx, p)
			if tick != nil {
				tick(ctx, started)
			}
			select {
			case <-quit:
				return
			case <-t.C:
			case <-h.wake:
			}
		}
	}()
	return func() {
		close(quit)
		wg.Wait()
	}
}

// A fenceCheck is a launched generation's side of its fence: it records
// the worker's run in it, and ends the dispatch when a newer generation
// took the fence.
type fenceCheck struct {
	f      fence
	oid    string // the fence as this generation last wrote it
	own    Owner
	cancel context.CancelCauseFunc
	// lostAfter is how long the fence may go unread before the
	// generation ends its worker (fail closed): a fence it cannot read
	// may have moved on. lastRead is when it last read it.
	lostAfter time.Duration
	lastRead  time.Time
}

// errFenceLost ends a generation that could not read its fence for
// longer than its lostAfter.
var errFenceLost = errors.New("temporal: the job's fence could not be read")

func (c *fenceCheck) tick(ctx context.Context, started *pilot.Started) {
	if started != nil {
		own := c.own
		own.RunID, own.Record, own.AgentPid = started.RunID, started.Record, started.Pid
		own.AgentStart, _ = pidStart(started.Pid)
		oid, err := c.f.swap(ctx, c.oid, own)
		switch {
		case err == nil:
			c.oid, c.own = oid, own
			return
		case errors.Is(err, ErrFenced):
			c.cancel(ErrFenced)
			return
		}
		// git failed: the next tick's check tells whether the fence is
		// still this generation's.
	}
	now, _, err := c.f.read(ctx)
	switch {
	case err == nil && now != c.oid:
		c.cancel(ErrFenced)
	case err == nil:
		c.lastRead = time.Now()
	case c.lostAfter > 0 && time.Since(c.lastRead) >= c.lostAfter:
		c.cancel(fmt.Errorf("%w for %v (%v): it may have moved on, so the worker is ended", errFenceLost, c.lostAfter, err))
	}
}
