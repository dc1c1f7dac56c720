package scheduler

import (
	"time"

	"github.com/leasecron/leasecron/lease"
)

// lapsed notes that l is left to run out (no longer renewed, not released):
// Close waits for its validity to end.
func (s *Scheduler) lapsed(l lease.Lease) {
	vu := l.ValidUntil()
	s.lapseMu.Lock()
	defer s.lapseMu.Unlock()
	if vu.After(s.lapsedUntil) {
		s.lapsedUntil = vu
	}
}

// waitLapsed waits until the validity of every lease noted by lapsed has
// passed, at most lease.ttl (no validity reaches further than a TTL from
// now: it is counted from a renewal in the past).
func (s *Scheduler) waitLapsed() {
	s.lapseMu.Lock()
	until := s.lapsedUntil
	s.lapseMu.Unlock()
	wait := min(time.Until(until), s.base.Lease.TTL)
	if wait <= 0 || s.test.noLapseWait {
		return
	}
	s.log.Warn("waiting for the leases left to run out before closing the backend (their jobs may still run)",
		"valid_until", until, "wait", wait.Round(time.Millisecond))
	time.Sleep(wait)
}
