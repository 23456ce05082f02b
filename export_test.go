package pilot

import "context"

// What the external tests reach of the retry machinery: fake attempts and
// fake slots, so that policies are tested without processes or clocks.

// TestLink is an attempt's links to the attempts before it.
type TestLink struct {
	Key         string
	Attempt     int
	Previous    string
	ResumedFrom string
	Fallback    string
}

// TestSlot is a concurrency slot made of two functions.
type TestSlot struct {
	Acquire func(context.Context) error
	Release func()
}

func (s *TestSlot) acquire(ctx context.Context) error { return s.Acquire(ctx) }
func (s *TestSlot) release()                          { s.Release() }

// RetryWith is DispatchWithRetry over a fake attempt function and slot.
func RetryWith(ctx context.Context, attempt func(context.Context, Task, TestLink) (Verdict, error), observe func(Event),
	t Task, key RetryKey, p RetryPolicy, sl *TestSlot) (Verdict, error) {
	f := func(ctx context.Context, t Task, l attemptLink) (Verdict, error) {
		return attempt(ctx, t, TestLink{l.key, l.attempt, l.previous, l.resumedFrom, l.fallback})
	}
	var s slot
	if sl != nil {
		s = sl
	}
	return retryTask(ctx, f, observe, t, key, p, s)
}

// ClassifyRetried is classifyRetried: the class of a retry notice's reason.
var ClassifyRetried = ClassifyRetryNotice
