package sqllease

import (
	"fmt"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// RowFunc runs a statement that returns at most one row and scans that
// row into dest; it reports false, with no error, when there is none.
// It may run the statement more than once (a retry on a fresh
// connection).
type RowFunc func(dest ...any) (found bool, err error)

// Inspect is a SQL Backend's Inspect of key: read scans key's row
// (inspect.sql: holder while held, µs left on the server's clock,
// completed epoch, fence, note, note version). A key never used has
// NoteVersion -1 and zero values. The error names key.
func Inspect(key string, read RowFunc) (lease.Info, error) {
	in := lease.Info{NoteVersion: -1}
	var leftUS int64
	found, err := read(&in.Holder, &leftUS, &in.DoneEpoch, &in.Fence, &in.Note, &in.NoteVersion)
	if err != nil {
		return lease.Info{}, fmt.Errorf("inspect %s: %w", key, err)
	}
	if !found {
		in, leftUS = lease.Info{NoteVersion: -1}, 0
	}
	in.Answered = 1
	if leftUS > 0 {
		in.TTL = time.Duration(leftUS) * time.Microsecond
		in.HolderNodes = 1
	}
	return in, nil
}

// Get is a SQL Backend's Get of entry name of space: it checks the names
// and read scans the entry's live row (get.sql: version, data, TTL in
// µs). The error names the entry.
func Get(space, name string, read RowFunc) (lease.Entry, bool, error) {
	if err := lease.CheckName("space", space); err != nil {
		return lease.Entry{}, false, err
	}
	if err := lease.CheckName("entry name", name); err != nil {
		return lease.Entry{}, false, err
	}
	e := lease.Entry{Name: name}
	var ttl int64
	found, err := read(&e.Version, &e.Data, &ttl)
	if err != nil {
		return lease.Entry{}, false, fmt.Errorf("get %s/%s: %w", space, name, err)
	}
	if !found {
		return lease.Entry{}, false, nil
	}
	e.TTL = time.Duration(ttl) * time.Microsecond
	return e, true, nil
}

// CheckLog checks the arguments of Log: a good log name and 1 <= n <=
// lease.MaxLogLimit.
func CheckLog(log string, n int) error {
	if err := lease.CheckName("log", log); err != nil {
		return err
	}
	return lease.CheckLimit(n)
}

// TTLMicros is a TTL in whole microseconds, rounded up so that a tiny
// positive TTL does not become 0 (no expiry).
func TTLMicros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

// NonNil returns p, or an empty slice for nil: the drivers send a nil
// []byte as NULL, and the data columns are NOT NULL.
func NonNil(p []byte) []byte {
	if p == nil {
		return []byte{}
	}
	return p
}

// BeatResult is the lease.BeatResult of a heartbeat round (a write of
// bt's entry and a read of its spaces) on server that took latency and
// ended with err, the write done or not (wrote); lists are the spaces'
// entries when err is nil.
func BeatResult(server string, bt lease.Beat, wrote bool, lists [][]lease.Entry, err error, latency time.Duration) lease.BeatResult {
	r := lease.BeatResult{Health: []lease.ServerStatus{lease.ServerHealth(server, err, latency)}}
	if !wrote {
		r.PutErr = fmt.Errorf("put %s/%s: %w", bt.Space, bt.Entry.Name, err)
	}
	if err != nil {
		r.ReadErr = fmt.Errorf("list %v: %w", bt.Read, err)
		return r
	}
	r.Lists = lists
	return r
}
