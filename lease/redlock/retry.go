package redlock

import (
	"sync/atomic"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// RetryStrategy decides how long Acquire waits before its next attempt.
// NextBackoff returns 0 to stop retrying. Implementations returned by this
// package are safe for concurrent use; each Acquire call uses a fresh copy
// obtained through Clone-like construction, so limits count per call.
type RetryStrategy interface {
	// NextBackoff returns the wait before the next attempt, or 0 to give up.
	NextBackoff() time.Duration
}

type newRetry interface{ fresh() RetryStrategy }

type noRetry struct{}

func (noRetry) NextBackoff() time.Duration { return 0 }
func (noRetry) fresh() RetryStrategy       { return noRetry{} }

// NoRetry makes a single attempt. It is the default.
func NoRetry() RetryStrategy { return noRetry{} }

type linear time.Duration

func (r linear) NextBackoff() time.Duration { return jitter(time.Duration(r)) }
func (r linear) fresh() RetryStrategy       { return r }

// LinearBackoff retries every d, with a random jitter of ±25 % so that
// competing clients do not retry in lock step (the Redlock advice).
func LinearBackoff(d time.Duration) RetryStrategy { return linear(d) }

type exponential struct {
	min, max time.Duration
	n        atomic.Int64
}

func (r *exponential) NextBackoff() time.Duration {
	n := r.n.Add(1) - 1
	d := r.min
	for i := int64(0); i < n && d < r.max; i++ {
		d *= 2
	}
	if d > r.max {
		d = r.max
	}
	return jitter(d)
}
func (r *exponential) fresh() RetryStrategy { return &exponential{min: r.min, max: r.max} }

// ExponentialBackoff retries after min, 2·min, 4·min, ... up to max, each
// with ±25 % jitter.
func ExponentialBackoff(min, max time.Duration) RetryStrategy {
	if min <= 0 {
		min = time.Millisecond
	}
	if max < min {
		max = min
	}
	return &exponential{min: min, max: max}
}

type limited struct {
	s    RetryStrategy
	max  int64
	used atomic.Int64
}

func (r *limited) NextBackoff() time.Duration {
	if r.used.Add(1) > r.max {
		return 0
	}
	return r.s.NextBackoff()
}
func (r *limited) fresh() RetryStrategy { return &limited{s: freshRetry(r.s), max: r.max} }

// LimitRetry allows at most n retries (n+1 attempts) of s.
func LimitRetry(s RetryStrategy, n int) RetryStrategy { return &limited{s: s, max: int64(n)} }

// freshRetry returns a copy of s with its counters reset, for one Acquire call.
func freshRetry(s RetryStrategy) RetryStrategy {
	if f, ok := s.(newRetry); ok {
		return f.fresh()
	}
	return s
}

func jitter(d time.Duration) time.Duration { return lease.Jitter(d) }
