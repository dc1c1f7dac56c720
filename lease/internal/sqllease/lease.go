package sqllease

import (
	"context"
	"fmt"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// Lease is a lease held as a row of a SQL driver's table: the row
// carries its token until it is released, completed, or taken over by a
// contender that saw it unrenewed for its TTL. A driver's Lease embeds
// it (which gives it lease.State's accessors and Extend, Release and
// Complete); its Table runs the statements. Safe for concurrent use.
type Lease struct {
	lease.State
	t     Table
	drift float64
}

// NewLease returns the lease of a grant of req with token and fence, on
// t; it is not valid until SetValidUntil.
func (c *Core) NewLease(req lease.Request, token string, fence int64, t Table) Lease {
	return Lease{State: lease.NewState(req, token, fence), t: t, drift: c.Drift}
}

// Extend renews the row (ttl <= 0: the Request's TTL) if it still
// carries this lease's token. ValidUntil then becomes the moment before
// the request left plus ttl minus the elapsed time and the drift margin.
// On failure ValidUntil is unchanged and the error matches
// lease.ErrNotHeld (the row is no longer ours) or lease.ErrNoQuorum (the
// server did not answer within the timeout, or too late to leave any
// validity).
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = l.TTL()
	}
	start := time.Now()
	n, err := l.t.Extend(ctx, l.Key(), l.Token(), ttl)
	if err != nil {
		return fmt.Errorf("extend %s: %w: %w", l.Key(), lease.ErrNoQuorum, err)
	}
	if n == 0 {
		return fmt.Errorf("extend %s: %w", l.Key(), lease.ErrNotHeld)
	}
	v := lease.Validity(start, ttl, l.drift)
	if v <= 0 {
		return fmt.Errorf("extend %s: %w: the statement took %s, no validity left", l.Key(), lease.ErrNoQuorum, time.Since(start).Round(time.Microsecond))
	}
	if !l.SetValidUntil(start.Add(v)) {
		return fmt.Errorf("extend %s: %w (given up)", l.Key(), lease.ErrNotHeld)
	}
	return nil
}

// Release frees the row if it still carries this lease's token, without
// completing the epoch. An error means the server could not be told; the
// lease then expires by its TTL.
func (l *Lease) Release(ctx context.Context) error {
	l.Invalidate()
	if err := l.t.Release(ctx, l.Key(), l.Token()); err != nil {
		return fmt.Errorf("release %s: %w", l.Key(), err)
	}
	return nil
}

// Complete raises the row's completed epoch to the lease's epoch and frees
// the row, if the row still carries this lease's token (expired or not),
// retrying (lease.RetryComplete) until the server acknowledged the
// commit or ctx ends. From then on no acquisition of this epoch or an older
// one succeeds. When another acquisition has taken the key, Complete fails
// with lease.ErrNotHeld and leaves the epoch open (like Extend, it is
// guarded by the token). Without an epoch it is Release.
func (l *Lease) Complete(ctx context.Context) error {
	if l.Epoch() <= 0 {
		return l.Release(ctx)
	}
	l.Invalidate()
	return lease.RetryComplete(ctx, func(ctx context.Context) (bool, error) {
		n, err := l.t.Complete(ctx, l.Key(), l.Token(), l.Epoch())
		if err == nil && n == 0 {
			return true, fmt.Errorf("complete %s epoch %d: %w: another acquisition took the key; the epoch stays open", l.Key(), l.Epoch(), lease.ErrNotHeld)
		}
		if err == nil {
			return true, nil
		}
		err = fmt.Errorf("complete %s epoch %d: %w", l.Key(), l.Epoch(), err)
		return l.t.Permanent(err), err
	})
}
