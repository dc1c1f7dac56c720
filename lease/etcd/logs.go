package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasecron/leasecron/lease"
)

// Append adds rec in one transaction, then trims the log. The
// transaction puts the record key and the ID key only if the ID key does
// not exist (a repeated ID changes nothing), and counts the log's records
// in both branches. When the count exceeds limit, the oldest count-limit
// record keys are read at the transaction's revision (keys only) and
// deleted with their ID keys, trimChunk records per transaction; records
// beyond the newest limit of a revision stay beyond them, so concurrent
// trimmers never delete a record that should be kept. A repeated Append
// trims too, so retrying one whose trim failed is enough.
func (b *Backend) Append(ctx context.Context, log string, rec lease.Record, limit int) error {
	if err := lease.CheckRecord(log, rec, limit); err != nil {
		return fmt.Errorf("etcd append: %w", err)
	}
	what := "append " + log + "/" + rec.ID
	if b.closed.Load() {
		return fmt.Errorf("%s: %w", what, lease.ErrClosed)
	}
	prefix := b.logPrefix(log)
	at := encodeAt(rec.At)
	idKey := b.logIDKey(log, rec.ID)
	count := clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	var resp *clientv3.TxnResponse
	if err := b.call(ctx, func(ctx context.Context) error {
		var err error
		resp, err = b.c.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(idKey), "=", 0)).
			Then(clientv3.OpPut(prefix+at+"/"+rec.ID, string(rec.Data)), clientv3.OpPut(idKey, at), count).
			Else(count).Commit()
		return err
	}); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	n := resp.Responses[len(resp.Responses)-1].GetResponseRange().GetCount()
	if n <= int64(limit) {
		return nil
	}
	if err := b.trim(ctx, log, n-int64(limit), resp.Header.Revision); err != nil {
		return fmt.Errorf("%s: stored, but trimming the log to %d records: %w", what, limit, err)
	}
	return nil
}

// trim deletes the n oldest records of log as of revision rev, with their
// ID keys (each only if it still names the deleted record: the ID may
// have been appended again since). A compacted rev skips the trim: the
// next Append trims.
func (b *Backend) trim(ctx context.Context, log string, n, rev int64) error {
	prefix := b.logPrefix(log)
	var kvs []*mvccpb.KeyValue
	err := b.call(ctx, func(ctx context.Context) error {
		r, err := b.c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(n), clientv3.WithRev(rev))
		if err == nil {
			kvs = r.Kvs
		}
		return err
	})
	if errors.Is(err, rpctypes.ErrCompacted) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the oldest %d: %w", n, err)
	}
	for len(kvs) > 0 {
		chunk := kvs[:min(trimChunk, len(kvs))]
		kvs = kvs[len(chunk):]
		ops := make([]clientv3.Op, 0, 2*len(chunk))
		for _, kv := range chunk {
			r, err := parseRecord(prefix, kv)
			if err != nil {
				ops = append(ops, clientv3.OpDelete(string(kv.Key)))
				continue
			}
			idKey := b.logIDKey(log, r.ID)
			at := encodeAt(r.At)
			ops = append(ops, clientv3.OpDelete(string(kv.Key)),
				clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(idKey), "=", at)}, []clientv3.Op{clientv3.OpDelete(idKey)}, nil))
		}
		if err := b.call(ctx, func(ctx context.Context) error {
			_, err := b.c.Txn(ctx).Then(ops...).Commit()
			return err
		}); err != nil {
			return fmt.Errorf("delete %d records: %w", len(chunk), err)
		}
	}
	return nil
}

// Log reads the newest n records with one linearizable range read,
// sorted by key descending.
func (b *Backend) Log(ctx context.Context, log string, n int) ([]lease.Record, error) {
	if err := lease.CheckName("log", log); err != nil {
		return nil, fmt.Errorf("etcd log: %w", err)
	}
	if err := lease.CheckLimit(n); err != nil {
		return nil, fmt.Errorf("etcd log %s: %w", log, err)
	}
	what := "log " + log
	if b.closed.Load() {
		return nil, fmt.Errorf("%s: %w", what, lease.ErrClosed)
	}
	prefix := b.logPrefix(log)
	var kvs []*mvccpb.KeyValue
	if err := b.call(ctx, func(ctx context.Context) error {
		r, err := b.c.Get(ctx, prefix, clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(n)))
		if err == nil {
			kvs = r.Kvs
		}
		return err
	}); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := make([]lease.Record, 0, len(kvs))
	for _, kv := range kvs {
		r, err := parseRecord(prefix, kv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, r)
	}
	return out, nil
}
