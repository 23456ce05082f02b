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

// A fenceCheck is a launched generation's side of its fence: it renews
// the generation's lease, records the worker's run in the fence, and ends
// the dispatch when a newer generation took the fence, or when the lease
// could not be renewed for lostAfter (fail closed: a fence it cannot
// write may have moved on). The last is a timer of its own, so that a git
// command that hangs on shared storage cannot keep the worker running.
type fenceCheck struct {
	f      fence
	cancel context.CancelCauseFunc
	// every is the least time between two renewals (events wake the
	// ticks far more often); lostAfter the longest without one.
	every, lostAfter time.Duration

	mu      sync.Mutex
	oid     string // the fence as this generation last wrote it
	own     Owner
	renewed time.Time      // when the last renewal that landed began
	pending *pilot.Started // a started event not yet recorded
	expiry  *time.Timer    // fires lostAfter after renewed
	closed  bool
}

// errFenceLost ends a generation that could not renew its lease for
// longer than its lostAfter.
var errFenceLost = errors.New("temporal: the job's fence could not be renewed")

// newFenceCheck starts the lease of generation own, just written to the
// fence as oid, at now.
func newFenceCheck(f fence, oid string, own Owner, cancel context.CancelCauseFunc, interval time.Duration) *fenceCheck {
	c := &fenceCheck{f: f, oid: oid, own: own, cancel: cancel, every: interval / 2, lostAfter: 2 * interval, renewed: time.Now()}
	c.expiry = time.AfterFunc(c.lostAfter, func() {
		c.cancel(fmt.Errorf("%w for %v: it may have moved on, so the worker is ended before its lease (%v) runs out", errFenceLost, c.lostAfter, time.Duration(own.LeaseMS)*time.Millisecond))
	})
	return c
}

// tick renews the lease (recording started, if set, with it) unless the
// last renewal is recent.
func (c *fenceCheck) tick(ctx context.Context, started *pilot.Started) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if started != nil {
		c.pending = started
	}
	if c.closed || (c.pending == nil && time.Since(c.renewed) < c.every) {
		return
	}
	own := c.own
	own.Lease++
	if s := c.pending; s != nil {
		own.RunID, own.Record, own.AgentPid = s.RunID, s.Record, s.Pid
		own.AgentStart, _ = pidStart(s.Pid)
	}
	began := time.Now()
	// A cancelled attempt renews on while pilot ends its worker: the
	// tree lives until the dispatch returns.
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.lostAfter)
	oid, err := c.f.swap(gctx, c.oid, own)
	cancel()
	switch {
	case err == nil:
		c.oid, c.own, c.pending = oid, own, nil
		if c.expiry.Stop() { // not fired yet: the lease goes on
			c.renewed = began
			c.expiry.Reset(time.Until(began.Add(c.lostAfter)))
		}
	case errors.Is(err, ErrFenced):
		c.cancel(ErrFenced)
	}
	// Otherwise git failed: the next tick tries again, until the expiry.
}

// close stops the renewals and returns the fence as this generation last
// wrote it.
func (c *fenceCheck) close() (string, Owner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.expiry.Stop()
	return c.oid, c.own
}
