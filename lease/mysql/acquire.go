package mysql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
// refusal the server gave). Each attempt is one write and one read bounded by the
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

// TryAcquireBatch makes one attempt at each request, all in one write statement
// (acquire.sql: one multi-row INSERT ... ON DUPLICATE KEY
// UPDATE, keys sorted, then rows.sql reads the outcome back), bounded by the timeout plus 100 µs per key after the first.
// Results are in the order of reqs. A refusal is a *RefusedError: ErrHeld
// with the holder and its time left, ErrEpochDone with the completed
// epoch, or ErrNoQuorum naming the server when it did not answer (or
// answered too late to leave any validity). A request with an empty key,
// a TTL <= 0, text that is not UTF-8 or contains NUL, or a key already in
// the batch fails with a plain error.
func (b *Backend) TryAcquireBatch(ctx context.Context, reqs []lease.Request) []lease.Result {
	return b.tryBatch(ctx, reqs, lease.NewTokens(len(reqs)))
}

// row is one line of rows.sql's result: the key's row after acquire.sql.
type row struct {
	token      string // '' if none
	fence      int64
	doneEpoch  int64
	owner      string
	leftMicros int64 // on the server's clock: a report only
	version    int64
	ttlMicros  int64
}

// maxKey is the longest key the table's primary key holds (VARBINARY(768)).
const maxKey = 768

// tryBatch makes one attempt at every request with its token, in one
// round trip: it checks the requests, runs acquire.sql and reads the rows
// back (rows.sql), and turns each row into a lease or a refusal.
func (b *Backend) tryBatch(ctx context.Context, reqs []lease.Request, tokens []string) []lease.Result {
	out, idx := lease.CheckBatch(reqs, checkRequest)
	if len(idx) == 0 {
		return out
	}
	if !b.o.test.unsorted {
		slices.SortFunc(idx, func(a, c int) int { return strings.Compare(reqs[a].Key, reqs[c].Key) })
	}
	start := time.Now()
	got, err := b.acquireRows(ctx, reqs, tokens, idx, start)
	late := b.decide(out, reqs, tokens, idx, got, err, start)
	for _, l := range late {
		_ = l.Release(ctx)
	}
	return out
}

// acquireRows runs acquire.sql for reqs[idx], started at start, and reads
// back the rows of their keys.
func (b *Backend) acquireRows(ctx context.Context, reqs []lease.Request, tokens []string, idx []int, start time.Time) (map[string]row, error) {
	n := len(idx)
	args := make([]any, 0, 7*n)
	keys := make([]any, n)
	for j, i := range idx {
		r := reqs[i]
		claim := ""
		if tok, ver := b.obs.Ripe(r.Key, start); tok != "" {
			claim = tok + "/" + ver
		}
		keys[j] = r.Key
		args = append(args, r.Key, tokens[i], r.Owner, max(r.Epoch, 0), r.TTL.Microseconds(), r.TTL.Microseconds(), claim)
	}
	acquire, read := b.batchStatements(n)
	got := make(map[string]row, n)
	err := b.call(ctx, b.timeout+time.Duration(n-1)*perKeyTimeout, func(ctx context.Context) error {
		if _, err := b.db.ExecContext(ctx, acquire, args...); err != nil {
			return err
		}
		return b.readRows(ctx, read, keys, got)
	})
	return got, err
}

// decide fills out[idx] from the rows read back (or the round trip's
// error err), the round trip having started at start: a lease for each
// row that carries the request's token with validity left, a refusal for
// the others. It returns the leases granted too late to be used, for the
// caller to release.
func (b *Backend) decide(out []lease.Result, reqs []lease.Request, tokens []string, idx []int, got map[string]row, err error, start time.Time) (late []*Lease) {
	replied := time.Now()
	elapsed := replied.Sub(start)
	for _, i := range idx {
		req := reqs[i]
		r, ok := got[req.Key]
		if err == nil && !ok {
			err = fmt.Errorf("acquire: no row read back for key %q", req.Key)
		}
		if err != nil {
			out[i].Err = &lease.RefusedError{Key: req.Key, Reason: lease.ErrNoQuorum, NodeErrs: err,
				Detail: fmt.Sprintf("no answer after %s", elapsed.Round(time.Microsecond))}
			continue
		}
		epochDone := req.Epoch > 0 && r.doneEpoch >= req.Epoch
		granted := r.token == tokens[i] && !epochDone
		if granted || r.token == "" {
			b.obs.Forget(req.Key)
		}
		switch {
		case granted:
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
		case epochDone:
			out[i].Err = &lease.RefusedError{Key: req.Key, Reason: lease.ErrEpochDone, DoneEpoch: r.doneEpoch}
		default:
			out[i].Err = b.heldError(req.Key, r, replied)
		}
	}
	return late
}

// batchStatements returns acquire.sql and rows.sql for n keys.
func (b *Backend) batchStatements(n int) (acquire, read string) {
	const value = "(?, ?, ?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, 1, 1, ?, '')"
	var v, k strings.Builder
	v.Grow(n * (len(value) + 2))
	k.Grow(n * 3)
	for j := range n {
		if j > 0 {
			v.WriteString(", ")
			k.WriteString(", ")
		}
		v.WriteString(value)
		k.WriteString("?")
	}
	acquire = strings.Replace(b.sql.acquire, "{{rows}}", v.String(), 1)
	read = strings.Replace(b.sql.rows, "{{keys}}", k.String(), 1)
	return b.stmt(acquire), b.stmt(read)
}

// readRows runs rows.sql and stores its rows in got by key.
func (b *Backend) readRows(ctx context.Context, read string, keys []any, got map[string]row) error {
	clear(got)
	rs, err := b.db.QueryContext(ctx, read, keys...)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var k string
		var r row
		if err := rs.Scan(&k, &r.token, &r.fence, &r.doneEpoch, &r.owner, &r.leftMicros, &r.version, &r.ttlMicros); err != nil {
			return err
		}
		got[k] = r
	}
	return rs.Err()
}

// heldError is the refusal of key, whose row r was held (or taken by a
// concurrent statement), and records the holder's row version as seen by
// a reply received at replied.
func (b *Backend) heldError(key string, r row, replied time.Time) *lease.RefusedError {
	e := &lease.RefusedError{Key: key, Reason: lease.ErrHeld, HolderNodes: 1, DoneEpoch: r.doneEpoch,
		Holder: r.owner, HolderTTL: time.Duration(r.leftMicros) * time.Microsecond}
	if r.token == "" {
		// Held when acquire.sql ran, free when rows.sql read it back:
		// released in between.
		e.Holder = ""
		e.Detail = "held when this attempt ran, released since"
		return e
	}
	wait := b.obs.Saw(key, r.token, strconv.FormatInt(r.version, 10), time.Duration(r.ttlMicros)*time.Microsecond, replied)
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
	case len(r.Key) > maxKey:
		return fmt.Errorf("acquire %.40q...: key longer than %d bytes", r.Key, maxKey)
	case r.TTL <= 0:
		return fmt.Errorf("acquire %s: TTL must be positive, got %s", r.Key, r.TTL)
	}
	return checkText("acquire", r.Key, r.Owner)
}

// checkText refuses a key or text that is not UTF-8 without NUL (the
// columns are utf8mb4, and the other backends refuse the same).
func checkText(what, key, text string) error {
	switch {
	case !validText(key):
		return fmt.Errorf("%s %q: key is not UTF-8 text without NUL", what, key)
	case !validText(text):
		return fmt.Errorf("%s %s: %q is not UTF-8 text without NUL", what, key, text)
	}
	return nil
}

func validText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
