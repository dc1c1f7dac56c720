package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

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

// Acquire takes the lease described by req, retrying refused or failed
// attempts with exponential backoff (20 ms doubling to 500 ms, ±25 %
// jitter, never longer than the holder's time left) until it is held, the
// epoch is found completed (ErrEpochDone), or ctx ends (the last refusal
// joined with ctx.Err(); when ctx cut the last attempt short, the last
// refusal the server gave). Each attempt is one statement bounded by the
// timeout; every attempt of one call uses the same token, so a grant whose
// reply was lost is taken over by the next attempt instead of blocking the
// key for a TTL.
func (b *Backend) Acquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	token := lease.NewToken()
	var last error // the last refusal the server gave
	for attempt := 0; ; attempt++ {
		res := b.tryBatch(ctx, []lease.Request{req}, []string{token})[0]
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
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(res.Err, ctx.Err())
		case <-t.C:
		}
	}
}

// TryAcquireBatch makes one attempt at each request, all in one statement
// (acquire.sql: arrays unnested into one INSERT ... ON CONFLICT DO
// UPDATE), bounded by the timeout plus 100 µs per key after the first.
// Results are in the order of reqs. A refusal is a *RefusedError: ErrHeld
// with the holder and its time left (on the server's clock; once that has
// passed, the time until this client has seen the row unrenewed for the
// holder's TTL and may take it over), ErrEpochDone with the completed
// epoch, or ErrNoQuorum naming the server when it did not answer (or
// answered too late to leave any validity). A request with an empty key,
// a TTL <= 0, text that is not UTF-8 or contains NUL, or a key already in
// the batch fails with a plain error.
func (b *Backend) TryAcquireBatch(ctx context.Context, reqs []lease.Request) []lease.Result {
	return b.tryBatch(ctx, reqs, lease.NewTokens(len(reqs)))
}

// row is one line of acquire.sql's result.
type row struct {
	granted    bool
	fence      int64
	doneEpoch  int64
	owner      string
	leftMicros int64 // on the server's clock: a report only
	held       bool  // the row carried a token
	token      string
	xmin       string // the row version
	ttlMicros  int64
}

// tryBatch makes one attempt at every request with its token, in one
// statement: it checks the requests, runs acquire.sql, and turns each row
// into a lease or a refusal.
func (b *Backend) tryBatch(ctx context.Context, reqs []lease.Request, tokens []string) []lease.Result {
	out, idx := lease.CheckBatch(reqs, checkRequest)
	if len(idx) == 0 {
		return out
	}
	slices.SortFunc(idx, func(a, c int) int { return strings.Compare(reqs[a].Key, reqs[c].Key) })
	start := time.Now()
	rows, err := b.acquireRows(ctx, reqs, tokens, idx, start)
	late := b.decide(out, reqs, tokens, idx, rows, err, start)
	for _, l := range late {
		_ = l.Release(ctx)
	}
	return out
}

// acquireRows runs acquire.sql for reqs[idx] (sorted by key), started at
// start, and returns its rows in the order of idx.
func (b *Backend) acquireRows(ctx context.Context, reqs []lease.Request, tokens []string, idx []int, start time.Time) ([]row, error) {
	n := len(idx)
	keys, toks, owners := make([]string, n), make([]string, n), make([]string, n)
	ttls, epochs := make([]int64, n), make([]int64, n)
	seenToks, seenXmins := make([]string, n), make([]string, n)
	for j, i := range idx {
		keys[j], toks[j], owners[j] = reqs[i].Key, tokens[i], reqs[i].Owner
		ttls[j], epochs[j] = reqs[i].TTL.Microseconds(), max(reqs[i].Epoch, 0)
		seenToks[j], seenXmins[j] = b.obs.Ripe(reqs[i].Key, start)
	}
	rows := make([]row, n)
	err := b.call(ctx, b.timeout+time.Duration(n-1)*perKeyTimeout, func(ctx context.Context, c *pgx.Conn) error {
		rs, err := c.Query(ctx, b.stmt(b.sql.acquire), keys, toks, owners, ttls, epochs, seenToks, seenXmins)
		if err != nil {
			return err
		}
		j := 0
		var r row
		dest := []any{&r.granted, &r.fence, &r.doneEpoch, &r.owner, &r.leftMicros, &r.held, &r.token, &r.xmin, &r.ttlMicros}
		_, err = pgx.ForEachRow(rs, dest, func() error {
			if j >= n {
				return fmt.Errorf("acquire: more than %d rows returned", n)
			}
			rows[j] = r
			j++
			return nil
		})
		if err == nil && j != n {
			err = fmt.Errorf("acquire: %d rows returned for %d keys", j, n)
		}
		return err
	})
	return rows, err
}

