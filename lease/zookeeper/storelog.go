package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasecron/leasecron/lease"
)

// atDigits is the width of a record znode's At prefix.
const atDigits = 20

func (b *Backend) logPath(log string) string {
	return b.cfg.Root + "/" + logsNode + "/" + log
}

// recordName is a record's znode name: At in ms, offset by 2^63 so that
// dates before 1970 sort first, as 20 zero-padded digits, then '-' and
// the ID. Names sort by At, then ID.
func recordName(rec lease.Record) string {
	return fmt.Sprintf("%0*d-%s", atDigits, uint64(rec.At.UnixMilli())^(1<<63), rec.ID)
}

// parseRecordName splits a record znode's name; ok is false for a name
// that is not a record's.
func parseRecordName(name string) (at time.Time, id string, ok bool) {
	if len(name) < atDigits+2 || name[atDigits] != '-' {
		return at, "", false
	}
	u, err := strconv.ParseUint(name[:atDigits], 10, 64)
	if err != nil {
		return at, "", false
	}
	return time.UnixMilli(int64(u ^ (1 << 63))), name[atDigits+1:], true
}

// Append creates the record's znode (a repeated record, same At and ID,
// finds it there: a no-op), then lists the log and deletes the oldest
// records beyond limit, and any later copy of a record ID (by creation
// zxid: the first append of an ID stays).
func (b *Backend) Append(ctx context.Context, log string, rec lease.Record, limit int) error {
	if err := lease.CheckRecord(log, rec, limit); err != nil {
		return err
	}
	if err := b.append(ctx, log, rec, limit); err != nil {
		return fmt.Errorf("zookeeper: append %s/%s: %w", log, rec.ID, err)
	}
	return nil
}

func (b *Backend) append(ctx context.Context, log string, rec lease.Record, limit int) error {
	dir := b.logPath(log)
	path := dir + "/" + recordName(rec)
	for try := 0; ; try++ {
		err := b.call(ctx, b.cfg.Timeout, func() error {
			_, err := b.conn.Create(path, rec.Data, 0, b.acl())
			return err
		}, nil)
		if errors.Is(err, zk.ErrNoNode) && try == 0 {
			if err := b.makeDirs(ctx, logsNode, log); err != nil {
				return err
			}
			continue
		}
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return b.nodeErr(err)
		}
		break
	}
	// The create went through the leader: this server now has every
	// record created before it, and the listing sees them.
	names, err := b.children(ctx, dir)
	if err != nil {
		return err
	}
	drop, err := b.trim(ctx, dir, names, limit)
	if err != nil {
		return err
	}
	if len(drop) == 0 {
		return nil
	}
	err = b.call(ctx, b.fanTimeout(len(drop)), func() error {
		return each(len(drop), func(i int) error {
			err := b.conn.Delete(dir+"/"+drop[i], -1)
			if errors.Is(err, zk.ErrNoNode) {
				return nil // another appender trimmed it
			}
			return err
		})
	}, nil)
	if err != nil {
		return fmt.Errorf("trim: %w", b.nodeErr(err))
	}
	return nil
}

// trim returns the record znodes of the log to delete: later copies of an
// ID (rare: an ID appended again with another At), then the oldest
// beyond limit.
func (b *Backend) trim(ctx context.Context, dir string, names []string, limit int) ([]string, error) {
	var recs []string
	byID := map[string][]string{}
	for _, n := range names {
		if _, id, ok := parseRecordName(n); ok {
			recs = append(recs, n)
			byID[id] = append(byID[id], n)
		}
	}
	var dups []string
	for _, ns := range byID {
		if len(ns) > 1 {
			dups = append(dups, ns...)
		}
	}
	var drop []string
	if len(dups) > 0 {
		czxid := make([]int64, len(dups))
		err := b.call(ctx, b.fanTimeout(len(dups)), func() error {
			return each(len(dups), func(i int) error {
				ok, st, err := b.conn.Exists(dir + "/" + dups[i])
				if err == nil && ok {
					czxid[i] = st.Czxid
				}
				return err
			})
		}, nil)
		if err != nil {
			return nil, fmt.Errorf("trim: %w", b.nodeErr(err))
		}
		first := map[string]int{} // ID -> index in dups of its first copy
		for i, n := range dups {
			_, id, _ := parseRecordName(n)
			if j, seen := first[id]; !seen || czxid[i] != 0 && (czxid[j] == 0 || czxid[i] < czxid[j]) {
				first[id] = i
			}
		}
		for i, n := range dups {
			if _, id, _ := parseRecordName(n); first[id] != i {
				drop = append(drop, n)
			}
		}
		recs = slices.DeleteFunc(recs, func(n string) bool { return slices.Contains(drop, n) })
	}
	slices.Sort(recs)
	if len(recs) > limit {
		drop = append(drop, recs[:len(recs)-limit]...)
	}
	return drop, nil
}

// Log returns up to n of the log's newest records, newest first: the
// log's children (after a sync, so every acknowledged Append is there),
// sorted, then the data of the newest n (requests pipelined).
func (b *Backend) Log(ctx context.Context, log string, n int) ([]lease.Record, error) {
	if err := lease.CheckName("log", log); err != nil {
		return nil, err
	}
	if err := lease.CheckLimit(n); err != nil {
		return nil, err
	}
	l, err := b.readLog(ctx, log, n)
	if err != nil {
		return nil, fmt.Errorf("zookeeper: log %s: %w", log, err)
	}
	return l, nil
}

func (b *Backend) readLog(ctx context.Context, log string, n int) ([]lease.Record, error) {
	if err := b.sync(ctx); err != nil {
		return nil, err
	}
	dir := b.logPath(log)
	names, err := b.children(ctx, dir)
	if err != nil {
		return nil, err
	}
	names = slices.DeleteFunc(names, func(name string) bool {
		_, _, ok := parseRecordName(name)
		return !ok
	})
	slices.Sort(names)
	slices.Reverse(names)
	names = names[:min(n, len(names))]
	recs := make([]lease.Record, len(names))
	found := make([]bool, len(names))
	err = b.call(ctx, b.fanTimeout(len(names)), func() error {
		return each(len(names), func(i int) error {
			data, _, err := b.conn.Get(dir + "/" + names[i])
			if errors.Is(err, zk.ErrNoNode) {
				return nil // trimmed since
			}
			if err != nil {
				return err
			}
			at, id, _ := parseRecordName(names[i])
			recs[i], found[i] = lease.Record{ID: id, At: at, Data: data}, true
			return nil
		})
	}, nil)
	if err != nil {
		return nil, b.nodeErr(err)
	}
	out := make([]lease.Record, 0, len(recs))
	for i, r := range recs {
		if found[i] {
			out = append(out, r)
		}
	}
	return out, nil
}
