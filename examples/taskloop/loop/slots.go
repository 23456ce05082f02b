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

// take holds one of provider's limit slots until release is called,
// waiting while all of them are taken (wait is called once then, with
// what it waits for). It returns ctx's error if ctx ends first. A limit
// of 0 bounds nothing.
func (s *providerSlots) take(ctx context.Context, provider string, limit int, wait func(why string)) (release func(), err error) {
	if s == nil || limit <= 0 {
		return func() {}, nil
	}
	s.mu.Lock()
	c := s.slots[provider]
	if c == nil {
		// The first attempt of the provider sets its width for the run.
		c = make(chan struct{}, limit)
		if s.slots == nil {
			s.slots = map[string]chan struct{}{}
		}
		s.slots[provider] = c
	}
	s.mu.Unlock()
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