// decide fills out[idx] from the statement's rows (or its error err), the
// statement having started at start: a lease for each granted row with
// validity left, a refusal for the others. It returns the leases granted
// too late to be used, for the caller to release.
func (b *Backend) decide(out []lease.Result, reqs []lease.Request, tokens []string, idx []int, rows []row, err error, start time.Time) (late []*Lease) {
	replied := time.Now()
	elapsed := replied.Sub(start)
	for j, i := range idx {
		req := reqs[i]
		if err != nil {
			out[i].Err = &lease.RefusedError{Key: req.Key, Reason: lease.ErrNoQuorum, NodeErrs: err,
				Detail: fmt.Sprintf("no answer after %s", elapsed.Round(time.Microsecond))}
			continue
		}
		r := rows[j]
		if r.granted || !r.held {
			b.obs.Forget(req.Key)
		}
		switch {
		case r.granted:
			l := &Lease{State: lease.NewState(req, tokens[i], r.fence), b: b}
			v := lease.Validity(start, req.TTL, b.o.drift)
			if v <= 0 {
				late = append(late, l)
				out[i].Err = &lease.RefusedError{Key: req.Key, Reason: lease.ErrNoQuorum, DoneEpoch: r.doneEpoch,
					Detail: fmt.Sprintf("granted, but the statement took %s and left no validity", elapsed.Round(time.Microsecond))}
				continue
			}
			l.SetValidUntil(start.Add(v))
			out[i].Lease = l
		case req.Epoch > 0 && r.doneEpoch >= req.Epoch:
			out[i].Err = &lease.RefusedError{Key: req.Key, Reason: lease.ErrEpochDone, DoneEpoch: r.doneEpoch}
		default:
			out[i].Err = b.heldError(req.Key, r, replied)
		}
	}
	return late
}

// heldError is the refusal of key, whose row r was held (or taken by a
// concurrent statement), and records the holder's row version as seen by
// a reply received at replied.
func (b *Backend) heldError(key string, r row, replied time.Time) *lease.RefusedError {
	e := &lease.RefusedError{Key: key, Reason: lease.ErrHeld, HolderNodes: 1, DoneEpoch: r.doneEpoch,
		Holder: r.owner, HolderTTL: time.Duration(r.leftMicros) * time.Microsecond}
	if !r.held {
		// The row was free in the statement's snapshot but taken by a
		// concurrent statement before ours locked it.
		e.Holder = ""
		e.Detail = "taken by a concurrent request"
		return e
	}
	wait := b.obs.Saw(key, r.token, r.xmin, time.Duration(r.ttlMicros)*time.Microsecond, replied)
	if r.leftMicros <= 0 {
		// Expired on the server's clock, which decides nothing: this
		// client takes it over once it has seen the row unrenewed for
		// the holder's TTL on its own clock.
		e.HolderTTL = max(wait, time.Microsecond)
		e.Detail = fmt.Sprintf("expired on the server's clock, not renewed for %s here; taken over after %s more",
			(time.Duration(r.ttlMicros)*time.Microsecond - wait).Round(time.Millisecond), wait.Round(time.Millisecond))
	}
	return e
}

// checkRequest refuses what the table cannot store or the protocol forbids.
func checkRequest(r lease.Request) error {
	switch {
	case r.Key == "":
		return errors.New("acquire: empty key")
	case r.TTL <= 0:
		return fmt.Errorf("acquire %s: TTL must be positive, got %s", r.Key, r.TTL)
	case !pgText(r.Key):
		return fmt.Errorf("acquire %q: key is not UTF-8 text without NUL", r.Key)
	case !pgText(r.Owner):
		return fmt.Errorf("acquire %s: owner %q is not UTF-8 text without NUL", r.Key, r.Owner)
	}
	return nil
}

func pgText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
