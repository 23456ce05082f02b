package loop

import (
	"context"
	"errors"
	"testing"
)

// A full provider makes an attempt wait, saying why, until a slot frees
// or its context ends; another provider's attempts do not wait for it.
func TestProviderSlotsWaitPerProvider(t *testing.T) {
	var s providerSlots
	width := func(n int) func() int { return func() int { return n } }
	noWait := func(why string) { t.Errorf("waited: %s", why) }
	release, err := s.take(context.Background(), "pi", width(1), noWait)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.take(context.Background(), "codex", width(1), noWait)
	if err != nil {
		t.Fatal(err)
	}
	other()
	for range 2 { // a limit of 0 bounds nothing: both run at once
		if _, err := s.take(context.Background(), "local", width(0), noWait); err != nil {
			t.Fatal(err)
		}
	}
	asked := 0
	for range 2 { // the limit is asked once per provider
		r, err := s.take(context.Background(), "glm", func() int { asked++; return 1 }, noWait)
		if err != nil {
			t.Fatal(err)
		}
		r()
	}
	if asked != 1 {
		t.Errorf("glm's limit was asked %d times, want once", asked)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var waited string
	_, err = s.take(ctx, "pi", width(1), func(why string) { waited = why; cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("take with pi full and its context ended: %v, want context.Canceled", err)
	}
	if want := "waiting for a slot of provider pi: all 1 of its slots are running"; waited != want {
		t.Errorf("waited %q, want %q", waited, want)
	}

	got := make(chan error, 1)
	go func() {
		r, err := s.take(context.Background(), "pi", width(1), func(string) { release() })
		if err == nil {
			r()
		}
		got <- err
	}()
	if err := <-got; err != nil {
		t.Errorf("take after the slot was given back: %v", err)
	}
}
