package redis

import (
	"context"

	"github.com/leasecron/leasecron/lease"
)

// entriesKey is the Redis key of a space of entries: PREFIX:entries:SPACE
// (the lease client adds the hash tag and the expiry index beside it).
func (b *Backend) entriesKey(space string) string { return b.Key("entries:" + space) }

// logKey is the Redis key of a log: PREFIX:log:LOG (the lease client adds
// the hash tag and the records' hash beside it).
func (b *Backend) logKey(log string) string { return b.Key("log:" + log) }

// Put stores e in space on every node, keeping the highest version of a
// live entry (lease.Client.PutEntry).
func (b *Backend) Put(ctx context.Context, space string, e lease.Entry) error {
	if err := lease.CheckEntry(space, e); err != nil {
		return err
	}
	return b.c.PutEntry(ctx, b.entriesKey(space), e)
}

// Get returns the live entry name of space (lease.Client.GetEntry).
func (b *Backend) Get(ctx context.Context, space, name string) (lease.Entry, bool, error) {
	if err := lease.CheckName("space", space); err != nil {
		return lease.Entry{}, false, err
	}
	if err := lease.CheckName("entry name", name); err != nil {
		return lease.Entry{}, false, err
	}
	return b.c.GetEntry(ctx, b.entriesKey(space), name)
}

// List returns the live entries of space sorted by name
// (lease.Client.ListEntries).
func (b *Backend) List(ctx context.Context, space string) ([]lease.Entry, error) {
	if err := lease.CheckName("space", space); err != nil {
		return nil, err
	}
	return b.c.ListEntries(ctx, b.entriesKey(space))
}

// Append adds rec to log and trims it to limit records
// (lease.Client.AppendLog).
func (b *Backend) Append(ctx context.Context, log string, rec lease.Record, limit int) error {
	if err := lease.CheckRecord(log, rec, limit); err != nil {
		return err
	}
	return b.c.AppendLog(ctx, b.logKey(log), rec, limit)
}

// Log returns up to n of the newest records of log, newest first
// (lease.Client.ReadLog).
func (b *Backend) Log(ctx context.Context, log string, n int) ([]lease.Record, error) {
	if err := lease.CheckName("log", log); err != nil {
		return nil, err
	}
	if err := lease.CheckLimit(n); err != nil {
		return nil, err
	}
	return b.c.ReadLog(ctx, b.logKey(log), n)
}

// Beat writes the entry and reads the spaces of b in one call per node
// (lease.Client.Beat), with each node's health from its answer.
func (b *Backend) Beat(ctx context.Context, bt lease.Beat) lease.BeatResult {
	reads := make([]string, len(bt.Read))
	for i, s := range bt.Read {
		reads[i] = b.entriesKey(s)
	}
	r := b.c.Beat(ctx, b.entriesKey(bt.Space), bt.Entry, reads)
	out := lease.BeatResult{PutErr: r.PutErr, Lists: r.Lists, ReadErr: r.ReadErr}
	for _, p := range r.Nodes {
		out.Health = append(out.Health, lease.ServerStatus{Server: p.Node, Err: p.Err, Latency: p.Latency,
			Voting: p.Voting, VotingAt: p.VotingAt, RestartedAt: p.RestartedAt})
	}
	return out
}
