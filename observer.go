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
// worker (its timeouts, stall checks and kills): emit only queues. close
// waits until every queued event is delivered, so a Dispatch still returns
// after its observers have seen its verdict.
type delivery struct {
	deliver func(Event)

	mu      sync.Mutex
	queue   []Event
	dropped int
	closed  bool
	wake    chan struct{}
	done    chan struct{}
}

func newDelivery(deliver func(Event)) *delivery {
	d := &delivery{deliver: deliver, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go d.loop()
	return d
}

// push queues e; it never blocks on an observer.
func (d *delivery) push(e Event) {
	d.mu.Lock()
	if len(d.queue) >= maxQueuedEvents && e.Type != event.Started && e.Type != event.Verdict {
		d.dropped++
		d.mu.Unlock()
		return
	}
	d.queue = append(d.queue, e)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *delivery) loop() {
	defer close(d.done)
	for {
		d.mu.Lock()
		batch, dropped, closed := d.queue, d.dropped, d.closed
		d.queue, d.dropped = nil, 0
		d.mu.Unlock()
		for _, e := range batch {
			d.deliver(e)
		}
		if dropped > 0 {
			d.deliver(droppedEvent(dropped, batch))
		}
		if len(batch) == 0 && dropped == 0 {
			if closed {
				return
			}
			<-d.wake
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

// close delivers what is queued and ends the delivery goroutine.
func (d *delivery) close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
	<-d.done
}
