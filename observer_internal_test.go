package pilot

import (
	"testing"

	"github.com/pilotworkers/pilot/event"
)

// A slow observer misses the events past the queue's bound, never the
// started or verdict event, and learns how many it missed.
func TestDeliveryCountsWhatASlowObserverMissed(t *testing.T) {
	stuck, gate := make(chan struct{}), make(chan struct{})
	var got []Event
	d := newDelivery(func(e Event) {
		if len(got) == 0 {
			close(stuck)
			<-gate // the observer is stuck on the first event
		}
		got = append(got, e)
	})
	d.push(Event{Type: event.Started})
	<-stuck
	for range maxQueuedEvents + 5 {
		d.push(Event{Type: event.Phase})
	}
	d.push(Event{Type: event.Verdict})
	close(gate)
	d.close()
	var types []string
	phases := 0
	for _, e := range got {
		if e.Type == event.Phase {
			phases++
			continue
		}
		types = append(types, e.Type)
		if e.Type == event.Dropped && e.Message != "5 events were not delivered: an observer was too slow to take them (events.log has every one)" {
			t.Errorf("dropped event %q, want 5 counted", e.Message)
		}
	}
	if phases != maxQueuedEvents {
		t.Errorf("%d phase events delivered, want %d", phases, maxQueuedEvents)
	}
	want := []string{event.Started, event.Verdict, event.Dropped}
	if len(types) != 3 || types[0] != want[0] || types[1] != want[1] || types[2] != want[2] {
		t.Errorf("events other than phases %q, want %q", types, want)
	}
}
