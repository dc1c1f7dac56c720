package mysql

import (
	"context"
	"fmt"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/internal/sqllease"
)

// callStore is call for Entries and Logs: it creates their tables first if
// they are missing (see ensureStore). Every statement it runs may run
// twice (see do): a Put sent again finds its own version stored and
// changes nothing, an Append sent again finds its record's ID.
func (b *Backend) callStore(ctx context.Context, f func(context.Context) error) error {
	return b.call(ctx, func(ctx context.Context) error {
		if err := b.ensureStore(ctx); err != nil {
			return err
		}
		return f(ctx)
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
	tok := lease.NewToken()
	ttl := sqllease.TTLMicros(e.TTL)
	err := b.callStore(ctx, func(ctx context.Context) error {
		if _, err := b.db.ExecContext(ctx, b.store.put, space, e.Name, e.Version, sqllease.NonNil(e.Data), ttl, ttl, ttl, tok); err != nil {
			return err
		}
		_, _ = b.db.ExecContext(ctx, b.store.sweep, space, e.Name) // best effort
		return nil
	})
	if err != nil {
		return fmt.Errorf("put %s/%s: %w", space, e.Name, err)
	}
	return nil
}

// Get returns the entry name of space if it is stored and not expired on
// the database's clock, with the TTL it was stored with.
func (b *Backend) Get(ctx context.Context, space, name string) (lease.Entry, bool, error) {
	return sqllease.Get(space, name, b.queryRow(ctx, b.callStore, b.store.get, space, name))
}

// List returns the live entries of space, sorted by name (bytewise).
func (b *Backend) List(ctx context.Context, space string) ([]lease.Entry, error) {
	if err := lease.CheckName("space", space); err != nil {
		return nil, err
	}
	var l []lease.Entry
	err := b.callStore(ctx, func(ctx context.Context) error {
		l = l[:0] // a retry starts over
		rows, err := b.db.QueryContext(ctx, b.store.list, space)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e lease.Entry
			var ttl int64
			if err := rows.Scan(&e.Name, &e.Version, &e.Data, &ttl); err != nil {
				return err
			}
			e.TTL = time.Duration(ttl) * time.Microsecond
			l = append(l, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", space, err)
	}
	return l, nil
}

// Append adds rec to log (a row of the log table, rec.At cut to the
// millisecond) and then deletes the log's records beyond the newest limit
// (append.sql, trim.sql: two statements, each atomic): a log holds limit records, or a few more
// right after concurrent Appends, until the next one. A record older than
// the newest limit is not added; a record whose ID is in the log is not
// added again.
func (b *Backend) Append(ctx context.Context, log string, rec lease.Record, limit int) error {
	if err := lease.CheckRecord(log, rec, limit); err != nil {
		return err
	}
	at := rec.At.UnixMilli()
	err := b.callStore(ctx, func(ctx context.Context) error {
		_, err := b.db.ExecContext(ctx, b.store.appendRec, log, rec.ID, at, sqllease.NonNil(rec.Data), log, limit, at, rec.ID, limit)
		if err != nil {
			return err
		}
		_, err = b.db.ExecContext(ctx, b.store.trim, log, limit-1, log)
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
	err := b.callStore(ctx, func(ctx context.Context) error {
		l = l[:0] // a retry starts over
		rows, err := b.db.QueryContext(ctx, b.store.trail, log, n)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r lease.Record
			var ms int64
			if err := rows.Scan(&r.ID, &ms, &r.Data); err != nil {
				return err
			}
			r.At = time.UnixMilli(ms)
			l = append(l, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", log, err)
	}
	return l, nil
}
