package sqllease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
)

const (
	// perKeyTimeout is what a batch adds to the timeout for each key
	// after the first (the server runs one upsert per key).
	perKeyTimeout = 100 * time.Microsecond
	// Acquire's backoff between attempts: from backoffMin, doubling, up
	// to backoffMax, each ±25 %.
	backoffMin = 20 * time.Millisecond
	backoffMax = 500 * time.Millisecond
)

// Table is a SQL driver's lease table as this package uses it: the
// statements that talk to the server. Each call is bounded by the timeout
// (BatchTimeout for a batch), makes sure the table exists, is sent again
// on a fresh connection when its connection was dead, and fails with an
// error naming the server.
type Table interface {
	// CheckRequest refuses a request the table cannot store.
	CheckRequest(req lease.Request) error
	// Acquire makes one attempt at each of reqs[idx] with its token, the
	// attempt having started at start, and returns each key's row as the
	// attempt left it, in the order of idx (sorted by key, so that
	// concurrent batches lock rows in one order). It claims the rows
	// Core.Obs says are ripe for takeover.
	Acquire(ctx context.Context, reqs []lease.Request, tokens []string, idx []int, start time.Time) ([]Row, error)
	// NewLease returns the driver's Lease of a grant (see Core.NewLease).
	NewLease(req lease.Request, token string, fence int64) Held
	// Extend resets the TTL of key's row to ttl if the row carries token,
	// and returns how many rows it matched (0: the lease is lost).
	Extend(ctx context.Context, key, token string, ttl time.Duration) (int64, error)
	// Release frees key's row if it carries token.
	Release(ctx context.Context, key, token string) error
	// Complete raises key's completed epoch to epoch and frees the row if
	// it carries token, expired or not, and returns how many rows it
	// matched (0: a newer holder took the key).
	Complete(ctx context.Context, key, token string, epoch int64) (int64, error)
	// Permanent reports whether err is one that no retry cures.
	Permanent(err error) bool
}

// Row is a key's row as an attempt at it left it: what Decide needs to
// grant or refuse.
type Row struct {
	// Granted is true when the attempt took the row (it now carries the
	// attempt's token).
	Granted bool
	// Held is true when the row carried a holder's token (Token).
	Held bool
	// Token and Version identify the holder's last write of the row (the
	// row version: PostgreSQL's xmin, MySQL's version column), for the
	// takeover count; TTL is the holder's TTL.
	Token, Version string
	TTL            time.Duration
	// Fence and DoneEpoch are the row's fence and completed epoch.
	Fence, DoneEpoch int64
	// Owner is the holder's Owner; Left its time left on the server's
	// clock (a report only, 0 when not held or expired there).
	Owner string
	Left  time.Duration
	// Detail explains a refusal of a row that has no holder (taken or
	// freed by a concurrent statement).
	Detail string
	// Err, if set, is why the key's row could not be read: the key is
	// refused as if the server had not answered.
	Err error
}

// Held is a driver's Lease as Decide hands it out: a lease.Lease whose
// validity Decide sets.
type Held interface {
	lease.Lease
	SetValidUntil(v time.Time) bool
}

// BatchTimeout is the bound of a batch of n keys: the timeout plus 100 µs
// per key after the first.
func (c *Core) BatchTimeout(n int) time.Duration {
	return c.Timeout + time.Duration(n-1)*perKeyTimeout
}

// Acquire is a SQL Backend's Acquire: it tries req on t (a batch of one),
// retrying refused or failed attempts with exponential backoff (20 ms
// doubling to 500 ms, ±25 % jitter, never longer than the holder's time
// left) until it is held, the epoch is found completed (ErrEpochDone), or
// ctx ends (the last refusal joined with ctx.Err(); when ctx cut the last
// attempt short, the last refusal the server gave). A grant whose answer
// was lost is taken back by the next attempt at the key (lostGrants),
// this call's or another's: each attempt is given a fresh token, which
// TryBatch replaces by a lost grant's, so a token is never carried by two
// attempts at once.
func (c *Core) Acquire(ctx context.Context, t Table, req lease.Request) (lease.Lease, error) {
	var last error // the last refusal the server gave
	for attempt := 0; ; attempt++ {
		res := c.TryBatch(ctx, t, []lease.Request{req}, []string{lease.NewToken()})[0]
		if res.Err == nil {
			return res.Lease, nil
		}
		if ctx.Err() != nil && last != nil && errors.Is(res.Err, lease.ErrNoQuorum) {
			// The attempt was cut short by ctx: the server's last answer
			// says more.
			return nil, errors.Join(last, ctx.Err())
		}
		var r *lease.RefusedError
		if !errors.As(res.Err, &r) || errors.Is(res.Err, lease.ErrEpochDone) || errors.Is(res.Err, lease.ErrClosed) {
			return nil, res.Err
		}
		if !errors.Is(res.Err, lease.ErrNoQuorum) {
			last = res.Err
		}
		wait := lease.Jitter(min(backoffMin<<min(attempt, 10), backoffMax))
		if r.HolderTTL > 0 && r.HolderTTL < wait {
			wait = r.HolderTTL + time.Millisecond
		}
		tm := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			tm.Stop()
			return nil, errors.Join(res.Err, ctx.Err())
		case <-tm.C:
		}
	}
}

