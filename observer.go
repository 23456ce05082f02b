package pilot

import (
	"strconv"
	"sync"

	"github.com/pilotworkers/pilot/event"
)

// maxQueuedEvents bounds the events waiting for a slow observer. Past it,
// events other than started and verdict are counted, not queued, and an
// event.Dropped event says how many once the observer catches up.
const maxQueuedEvents = 10000

// delivery hands a run's events to its observers from a goroutine of its
// own, in order, so that no observer can delay the supervision of the
// worker (its timeouts, stall checks and kills): emit only queues. The
// goroutine runs while events wait and ends when none is left (a run's
// events are few and far between: a thousand silent runs hold no
// goroutine for them). close waits until every queued event is delivered,
// so a Dispatch still returns after its observers have seen its verdict.
type delivery struct {
	deliver func(Event)

	mu      sync.Mutex
	queue   []Event
	dropped int
	closed  bool
	done    chan struct{} // closed when the running goroutine ends; nil when none runs
}

func newDelivery(deliver func(Event)) *delivery {
	return &delivery{deliver: deliver}
}

// push queues e, starting the goroutine when none runs; it never blocks
// on an observer.
func (d *delivery) push(e Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.queue) >= maxQueuedEvents && e.Type != event.Started && e.Type != event.Verdict {
		d.dropped++
		return
	}
	d.queue = append(d.queue, e)
	if d.done == nil && !d.closed {
		d.done = make(chan struct{})
		go d.loop(d.done)
	}
}

func (d *delivery) loop(done chan struct{}) {
	defer close(done)
	for {
		d.mu.Lock()
		batch, dropped := d.queue, d.dropped
		d.queue, d.dropped = nil, 0
		if len(batch) == 0 && dropped == 0 {
			d.done = nil
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
		for _, e := range batch {
			d.deliver(e)
		}
		if dropped > 0 {
			d.deliver(droppedEvent(dropped, batch))
		}
	}
}

// droppedEvent says that n events were not delivered, after batch.
func droppedEvent(n int, batch []Event) Event {
	e := Event{Type: event.Dropped, Message: strconv.Itoa(n) + " events were not delivered: an observer was too slow to take them (events.log has every one)"}
	if len(batch) > 0 {
		e.RunID, e.Time = batch[len(batch)-1].RunID, batch[len(batch)-1].Time
	}
	return e
}

// close waits until what is queued is delivered; events pushed after it
// are not.
func (d *delivery) close() {
	d.mu.Lock()
	d.closed = true
	done := d.done
	d.mu.Unlock()
	if done != nil {
		<-done
	}
}
