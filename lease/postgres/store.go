package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/internal/sqllease"
)

// callStore is call for Entries and Logs: it creates their tables first if
// they are missing (see ensureStore). Every statement it runs may run
// twice (see do): a Put sent again finds its own version stored and
// changes nothing, an Append sent again finds its record's ID.
func (b *Backend) callStore(ctx context.Context, f func(context.Context, *pgx.Conn) error) error {
	return b.call(ctx, func(ctx context.Context, c *pgx.Conn) error {
		if err := b.ensureStore(ctx, c); err != nil {
			return err
		}
		return f(ctx, c)
	})
}

// Put stores e in space (a row of the entries table, see store_schema.sql)
// unless a live entry of the same name with a version >= e.Version is
// stored there, in one statement (put.sql). A positive TTL sets the
// entry's expiry to the database's clock plus the TTL (kept to the
// microsecond, rounded up). The same statement deletes up to 100 expired
// entries of space, so expired entries stay only until the next Put in
// their space. It fails, naming the server, when the server does not
// answer within the timeout; a bad input is refused before anything is
// sent.
func (b *Backend) Put(ctx context.Context, space string, e lease.Entry) error {
	if err := lease.CheckEntry(space, e); err != nil {
		return err
	}
	err := b.callStore(ctx, func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, b.store.put, space, e.Name, e.Version, sqllease.NonNil(e.Data), sqllease.TTLMicros(e.TTL))
		return err
	})
	if err != nil {
		return fmt.Errorf("put %s/%s: %w", space, e.Name, err)
	}
	return nil
}

// Get returns the entry name of space if it is stored and not expired on
// the database's clock, with the TTL it was stored with.
func (b *Backend) Get(ctx context.Context, space, name string) (lease.Entry, bool, error) {
	return sqllease.Get(space, name, queryRow(ctx, b.callStore, b.store.get, space, name))
}

// List returns the live entries of space, sorted by name (bytewise).
func (b *Backend) List(ctx context.Context, space string) ([]lease.Entry, error) {
	if err := lease.CheckName("space", space); err != nil {
		return nil, err
	}
	var l []lease.Entry
	err := b.callStore(ctx, func(ctx context.Context, c *pgx.Conn) error {
		l = l[:0] // a retry starts over
		rows, err := c.Query(ctx, b.store.list, space)
		if err != nil {
			return err
		}
		var e lease.Entry
		var ttl int64
		_, err = pgx.ForEachRow(rows, []any{&e.Name, &e.Version, &e.Data, &ttl}, func() error {
			e.TTL = time.Duration(ttl) * time.Microsecond
			l = append(l, e)
			e.Data = nil // the next row gets its own slice
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", space, err)
	}
	return l, nil
}

// Append adds rec to log (a row of the log table, rec.At cut to the
// millisecond) and deletes the log's records beyond the newest limit, in
// one statement (append.sql): a log holds limit records, or a few more
// right after concurrent Appends, until the next one. A record older than
// the newest limit is not added; a record whose ID is in the log is not
// added again.
func (b *Backend) Append(ctx context.Context, log string, rec lease.Record, limit int) error {
	if err := lease.CheckRecord(log, rec, limit); err != nil {
		return err
	}
	at := rec.At.Truncate(time.Millisecond)
	err := b.callStore(ctx, func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, b.store.appendRec, log, rec.ID, at, sqllease.NonNil(rec.Data), limit)
		return err
	})
	if err != nil {
		return fmt.Errorf("append %s/%s: %w", log, rec.ID, err)
	}
	return nil
}

// Log returns up to n of the newest records of log, newest first (by At,
// then ID bytewise); an unknown log is empty.
func (b *Backend) Log(ctx context.Context, log string, n int) ([]lease.Record, error) {
	if err := sqllease.CheckLog(log, n); err != nil {
		return nil, err
	}
	var l []lease.Record
	err := b.callStore(ctx, func(ctx context.Context, c *pgx.Conn) error {
		l = l[:0] // a retry starts over
		rows, err := c.Query(ctx, b.store.trail, log, n)
		if err != nil {
			return err
		}
		var r lease.Record
		_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.At, &r.Data}, func() error {
			l = append(l, r)
			r.Data = nil
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", log, err)
	}
	return l, nil
}
