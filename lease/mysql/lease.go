package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// Lease is a lease held in the table: the row of its key carries its
// token until it is released, completed, or expires on the database's
// clock. Safe for concurrent use.
type Lease struct {
	b     *Backend
	req   lease.Request
	token string
	fence int64

	mu         sync.Mutex
	validUntil time.Time
}

var _ lease.Lease = (*Lease)(nil)

// Key returns the lease's key.
func (l *Lease) Key() string { return l.req.Key }

// Owner returns the Request's Owner.
func (l *Lease) Owner() string { return l.req.Owner }

// Token returns the acquisition's random token.
func (l *Lease) Token() string { return l.token }

// Epoch returns the Request's epoch (0 if none).
func (l *Lease) Epoch() int64 { return l.req.Epoch }

// TTL returns the Request's TTL.
func (l *Lease) TTL() time.Duration { return l.req.TTL }

// Fence returns the row's fence counter after this acquisition raised it
// by one: strictly greater than every earlier holder's, as long as the row
// is not deleted and the server does not lose acknowledged commits.
func (l *Lease) Fence() int64 { return l.fence }

// ValidUntil returns the local instant (monotonic) at which the validity
// ends, as of the last successful acquire or extend; zero once released
// or completed.
func (l *Lease) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Extend sets the row's expiry to the database's clock plus ttl (ttl <= 0:
// the Request's TTL) if the row still carries this lease's token and has
// not expired; ValidUntil then becomes the moment before the request left
// plus ttl minus the elapsed time and the drift margin. On failure
// ValidUntil is unchanged and the error matches lease.ErrNotHeld (the
// row is no longer ours) or lease.ErrNoQuorum (the server did not
// answer within the timeout, or too late to leave any validity).
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = l.req.TTL
	}
	start := time.Now()
	var n int64
	err := l.b.call(ctx, l.b.timeout, func(ctx context.Context) error {
		var err error
		n, err = affected(l.b.db.ExecContext(ctx, l.b.stmt(l.b.sql.extend), ttl.Microseconds(), ttl.Microseconds(), l.req.Key, l.token))
		return err
	})
	if err != nil {
		return fmt.Errorf("extend %s: %w: %w", l.req.Key, lease.ErrNoQuorum, err)
	}
	if n == 0 {
		return fmt.Errorf("extend %s: %w", l.req.Key, lease.ErrNotHeld)
	}
	v := l.b.validity(ttl, start)
	if v <= 0 {
		return fmt.Errorf("extend %s: %w: the statement took %s, no validity left", l.req.Key, lease.ErrNoQuorum, time.Since(start).Round(time.Microsecond))
	}
	l.mu.Lock()
	l.validUntil = start.Add(v)
	l.mu.Unlock()
	return nil
}

// Release frees the row if it still carries this lease's token, without
// completing the epoch. An error means the server could not be told; the
// lease then expires by its TTL.
func (l *Lease) Release(ctx context.Context) error {
	l.expire()
	err := l.b.call(ctx, l.b.timeout, func(ctx context.Context) error {
		_, err := l.b.db.ExecContext(ctx, l.b.stmt(l.b.sql.release), l.req.Key, l.token)
		return err
	})
	if err != nil {
		return fmt.Errorf("release %s: %w", l.req.Key, err)
	}
	return nil
}

// Complete raises the row's completed epoch to the lease's epoch and frees
// the row, if the row still carries this lease's token (expired or not),
// retrying (10 ms doubling to 1 s, ±25 %) until the server acknowledged the
// commit or ctx ends. From then on no acquisition of this epoch or an older
// one succeeds. When another acquisition has taken the key, Complete fails
// with lease.ErrNotHeld and leaves the epoch open (like Extend, it is
// guarded by the token). Without an epoch it is Release.
func (l *Lease) Complete(ctx context.Context) error {
	if l.req.Epoch <= 0 {
		return l.Release(ctx)
	}
	l.expire()
	for attempt := 0; ; attempt++ {
		var n int64
		err := l.b.call(ctx, l.b.timeout, func(ctx context.Context) error {
			var err error
			n, err = affected(l.b.db.ExecContext(ctx, l.b.stmt(l.b.sql.complete),
				l.req.Epoch, l.token, l.token, l.req.Key, l.token, l.req.Epoch))
			return err
		})
		if err == nil && n == 0 {
			return fmt.Errorf("complete %s epoch %d: %w: another acquisition took the key; the epoch stays open", l.req.Key, l.req.Epoch, lease.ErrNotHeld)
		}
		if err == nil {
			return nil
		}
		err = fmt.Errorf("complete %s epoch %d: %w", l.req.Key, l.req.Epoch, err)
		if errors.Is(err, lease.ErrClosed) || permanent(err) {
			return err
		}
		t := time.NewTimer(lease.Jitter(min(10*time.Millisecond<<min(attempt, 7), time.Second)))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

// expire marks the lease invalid locally (it is being given up).
func (l *Lease) expire() {
	l.mu.Lock()
	l.validUntil = time.Time{}
	l.mu.Unlock()
}

// affected returns the rows an UPDATE matched (clientFoundRows is on).
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