// TryBatch makes one attempt at every request with its token: it checks
// the requests (t.CheckRequest, and no key twice), sorts their keys, runs
// t.Acquire and turns each row into a lease or a refusal (Decide). A
// lease granted too late to leave any validity is released. Results are
// in the order of reqs.
func (c *Core) TryBatch(ctx context.Context, t Table, reqs []lease.Request, tokens []string) []lease.Result {
	out, idx := lease.CheckBatch(reqs, t.CheckRequest)
	if len(idx) == 0 {
		return out
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(reqs[a].Key, reqs[b].Key) })
	tokens = c.reuseLost(reqs, tokens, idx)
	start := time.Now()
	rows, err := t.Acquire(ctx, reqs, tokens, idx, start)
	late := c.decide(t, out, reqs, tokens, idx, rows, err, start)
	for _, l := range late {
		if l.Release(ctx) != nil {
			// Not freed: the next attempt at the key takes it back.
			c.lost.note(l.Key(), l.Token(), start.Add(2*l.TTL()))
		}
	}
	return out
}

// decide fills out[idx] from the attempt's rows (or its error err), the
// attempt having started at start: a lease for each granted row with
// validity left, a refusal for the others. It returns the leases granted
// too late to be used, for the caller to release.
func (c *Core) decide(t Table, out []lease.Result, reqs []lease.Request, tokens []string, idx []int, rows []Row, err error, start time.Time) (late []Held) {
	replied := time.Now()
	elapsed := replied.Sub(start)
	for j, i := range idx {
		req := reqs[i]
		var r Row
		failed := err
		if err == nil {
			r, failed = rows[j], rows[j].Err
		}
		if failed != nil {
			// The statement may have granted the row: the next attempt
			// takes such a grant back (lostGrants).
			c.lost.note(req.Key, tokens[i], start.Add(2*req.TTL))
			out[i].Err = &lease.RefusedError{Key: req.Key, Reason: lease.ErrNoQuorum, NodeErrs: failed,
				Detail: fmt.Sprintf("no answer after %s", elapsed.Round(time.Microsecond))}
			continue
		}
		epochDone := req.Epoch > 0 && r.DoneEpoch >= req.Epoch
		granted := r.Granted && !epochDone
		if granted || !r.Held {
			c.Obs.Forget(req.Key)
		}
		switch {
		case granted:
			l := t.NewLease(req, tokens[i], r.Fence)
			v := lease.Validity(start, req.TTL, c.Drift)
			if v <= 0 {
				late = append(late, l)
				out[i].Err = &lease.RefusedError{Key: req.Key, Reason: lease.ErrNoQuorum, DoneEpoch: r.DoneEpoch,
					Detail: fmt.Sprintf("granted, but the statement took %s and left no validity", elapsed.Round(time.Microsecond))}
				continue
			}
			l.SetValidUntil(start.Add(v))
			out[i].Lease = l
		case epochDone:
			if r.Held && r.Token == tokens[i] {
				// A lost grant of this client holds the row: free it.
				late = append(late, t.NewLease(req, tokens[i], r.Fence))
			}
			out[i].Err = &lease.RefusedError{Key: req.Key, Reason: lease.ErrEpochDone, DoneEpoch: r.DoneEpoch}
		default:
			out[i].Err = c.heldError(req.Key, r, replied)
		}
	}
	return late
}

// heldError is the refusal of key, whose row r was held (or taken or
// freed by a concurrent statement), and records the holder's row version
// as seen by a reply received at replied.
func (c *Core) heldError(key string, r Row, replied time.Time) *lease.RefusedError {
	e := &lease.RefusedError{Key: key, Reason: lease.ErrHeld, HolderNodes: 1, DoneEpoch: r.DoneEpoch,
		Holder: r.Owner, HolderTTL: r.Left}
	if !r.Held {
		e.Holder = ""
		e.Detail = r.Detail
		return e
	}
	wait := c.Obs.Saw(key, r.Token, r.Version, r.TTL, replied)
	if r.Left <= 0 {
		// Expired on the server's clock, which decides nothing: this
		// client takes it over once it has seen the row unrenewed for
		// the holder's TTL on its own clock.
		e.HolderTTL = max(wait, time.Microsecond)
		e.Detail = fmt.Sprintf("expired on the server's clock, not renewed for %s here; taken over after %s more",
			(r.TTL - wait).Round(time.Millisecond), wait.Round(time.Millisecond))
	}
	return e
}
