package membudget

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestTryAcquire(t *testing.T) {
	b := New(100)
	big, u := b.TryAcquire(150)
	if big == nil || u.Running != 0 {
		t.Fatalf("a job over the whole budget, nothing running: %v, %+v; want it let in", big, u)
	}
	if h, u := b.TryAcquire(1); h != nil || u.InUse != 150 || u.Running != 1 {
		t.Fatalf("beside it: %v, %+v; want to wait, 150 in use by 1", h, u)
	}
	big.Release()
	big.Release() // a no-op
	a, _ := b.TryAcquire(40)
	c, _ := b.TryAcquire(60)
	if a == nil || c == nil {
		t.Fatal("40 + 60 of 100 did not fit")
	}
	if h, _ := b.TryAcquire(1); h != nil {
		t.Fatal("a full budget let one more in")
	}
	// A job counts for the more of its tree and its expectation.
	a.Observe(10)
	if h, _ := b.TryAcquire(1); h != nil {
		t.Error("a tree below its expectation made room")
	}
	a.Observe(70)
	c.Release()
	if h, u := b.TryAcquire(40); h != nil || u.InUse != 70 {
		t.Errorf("70 held, 40 more: %v, %+v; want to wait", h, u)
	}
	if h, _ := b.TryAcquire(30); h == nil {
		t.Error("70 held, 30 more did not fit")
	}
}

// Acquire waits for room: a release, or a tree that shrank.
func TestAcquireWaitsForRoom(t *testing.T) {
	b := New(100)
	a, _ := b.TryAcquire(50)
	a.Observe(90)
	got := make(chan *Hold)
	waiting := make(chan Usage, 1)
	go func() {
		h, err := b.Acquire(context.Background(), 40, func(u Usage) { waiting <- u })
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	if u := <-waiting; u.InUse != 90 || u.Running != 1 || u.Limit != 100 {
		t.Errorf("waiting with %+v; want 90 of 100 held by 1", u)
	}
	changed := b.Changed()
	a.Observe(95) // grew: still no room, and no wake-up
	select {
	case <-changed:
		t.Fatal("a growing tree woke the waiters")
	default:
	}
	a.Observe(55) // shrank: room for 40 (55 + 40 <= 100)
	if h := <-got; h == nil {
		t.Error("no hold after the tree shrank")
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		_, err := b.Acquire(ctx, 60, nil)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire after cancel = %v", err)
	}
}

// A budget that fits two jobs runs at most two at once, and every job
// gets its turn.
func TestAtMostWhatFitsRuns(t *testing.T) {
	b := New(250)
	var running, most, ran atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := b.Acquire(context.Background(), 100, nil)
			if err != nil {
				t.Error(err)
				return
			}
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			h.Observe(120)
			running.Add(-1)
			ran.Add(1)
			h.Release()
		}()
	}
	wg.Wait()
	if most.Load() > 2 || ran.Load() != 20 {
		t.Errorf("%d ran, at most %d at once; want all 20, at most 2", ran.Load(), most.Load())
	}
}

func TestWaiting(t *testing.T) {
	u := Usage{Limit: 12 << 30, InUse: 11<<30 + 1<<29, Running: 18}
	want := "waiting for memory: 18 running job(s) count 11.5GiB of the 12GiB budget, and this one expects 640MiB"
	if got := u.Waiting(640 << 20); got != want {
		t.Errorf("Waiting = %q, want %q", got, want)
	}
}
