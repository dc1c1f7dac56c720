package lease

import (
	"context"
	"errors"
	"time"
)

// Completion retry: how Lease.Complete retries a mark that did not reach
// the store. The first retry waits completeFirst, each next one twice as
// long up to completeMax, each ± 25 % (Jitter).
const (
	completeFirst = 10 * time.Millisecond
	completeMax   = time.Second
)

// CompleteBackoff is the pause before retry number attempt (from 0) of a
// completion: 10 ms doubling up to 1 s, before Jitter.
func CompleteBackoff(attempt int) time.Duration {
	return min(completeFirst<<min(attempt, 7), completeMax)
}

// RetryComplete is the retry loop of every driver's Lease.Complete: it
// calls try until try says the outcome is settled (the mark is durable, or
// a newer holder took the key, or an error no retry can cure), the Backend
// is closed (an error matching ErrClosed), or ctx ends, pausing
// Jitter(CompleteBackoff(attempt)) between tries. It returns try's last
// error, joined with ctx.Err() when ctx ended first. A driver's try does one
// round trip and reports only what its store answered.
func RetryComplete(ctx context.Context, try func(ctx context.Context) (settled bool, err error)) error {
	for attempt := 0; ; attempt++ {
		settled, err := try(ctx)
		if settled || err == nil || errors.Is(err, ErrClosed) {
			return err
		}
		t := time.NewTimer(Jitter(CompleteBackoff(attempt)))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}
