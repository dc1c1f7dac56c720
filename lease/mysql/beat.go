package mysql

import (
	"context"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/internal/sqllease"
)

// beatSweepEvery is how often a Beat also deletes the expired entries of
// the space it writes (sweep.sql, a statement of its own): heartbeats
// expire only when their hosts stop, so a sweep each heartbeat would
// cost every idle host a second request per round for nothing.
const beatSweepEvery = time.Minute

// Beat writes bt's entry as Put does (put.sql) and reads the spaces of
// bt.Read with one statement (lists.sql): two requests per heartbeat
// instead of a Put, a List per space and a health check (the round's
// outcome is the server's health). Every beatSweepEvery it sweeps the
// written space as Put does after every write.
func (b *Backend) Beat(ctx context.Context, bt lease.Beat) lease.BeatResult {
	e := bt.Entry
	tok := lease.NewToken()
	ttl := sqllease.TTLMicros(e.TTL)
	start := time.Now()
	wrote := false
	lists := make([][]lease.Entry, len(bt.Read))
	err := b.callStore(ctx, func(ctx context.Context) error {
		wrote = false // a retry starts over
		if _, err := b.db.ExecContext(ctx, b.store.put, bt.Space, e.Name, e.Version, sqllease.NonNil(e.Data), ttl, ttl, ttl, tok); err != nil {
			return err
		}
		wrote = true
		if last := b.beatSwept.Load(); time.Since(time.Unix(0, last)) >= beatSweepEvery && b.beatSwept.CompareAndSwap(last, time.Now().UnixNano()) {
			_, _ = b.db.ExecContext(ctx, b.store.sweep, bt.Space, e.Name) // best effort
		}
		return b.readSpaces(ctx, bt.Read, lists)
	})
	return sqllease.BeatResult(b.core.Server, bt, wrote, lists, err, time.Since(start))
}

// readSpaces reads the live entries of spaces into lists (one per space)
// with one statement.
func (b *Backend) readSpaces(ctx context.Context, spaces []string, lists [][]lease.Entry) error {
	if len(spaces) == 0 {
		return nil
	}
	at := make(map[string]int, len(spaces))
	args := make([]any, len(spaces))
	for i, s := range spaces {
		at[s], args[i], lists[i] = i, s, nil // a retry starts over
	}
	q := strings.Replace(b.store.lists, "{{spaces}}", strings.TrimSuffix(strings.Repeat("?, ", len(spaces)), ", "), 1)
	rows, err := b.db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var space string
		var e lease.Entry
		var ttl int64
		if err := rows.Scan(&space, &e.Name, &e.Version, &e.Data, &ttl); err != nil {
			return err
		}
		e.TTL = time.Duration(ttl) * time.Microsecond
		if i, ok := at[space]; ok {
			lists[i] = append(lists[i], e)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range lists {
		if lists[i] == nil {
			lists[i] = []lease.Entry{}
		}
	}
	return nil
}
