// Package gate holds the provider gates a fleet's jobs pass before they
// start, for Fanout and the scheduler alike: how many of a provider's jobs
// may run at once, until when its rate limit holds its jobs back, and
// whether a used-up quota closed it for the rest of the run.
//
// A Set decides nothing by itself and waits for nothing: each loop asks it
// whether a job may start now (Check), counts the jobs it starts and ends
// (Take, Done), and tells it what a failure said of the provider (Learn).
// Waiting for a gate holds none of the loop's slots.
package gate

import (
	"fmt"
	"sync"
	"time"
)

// A Set is the gates of one run's providers. Its methods are safe for
// concurrent use.
type Set struct {
	limit func(provider string) int // how many of its jobs may run at once; 0: no bound
	poke  func()                    // a gate may have opened

	mu    sync.Mutex
	gates map[string]*state
}

// state is one provider's gate.
type state struct {
	limit   int
	running int
	until   time.Time // rate limited until then
	closed  string    // why it is closed for the rest of the run
}

// New returns the gates of a run. limit says how many jobs of a provider
// may run at once (0: no bound; nil: no provider is bounded); it is asked
// once per provider. poke, when not nil, is called (never with the Set's
// lock held) after a change that may let a waiting job start: a job ended,
// or a gate closed (its waiting jobs end).
func New(limit func(provider string) int, poke func()) *Set {
	return &Set{limit: limit, poke: poke, gates: map[string]*state{}}
}

// gate is provider's state; s.mu is held.
func (s *Set) gate(provider string) *state {
	g := s.gates[provider]
	if g == nil {
		g = &state{}
		if s.limit != nil {
			g.limit = max(s.limit(provider), 0)
		}
		s.gates[provider] = g
	}
	return g
}

// Status is what a provider's gate says of a job that would start now.
type Status struct {
	// Closed is why the provider is closed for the rest of the run: its
	// jobs end blocked with this reason. Empty when it is open.
	Closed string
	// Until is when the provider's rate limit resets, when that is later
	// than now: its jobs wait until then.
	Until time.Time
	// Full is the provider's bound when all of its slots run: its jobs
	// wait for one of them to end. Zero when a slot is free.
	Full int
}

// Open reports whether a job may start.
func (st Status) Open() bool { return st.Closed == "" && st.Until.IsZero() && st.Full == 0 }

// Waiting says why a job of provider waits, for a live table: "" when it
// need not.
func (st Status) Waiting(provider string) string {
	switch {
	case st.Closed != "":
		return ""
	case !st.Until.IsZero():
		return "waiting for provider " + provider + "'s rate limit to reset at " + st.Until.UTC().Format(time.RFC3339)
	case st.Full > 0:
		return fmt.Sprintf("waiting for a slot of provider %s: all %d of its slots are running", provider, st.Full)
	}
	return ""
}

// Check is what provider's gate says of a job that would start at now.
func (s *Set) Check(provider string, now time.Time) Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.gate(provider)
	var st Status
	switch {
	case g.closed != "":
		st.Closed = g.closed
	case g.until.After(now):
		st.Until = g.until
	case g.limit > 0 && g.running >= g.limit:
		st.Full = g.limit
	}
	return st
}

// Take counts a job of provider that starts now: it holds one of the
// provider's slots until Done.
func (s *Set) Take(provider string) {
	s.mu.Lock()
	s.gate(provider).running++
	s.mu.Unlock()
}

// Done gives back the slot of a job of provider that Take counted.
func (s *Set) Done(provider string) {
	s.mu.Lock()
	g := s.gate(provider)
	if g.running > 0 {
		g.running--
	}
	s.mu.Unlock()
	s.wake()
}

func (s *Set) wake() {
	if s.poke != nil {
		s.poke()
	}
}

// A Failure is what a job's failed attempt says of its provider.
type Failure struct {
	// RateLimit and Quota say which limit the attempt met, if either.
	RateLimit, Quota bool
	// RetryAfter is the wait the provider asked for; zero when it named
	// none.
	RetryAfter time.Duration
	// Text is the attempt's evidence and stderr, where a CLI names the
	// clock time its limit resets at.
	Text string
	// Job names the job that failed, and Evidence is its verdict's
	// evidence: a closed provider's jobs end blocked with them.
	Job, Evidence string
}

// ResetAt says whether f is a limit with a known reset, and when: the
// retry-after the provider asked for, or the clock time its CLI named
// ("resets 3pm", "try again at 3:04 PM"), later than now.
func (f Failure) ResetAt(now time.Time) (time.Time, bool) {
	if !f.RateLimit && !f.Quota {
		return time.Time{}, false
	}
	if f.RetryAfter > 0 {
		return now.Add(f.RetryAfter), true
	}
	if t, ok := resetTime(f.Text, now); ok && t.After(now) {
		return t, true
	}
	return time.Time{}, false
}

// Closes says why f, a used-up quota, closes provider: "provider glm quota
// used up (job fix-login): <its evidence>".
func (f Failure) Closes(provider string) string {
	reason := "provider " + provider + " quota used up (job " + f.Job + ")"
	if f.Evidence != "" {
		reason += ": " + f.Evidence
	}
	return reason
}

// Learn takes what f says of provider at now: a limit with a known reset
// holds the provider's jobs until it (the later of two resets stands); a
// used-up quota with none closes the provider for the rest of the run,
// unless it is closed already (the first failure's reason stands). It
// returns the reset, and why the provider is closed ("" when it is open).
func (s *Set) Learn(provider string, f Failure, now time.Time) (time.Time, string) {
	until, ok := f.ResetAt(now)
	s.mu.Lock()
	g := s.gate(provider)
	switch {
	case ok:
		if until.After(g.until) {
			g.until = until
		}
	case f.Quota && g.closed == "":
		g.closed = f.Closes(provider)
	}
	closed := g.closed
	s.mu.Unlock()
	if closed != "" {
		s.wake()
	}
	return until, closed
}

// Hold keeps provider's jobs back until until, or later when a reset
// later than that is known already, and returns when they may start.
func (s *Set) Hold(provider string, until time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.gate(provider)
	if until.After(g.until) {
		g.until = until
	}
	return g.until
}
