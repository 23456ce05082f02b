package loop

import (
	"context"
	"fmt"
	"sync"
)

// providerSlots bounds how many stage attempts of each provider run at
// once across a loop's tasks: its MaxParallel (a providers file's
// max_parallel), as the Dispatcher's Limits say. A task is one scheduler
// job across its stages, and its stages may use different providers, so
// the bound is taken per attempt, not per task: an attempt waiting for its
// provider's slot keeps its task's slot of Loop.MaxParallel.
type providerSlots struct {
	mu    sync.Mutex
	slots map[string]chan struct{}
}

// take holds one of provider's slots until release is called, waiting
// while all of them are taken (wait is called once then, with what it
// waits for). It returns ctx's error if ctx ends first. limit is asked
// once per provider and run (pilot.LimitsOf reads the run history); a
// limit of 0 bounds nothing.
func (s *providerSlots) take(ctx context.Context, provider string, limit func() int, wait func(why string)) (release func(), err error) {
	if s == nil {
		return func() {}, nil
	}
	s.mu.Lock()
	c, known := s.slots[provider]
	if !known {
		if n := limit(); n > 0 {
			c = make(chan struct{}, n)
		}
		if s.slots == nil {
			s.slots = map[string]chan struct{}{}
		}
		s.slots[provider] = c // nil: unbounded
	}
	s.mu.Unlock()
	if c == nil {
		return func() {}, nil
	}
	select {
	case c <- struct{}{}:
	default:
		wait(fmt.Sprintf("waiting for a slot of provider %s: all %d of its slots are running", provider, cap(c)))
		select {
		case c <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return func() { <-c }, nil
}
