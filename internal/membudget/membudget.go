// Package membudget shares a memory budget among the process trees of a
// fleet's running jobs, for Fanout and the scheduler.
//
// A running job counts for the more of what its tree holds now and what it
// is expected to hold at its peak: a tree that has just started holds
// little yet, and counting only that would start every job at once. A job
// is let in when what the running jobs count plus its own expected peak
// fits the budget, or when nothing runs, so that the budget cannot
// deadlock: one job always runs, however large.
package membudget

import (
	"context"
	"fmt"
	"sync"
)

// A Budget is a memory budget in bytes. Its methods are safe for
// concurrent use.
type Budget struct {
	limit int64

	mu      sync.Mutex
	holds   map[*Hold]struct{}
	changed chan struct{} // closed, and replaced, when room may have been made
}

// A Hold is one running job's share of a Budget.
type Hold struct {
	b        *Budget
	expected int64
	rss      int64 // what its tree holds now, as last observed
	released bool
}

// Usage is what a Budget's running jobs count, for a caller that says why
// a job waits.
type Usage struct {
	Limit   int64 // the budget
	InUse   int64 // what the running jobs count
	Running int   // how many jobs run
}

// Waiting says why a job expected to peak at expected bytes waits, when
// the running jobs count u: "waiting for memory: 2 running job(s) count
// 1.2GiB of the 1.5GiB budget, and this one expects 640MiB".
func (u Usage) Waiting(expected int64) string {
	return fmt.Sprintf("waiting for memory: %d running job(s) count %s of the %s budget, and this one expects %s",
		u.Running, approx(u.InUse), approx(u.Limit), approx(expected))
}

// approx is n bytes to a tenth of a MiB or GiB, or whole when exact.
func approx(n int64) string {
	unit, name := int64(1<<20), "MiB"
	if n >= 1<<30 {
		unit, name = 1<<30, "GiB"
	}
	if n%unit == 0 {
		return fmt.Sprintf("%d%s", n/unit, name)
	}
	return fmt.Sprintf("%.1f%s", float64(n)/float64(unit), name)
}

// New returns a budget of limit bytes.
func New(limit int64) *Budget {
	return &Budget{limit: limit, holds: map[*Hold]struct{}{}, changed: make(chan struct{})}
}

// inUse is what the running jobs count; b.mu is held.
func (b *Budget) inUse() int64 {
	var n int64
	for h := range b.holds {
		n += max(h.rss, h.expected)
	}
	return n
}

// TryAcquire lets a job expected to peak at expected bytes in, if it fits
// or nothing runs, and returns its hold; otherwise it returns nil and what
// the running jobs count.
func (b *Budget) TryAcquire(expected int64) (*Hold, Usage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := Usage{Limit: b.limit, InUse: b.inUse(), Running: len(b.holds)}
	if len(b.holds) > 0 && u.InUse+expected > b.limit {
		return nil, u
	}
	h := &Hold{b: b, expected: expected}
	b.holds[h] = struct{}{}
	return h, u
}

// Changed returns a channel closed when room may have been made since the
// call: a job released its hold, or its tree shrank.
func (b *Budget) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// Acquire waits until a job expected to peak at expected bytes fits, and
// returns its hold; waiting, when not nil, is called once if it must wait
// first, with what the running jobs count then. It returns ctx's error if
// ctx ends first.
func (b *Budget) Acquire(ctx context.Context, expected int64, waiting func(Usage)) (*Hold, error) {
	for told := false; ; told = true {
		changed := b.Changed() // before the try: no change is missed
		h, u := b.TryAcquire(expected)
		if h != nil {
			return h, nil
		}
		if !told && waiting != nil {
			waiting(u)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// notify wakes the waiters; b.mu is held.
func (b *Budget) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// Observe records what the job's tree holds now.
func (h *Hold) Observe(rss int64) {
	if h == nil {
		return
	}
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.released || rss == h.rss {
		return
	}
	shrank := max(rss, h.expected) < max(h.rss, h.expected)
	h.rss = rss
	if shrank {
		b.notify()
	}
}

// Release gives the job's share back; later calls do nothing.
func (h *Hold) Release() {
	if h == nil {
		return
	}
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.released {
		return
	}
	h.released = true
	delete(b.holds, h)
	b.notify()
}
