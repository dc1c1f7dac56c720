package mysql

import (
	"context"
	"database/sql"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/internal/sqllease"
)

// Lease is a lease held in the table: the row of its key carries its
// token until it is released, completed, or taken over by a contender
// that saw it unrenewed for its TTL (see the package doc's Time and
// takeover). Safe for concurrent use.
//
// Extend sets the row's expiry to the database's clock plus ttl (ttl <=
// 0: the Request's TTL) and raises its version if the row still carries
// this lease's token; ValidUntil then becomes the moment before the
// request left plus ttl minus the elapsed time and the drift margin. On
// failure ValidUntil is unchanged and the error matches lease.ErrNotHeld
// (the row is no longer ours) or lease.ErrNoQuorum (no answer within the
// timeout, or too late to leave any validity). Release frees the row if
// it still carries the token, without completing the epoch. Complete
// raises the row's completed epoch and frees it, guarded by the token too
// (expired or not), retrying until the server acknowledged the commit or
// ctx ends; when another acquisition has taken the key it fails with
// lease.ErrNotHeld and leaves the epoch open. Without an epoch it is
// Release.
type Lease struct {
	sqllease.Lease
}

var _ lease.Lease = (*Lease)(nil)

// NewLease returns the Lease of a grant of req with token and fence.
func (t leaseTable) NewLease(req lease.Request, token string, fence int64) sqllease.Held {
	return &Lease{t.b.core.NewLease(req, token, fence, t)}
}

// Extend runs extend.sql: key's row gets a new expiry and version if it
// carries token.
func (t leaseTable) Extend(ctx context.Context, key, token string, ttl time.Duration) (int64, error) {
	return t.exec(ctx, t.b.sql.extend, ttl.Microseconds(), ttl.Microseconds(), key, token)
}

// Release runs release.sql: key's row is freed if it carries token.
func (t leaseTable) Release(ctx context.Context, key, token string) error {
	_, err := t.exec(ctx, t.b.sql.release, key, token)
	return err
}

// Complete runs complete.sql: key's completed epoch is raised to epoch
// and the row freed, if it carries token.
func (t leaseTable) Complete(ctx context.Context, key, token string, epoch int64) (int64, error) {
	return t.exec(ctx, t.b.sql.complete, epoch, token, token, key, token, epoch)
}

// Permanent reports whether err is one that no retry cures.
func (leaseTable) Permanent(err error) bool { return permanent(err) }

// exec runs a lease statement and returns how many rows it matched
// (clientFoundRows is on).
func (t leaseTable) exec(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := t.b.call(ctx, func(ctx context.Context) error {
		var err error
		n, err = affected(t.b.db.ExecContext(ctx, t.b.stmt(query), args...))
		return err
	})
	return n, err
}

// affected returns the rows an UPDATE matched (clientFoundRows is on).
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
