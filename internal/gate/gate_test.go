package gate

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)

func TestASlotBoundHoldsTheProvidersJobsOnly(t *testing.T) {
	pokes := 0
	s := New(func(p string) int { return map[string]int{"a": 2}[p] }, func() { pokes++ })
	s.Take("a")
	if st := s.Check("a", t0); !st.Open() {
		t.Fatalf("one of a's two slots runs: %+v, want open", st)
	}
	s.Take("a")
	st := s.Check("a", t0)
	if st.Full != 2 || st.Open() {
		t.Fatalf("both of a's slots run: %+v, want full at 2", st)
	}
	if got, want := st.Waiting("a"), "waiting for a slot of provider a: all 2 of its slots are running"; got != want {
		t.Errorf("Waiting = %q, want %q", got, want)
	}
	for range 5 {
		s.Take("b")
	}
	if st := s.Check("b", t0); !st.Open() {
		t.Errorf("b has no bound, yet %+v", st)
	}
	s.Done("a")
	if st := s.Check("a", t0); !st.Open() || pokes != 1 {
		t.Errorf("after a job of a ended: %+v, %d pokes; want open, one poke", st, pokes)
	}
}

func TestARateLimitHoldsUntilTheLaterReset(t *testing.T) {
	s := New(nil, nil)
	until, closed := s.Learn("a", Failure{RateLimit: true, RetryAfter: time.Minute}, t0)
	if !until.Equal(t0.Add(time.Minute)) || closed != "" {
		t.Fatalf("Learn = %v %q, want the reset a minute on and open", until, closed)
	}
	s.Learn("a", Failure{RateLimit: true, RetryAfter: time.Second}, t0) // an earlier reset does not shorten the hold
	st := s.Check("a", t0.Add(30*time.Second))
	if !st.Until.Equal(t0.Add(time.Minute)) {
		t.Errorf("half a minute on: %+v, want held until the later reset", st)
	}
	if got := st.Waiting("a"); got != "waiting for provider a's rate limit to reset at 2026-12-04T15:01:00Z" {
		t.Errorf("Waiting = %q", got)
	}
	if st := s.Check("a", t0.Add(time.Minute)); !st.Open() {
		t.Errorf("at the reset: %+v, want open", st)
	}
	if got := s.Hold("a", t0.Add(time.Hour)); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("Hold = %v, want an hour on", got)
	}
}

func TestAUsedUpQuotaClosesTheProviderWithTheFirstReason(t *testing.T) {
	pokes := 0
	s := New(nil, func() { pokes++ })
	if _, closed := s.Learn("a", Failure{RateLimit: true}, t0); closed != "" {
		t.Fatalf("a rate limit without a reset closed the provider: %q", closed)
	}
	_, closed := s.Learn("a", Failure{Quota: true, Job: "j1", Evidence: "insufficient_quota"}, t0)
	want := "provider a quota used up (job j1): insufficient_quota"
	if closed != want {
		t.Fatalf("closed = %q, want %q", closed, want)
	}
	s.Learn("a", Failure{Quota: true, Job: "j2", Evidence: "other"}, t0)
	if st := s.Check("a", t0.Add(24*time.Hour)); st.Closed != want || st.Open() || st.Waiting("a") != "" {
		t.Errorf("a day on: %+v, want closed with the first reason", st)
	}
	if st := s.Check("b", t0); !st.Open() {
		t.Errorf("b shares a's closed gate: %+v", st)
	}
	if pokes == 0 {
		t.Error("closing the provider did not poke the loop, whose waiting jobs end")
	}
}

func TestAQuotaWithAKnownResetHoldsInsteadOfClosing(t *testing.T) {
	s := New(nil, nil)
	until, closed := s.Learn("a", Failure{Quota: true, Text: "You've hit your usage limit. Try again at 3:04 PM."}, t0)
	if closed != "" || !until.Equal(time.Date(2026, 12, 4, 15, 4, 0, 0, time.UTC)) {
		t.Errorf("Learn = %v %q, want held until 3:04 PM and open", until, closed)
	}
	if _, ok := (Failure{Text: "try again at 3:04 PM"}).ResetAt(t0); ok {
		t.Error("a success's text named a reset")
	}
}
