package schedule

import "time"

// SetLease gives s a lease of d, watched by clock: tests of owners this
// system cannot see.
func SetLease(s *Store, d time.Duration, clock func() time.Time) {
	s.leaseTime, s.clock = d, clock
}

// Definition is job j's definition digest, as a completion records it.
func Definition(j Job) string { return definition(j) }
