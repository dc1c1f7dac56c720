package etcd

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasecron/leasecron/lease"
)

// beatHealthEvery is how often a Beat also asks every member for its
// status (Health: one request per member): the heartbeat's own requests
// reach one member only.
const beatHealthEvery = 10 * time.Second

// beatState is what the last Beat wrote: the key, its ModRevision and its
// etcd lease, so that the next Beat writes with one transaction guarded
// by that revision (nobody wrote the key since: the stored version is
// the last Beat's, lower than the new one) instead of Put's read first.
type beatState struct {
	mu     sync.Mutex
	key    string
	rev    int64
	ver    int64 // the entry's version written
	lease  clientv3.LeaseID
	ttl    time.Duration
	health time.Time // when Health last ran for a Beat
}

// Beat writes bt's entry and reads the spaces of bt.Read: after a first
// Beat that writes as Put does, one KeepAliveOnce of the entry's lease
// and one transaction (the write, guarded by the revision the last Beat
// wrote, and a range read of each space) per heartbeat. When the guard
// fails (another writer, an expired lease) it writes as Put does and
// reads with one transaction. Every beatHealthEvery it adds Health's
// status of every member.
func (b *Backend) Beat(ctx context.Context, bt lease.Beat) lease.BeatResult {
	st := &b.beat
	st.mu.Lock()
	defer st.mu.Unlock()
	var r lease.BeatResult
	if b.closed.Load() {
		return lease.BeatResult{PutErr: lease.ErrClosed, ReadErr: lease.ErrClosed}
	}
	key := b.entryPrefix(bt.Space) + bt.Entry.Name
	done := false
	if st.key == key && st.ttl == bt.Entry.TTL && bt.Entry.Version > st.ver && (bt.Entry.TTL == 0 || b.renew(ctx, st.lease)) {
		r, done = b.beatTxn(ctx, bt, key)
	}
	if !done {
		st.key = ""
		r = b.beatSlow(ctx, bt, key)
	}
	if time.Since(st.health) >= beatHealthEvery {
		st.health = time.Now()
		r.Health = b.Health(ctx)
	}
	return r
}

// beatTxn writes and reads in one transaction guarded by the revision
// the last Beat wrote; done is false when the guard failed.
func (b *Backend) beatTxn(ctx context.Context, bt lease.Beat, key string) (lease.BeatResult, bool) {
	st := &b.beat
	then := []clientv3.Op{clientv3.OpPut(key, entryValue(bt.Entry), clientv3.WithLease(st.lease))}
	for _, s := range bt.Read {
		then = append(then, clientv3.OpGet(b.entryPrefix(s), clientv3.WithPrefix()))
	}
	var resp *clientv3.TxnResponse
	err := b.call(ctx, func(ctx context.Context) error {
		var err error
		resp, err = b.c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", st.rev)).Then(then...).Commit()
		return err
	})
	if err != nil || !resp.Succeeded {
		return lease.BeatResult{}, false
	}
	st.rev, st.ver = resp.Header.Revision, bt.Entry.Version
	lists, err := b.parseRanges(bt.Read, resp.Responses[1:])
	return lease.BeatResult{Lists: lists, ReadErr: err}, true
}

// beatSlow writes as Put does, remembers what it wrote for the next
// Beat, and reads the spaces with one transaction.
func (b *Backend) beatSlow(ctx context.Context, bt lease.Beat, key string) lease.BeatResult {
	var r lease.BeatResult
	r.PutErr = b.Put(ctx, bt.Space, bt.Entry)
	var ops []clientv3.Op
	ops = append(ops, clientv3.OpGet(key))
	for _, s := range bt.Read {
		ops = append(ops, clientv3.OpGet(b.entryPrefix(s), clientv3.WithPrefix()))
	}
	var resp *clientv3.TxnResponse
	err := b.call(ctx, func(ctx context.Context) error {
		var err error
		resp, err = b.c.Txn(ctx).Then(ops...).Commit()
		return err
	})
	if err != nil {
		r.ReadErr = fmt.Errorf("list %v: %w", bt.Read, err)
		return r
	}
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); r.PutErr == nil && len(kvs) == 1 {
		if e, err := parseEntry(b.entryPrefix(bt.Space), kvs[0]); err == nil && e.Version == bt.Entry.Version {
			st := &b.beat
			st.key, st.rev, st.ver = key, kvs[0].ModRevision, e.Version
			st.lease, st.ttl = clientv3.LeaseID(kvs[0].Lease), bt.Entry.TTL
		}
	}
	r.Lists, r.ReadErr = b.parseRanges(bt.Read, resp.Responses[1:])
	return r
}

// parseRanges parses the range reads of spaces (one response each).
func (b *Backend) parseRanges(spaces []string, resps []*etcdserverpb.ResponseOp) ([][]lease.Entry, error) {
	lists := make([][]lease.Entry, len(spaces))
	for i, s := range spaces {
		prefix := b.entryPrefix(s)
		lists[i] = []lease.Entry{}
		for _, kv := range resps[i].GetResponseRange().GetKvs() {
			e, err := parseEntry(prefix, kv)
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", s, err)
			}
			lists[i] = append(lists[i], e)
		}
	}
	return lists, nil
}
