package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/internal/sqllease"
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
	return b.core.Acquire(ctx, leaseTable{b}, req)
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
	return b.core.TryBatch(ctx, leaseTable{b}, reqs, lease.NewTokens(len(reqs)))
}

// leaseTable is the Backend's lease table as package sqllease uses it
// (sqllease.Table): the statements of acquire.sql, extend.sql,
// release.sql and complete.sql (lease.go).
type leaseTable struct{ b *Backend }

var _ sqllease.Table = leaseTable{}

// Acquire runs acquire.sql for reqs[idx] (sorted by key), started at
// start, and returns its rows in the order of idx: one statement that
// makes the attempt and reports each key's row as it stood before it.
func (t leaseTable) Acquire(ctx context.Context, reqs []lease.Request, tokens []string, idx []int, start time.Time) ([]sqllease.Row, error) {
	b := t.b
	n := len(idx)
	keys, toks, owners := make([]string, n), make([]string, n), make([]string, n)
	ttls, epochs := make([]int64, n), make([]int64, n)
	seenToks, seenXmins := make([]string, n), make([]string, n)
	for j, i := range idx {
		keys[j], toks[j], owners[j] = reqs[i].Key, tokens[i], reqs[i].Owner
		ttls[j], epochs[j] = reqs[i].TTL.Microseconds(), max(reqs[i].Epoch, 0)
		seenToks[j], seenXmins[j] = b.core.Obs.Ripe(reqs[i].Key, start)
	}
	rows := make([]sqllease.Row, n)
	err := b.callFor(ctx, b.core.BatchTimeout(n), func(ctx context.Context, c *pgx.Conn) error {
		rs, err := c.Query(ctx, b.stmt(b.sql.acquire), keys, toks, owners, ttls, epochs, seenToks, seenXmins)
		if err != nil {
			return err
		}
		j := 0
		var r sqllease.Row
		var leftUS, ttlUS int64
		dest := []any{&r.Granted, &r.Fence, &r.DoneEpoch, &r.Owner, &leftUS, &r.Held, &r.Token, &r.Version, &ttlUS}
		_, err = pgx.ForEachRow(rs, dest, func() error {
			if j >= n {
				return fmt.Errorf("acquire: more than %d rows returned", n)
			}
			r.Left, r.TTL = time.Duration(leftUS)*time.Microsecond, time.Duration(ttlUS)*time.Microsecond
			r.Detail = ""
			if !r.Held {
				// The row was free in the statement's snapshot but taken
				// by a concurrent statement before ours locked it.
				r.Detail = "taken by a concurrent request"
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

// CheckRequest refuses what the table cannot store or the protocol
// forbids.
func (leaseTable) CheckRequest(r lease.Request) error {
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
