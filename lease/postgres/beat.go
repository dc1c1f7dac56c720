package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/internal/sqllease"
)

// Beat writes bt's entry as Put does (put.sql) and reads the spaces of
// bt.Read (lists.sql) in one batch: one round trip and one transaction
// per heartbeat instead of a Put, a List per space and a health check
// (the round's outcome is the server's health). The read runs after the
// write in the same transaction, so it sees it.
func (b *Backend) Beat(ctx context.Context, bt lease.Beat) lease.BeatResult {
	e := bt.Entry
	start := time.Now()
	wrote := false
	lists := make([][]lease.Entry, len(bt.Read))
	err := b.callStore(ctx, func(ctx context.Context, c *pgx.Conn) error {
		wrote = false // a retry starts over
		batch := &pgx.Batch{}
		batch.Queue(b.store.put, bt.Space, e.Name, e.Version, sqllease.NonNil(e.Data), sqllease.TTLMicros(e.TTL))
		if len(bt.Read) > 0 {
			batch.Queue(b.store.lists, bt.Read)
		}
		br := c.SendBatch(ctx, batch)
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return err
		}
		wrote = true
		if len(bt.Read) > 0 {
			if err := readSpaces(br, bt.Read, lists); err != nil {
				_ = br.Close()
				return err
			}
		}
		return br.Close()
	})
	return sqllease.BeatResult(b.core.Server, bt, wrote, lists, err, time.Since(start))
}

// readSpaces reads the rows of lists.sql from br into lists, one per
// space of spaces.
func readSpaces(br pgx.BatchResults, spaces []string, lists [][]lease.Entry) error {
	at := make(map[string]int, len(spaces))
	for i, s := range spaces {
		at[s], lists[i] = i, []lease.Entry{} // a retry starts over
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	var space string
	var e lease.Entry
	var ttl int64
	_, err = pgx.ForEachRow(rows, []any{&space, &e.Name, &e.Version, &e.Data, &ttl}, func() error {
		e.TTL = time.Duration(ttl) * time.Microsecond
		if i, ok := at[space]; ok {
			lists[i] = append(lists[i], e)
		}
		e.Data = nil // the next row gets its own slice
		return nil
	})
	return err
}
