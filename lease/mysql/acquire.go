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
	"github.com/leasecron/leasecron/lease/internal/sqllease"
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
	return b.core.Acquire(ctx, leaseTable{b}, req)
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
	return b.core.TryBatch(ctx, leaseTable{b}, reqs, lease.NewTokens(len(reqs)))
}

// leaseTable is the Backend's lease table as package sqllease uses it
// (sqllease.Table): the statements of acquire.sql and rows.sql,
// extend.sql, release.sql and complete.sql (lease.go).
type leaseTable struct{ b *Backend }

var _ sqllease.Table = leaseTable{}

// maxKey is the longest key the table's primary key holds (VARBINARY(768)).
const maxKey = 768

// Acquire runs acquire.sql for reqs[idx] (keys sorted unless a test sends
// them unsorted), started at start, then reads back the rows of their keys
// (rows.sql), and returns them in the order of idx: a row that carries
// the attempt's token was granted.
func (t leaseTable) Acquire(ctx context.Context, reqs []lease.Request, tokens []string, idx []int, start time.Time) ([]sqllease.Row, error) {
	b := t.b
	n := len(idx)
	order := idx
	if b.test.unsorted {
		order = slices.Clone(idx)
		slices.Sort(order) // request order
	}
	args := make([]any, 0, 7*n)
	keys := make([]any, n)
	for j, i := range order {
		r := reqs[i]
		claim := ""
		if tok, ver := b.core.Obs.Ripe(r.Key, start); tok != "" {
			claim = tok + "/" + ver
		}
		keys[j] = r.Key
		args = append(args, r.Key, tokens[i], r.Owner, max(r.Epoch, 0), r.TTL.Microseconds(), r.TTL.Microseconds(), claim)
	}
	acquire, read := b.batchStatements(n)
	got := make(map[string]sqllease.Row, n)
	err := b.callFor(ctx, b.core.BatchTimeout(n), func(ctx context.Context) error {
		if _, err := b.db.ExecContext(ctx, acquire, args...); err != nil {
			return err
		}
		return b.readRows(ctx, read, keys, got)
	})
	if err != nil {
		return nil, err
	}
	rows := make([]sqllease.Row, n)
	for j, i := range idx {
		r, ok := got[reqs[i].Key]
		if !ok {
			r.Err = fmt.Errorf("acquire: no row read back for key %q", reqs[i].Key)
		}
		r.Granted = ok && r.Token == tokens[i]
		rows[j] = r
	}
	return rows, nil
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
func (b *Backend) readRows(ctx context.Context, read string, keys []any, got map[string]sqllease.Row) error {
	clear(got)
	rs, err := b.db.QueryContext(ctx, read, keys...)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var k string
		var r sqllease.Row
		var leftUS, version, ttlUS int64
		if err := rs.Scan(&k, &r.Token, &r.Fence, &r.DoneEpoch, &r.Owner, &leftUS, &version, &ttlUS); err != nil {
			return err
		}
		r.Held, r.Version = r.Token != "", strconv.FormatInt(version, 10)
		r.Left, r.TTL = time.Duration(leftUS)*time.Microsecond, time.Duration(ttlUS)*time.Microsecond
		if !r.Held {
			// Held when acquire.sql ran, free when rows.sql read it back:
			// released in between.
			r.Detail = "held when this attempt ran, released since"
		}
		got[k] = r
	}
	return rs.Err()
}

// CheckRequest refuses what the table cannot store or the protocol
// forbids.
func (leaseTable) CheckRequest(r lease.Request) error {
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
