package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// A tick's lease as the scheduler takes it: its owner text, how long a
// loser waits on a holder, and the last checks before a won lease runs
// its job.

// heldWait is how long a loser that found its tick held by another host
// waits before its next attempt (the attempt-th retry).
func heldWait(rerr *lease.RefusedError, quorum, attempt int) time.Duration {
	wait := rerr.HolderTTL + 5*time.Millisecond
	switch {
	case rerr.HolderNodes >= quorum:
		// The holder has the lease on a quorum: its attempt won, unless
		// its own answers came too late for it (then it is cleaning up
		// right now). One early look for that case, then trust the
		// holder's TTL.
		if attempt == 0 {
			wait = min(wait, heldRecheck)
		}
	case attempt < splitRetries:
		// When several hosts fire together the votes may split so that
		// nobody wins; each loser sees another host as the holder, yet
		// all of them release at once. Retry after a short random delay
		// (as Redlock advises) before trusting the holder's TTL.
		wait = min(wait, rand.N(splitRetryBase<<attempt)+time.Millisecond)
	}
	return wait
}

// owner is the value stored with a lease: which tick, which host.
func owner(tick int64, host string) string { return fmt.Sprintf("tick=%d host=%s", tick, host) }

// parseOwner reads what owner wrote; ok is false for other formats (such
// as a manual trigger, "tick=manual").
func parseOwner(s string) (tick int64, host string, ok bool) {
	t, h, found := strings.Cut(s, " host=")
	if !found || !strings.HasPrefix(t, "tick=") {
		return 0, "", false
	}
	var n int64
	if _, err := fmt.Sscanf(t, "tick=%d", &n); err != nil {
		return 0, h, false
	}
	return n, h, true
}

var (
	// errTickDeadline: the tick's deadline passed before its run started.
	errTickDeadline = errors.New("the tick's deadline has passed")
	// errShortValidity: the lease's validity would end (minus the kill
	// margin) before the job could do anything.
	errShortValidity = errors.New("the lease's remaining validity is shorter than the kill margin")
)

// mayStart reports whether a run for a tick whose deadline is deadline may
// start now under l: the deadline, on the scheduler's (possibly offset)
// clock, has not passed, and the lease is valid for longer than the kill
// margin, which the supervisor would otherwise use up at once.
func (s *Scheduler) mayStart(deadline time.Time, l lease.Lease) error {
	if now := s.now(); !now.Before(deadline) {
		return fmt.Errorf("%w: deadline %s, now %s", errTickDeadline,
			deadline.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339Nano))
	}
	// The Hold reports a loss up to 3 request timeouts before the
	// validity ends; below that plus the kill margin the job would be
	// stopped as soon as it started.
	need := s.killMargin() + 3*s.be.Timeout() + 5*time.Millisecond
	if left := time.Until(l.ValidUntil()); left <= need {
		return fmt.Errorf("%w: %s left, need more than %s (kill margin and loss detection)", errShortValidity,
			left.Round(time.Millisecond), need)
	}
	return nil
}

// release gives up a lease that was won but not used, without completing
// its tick, so that the job's next tick (or another host) is not kept
// waiting for its TTL.
func (s *Scheduler) release(l lease.Lease, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), max(s.base.Lease.TTL, 5*time.Second))
	defer cancel()
	if err := l.Release(ctx); err != nil {
		log.Warn("could not release the unused lease; it expires with its TTL", "err", err)
	}
}
