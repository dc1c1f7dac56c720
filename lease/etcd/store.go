package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasecron/leasecron/lease"
)

// Bounds of the entries and logs (see "Entries and logs" in the package
// documentation).
const (
	// storeTries and storeRetryFor bound how often one request of Put,
	// Get, List, Append or Log is sent when it fails for want of an
	// answer (timeout, member down, no leader): at least storeTries
	// times, and again until storeRetryFor × Timeout has passed since the
	// first, enough for a leader election (while ctx lasts). Every
	// request is safe to repeat.
	storeTries    = 3
	storeRetryFor = 10
	// maxPutConflicts bounds Put's compare-and-swap loop: each lost round
	// means another client stored a newer value of the entry meanwhile.
	maxPutConflicts = 16
	// trimChunk is how many records one trimming transaction deletes (two
	// operations each, below etcd's default --max-txn-ops of 128).
	trimChunk = 32
)

// call runs f with the per-request timeout, again (after a short pause)
// while it fails for want of an answer, within the bounds of storeTries
// and storeRetryFor, and ctx and the backend are alive. The error names
// the endpoints.
func (b *Backend) call(ctx context.Context, f func(ctx context.Context) error) error {
	var err error
	until := time.Now().Add(storeRetryFor * b.cfg.Timeout)
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
		err = f(tctx)
		cancel()
		if err == nil {
			return nil
		}
		if try >= storeTries && !time.Now().Before(until) || !transient(err) || b.closed.Load() || ctx.Err() != nil {
			break
		}
		t := time.NewTimer(lease.Jitter(max(b.cfg.Timeout/5, 10*time.Millisecond)))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(b.nodeErr(err), ctx.Err())
		case <-t.C:
		}
	}
	if b.closed.Load() {
		return errors.Join(lease.ErrClosed, b.nodeErr(err))
	}
	return b.nodeErr(err)
}

// transient reports whether err is a request that got no answer in time
// (worth sending again), not a refusal by the server. A member whose own
// deadline for the request passed answers Unknown with the context's
// message.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), context.DeadlineExceeded.Error()) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
		return true
	}
	return false
}

// Put stores e unless a version >= e.Version is stored: an optimistic
// compare-and-swap on the key's ModRevision (0: absent), read first and
// then from the Else branch of every lost round. With a TTL, the value is
// put with an etcd lease of GrantSeconds(TTL): the entry's own lease,
// renewed with one KeepAliveOnce when the stored entry has one of the same
// length, otherwise a new one (the lease it replaces is revoked in the
// background, as is a granted lease the Put did not use).
func (b *Backend) Put(ctx context.Context, space string, e lease.Entry) error {
	if err := lease.CheckEntry(space, e); err != nil {
		return fmt.Errorf("etcd put: %w", err)
	}
	what := "put " + space + "/" + e.Name
	if b.closed.Load() {
		return fmt.Errorf("%s: %w", what, lease.ErrClosed)
	}
	prefix := b.entryPrefix(space)
	key := prefix + e.Name
	value := entryValue(e)
	var granted clientv3.LeaseID // granted by this Put, attached to nothing yet
	keep := false                // granted may be attached (a lost answer)
	defer func() {
		if granted != clientv3.NoLease && !keep {
			b.revokeLater(granted)
		}
	}()
	cur, err := b.getKV(ctx, key)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for range maxPutConflicts {
		var old clientv3.LeaseID
		var modRev int64
		var oldTTL time.Duration
		if cur != nil {
			if granted != clientv3.NoLease && clientv3.LeaseID(cur.Lease) == granted {
				granted = clientv3.NoLease // stored by an earlier round whose answer was lost
			}
			if st, err := parseEntry(prefix, cur); err == nil {
				if st.Version >= e.Version {
					return nil
				}
				oldTTL = st.TTL
			} // else: a malformed value, overwritten
			old, modRev = clientv3.LeaseID(cur.Lease), cur.ModRevision
		}
		etcdLease, err := b.entryLease(ctx, e.TTL, old, oldTTL, &granted)
		if err != nil {
			return fmt.Errorf("%s: grant: %w", what, err)
		}
		var resp *clientv3.TxnResponse
		err = b.call(ctx, func(ctx context.Context) error {
			var err error
			resp, err = b.c.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
				Then(clientv3.OpPut(key, value, clientv3.WithLease(etcdLease))).
				Else(clientv3.OpGet(key)).Commit()
			return err
		})
		if err != nil {
			if etcdLease == old && etcdLease != clientv3.NoLease && isLeaseGone(err) {
				// The renewed lease ran out meanwhile: read again, grant.
				if cur, err = b.getKV(ctx, key); err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				continue
			}
			keep = etcdLease == granted // the put may have been applied
			return fmt.Errorf("%s: %w", what, err)
		}
		if resp.Succeeded {
			if etcdLease == granted {
				granted = clientv3.NoLease
			}
			if old != clientv3.NoLease && old != etcdLease && !b.test.noLeaseRecycle {
				b.revokeLater(old)
			}
			return nil
		}
		cur = nil
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			cur = kvs[0]
		}
	}
	return fmt.Errorf("%s: %w: %d conflicting writes of the entry in a row", what, b.nodeErr(errors.New("gave up")), maxPutConflicts)
}

// entryLease returns the etcd lease an entry with ttl is put under: none
// for no TTL; the entry's current lease old (of oldTTL) when it has the
// same grant and is renewed; else *granted, granting it first if none
// was granted by an earlier round of this Put.
func (b *Backend) entryLease(ctx context.Context, ttl time.Duration, old clientv3.LeaseID, oldTTL time.Duration, granted *clientv3.LeaseID) (clientv3.LeaseID, error) {
	if ttl <= 0 {
		return clientv3.NoLease, nil
	}
	if old != clientv3.NoLease && !b.test.noLeaseRecycle && GrantSeconds(oldTTL) == GrantSeconds(ttl) && b.renew(ctx, old) {
		return old, nil
	}
	if *granted == clientv3.NoLease {
		if err := b.call(ctx, func(ctx context.Context) error {
			g, err := b.c.Grant(ctx, GrantSeconds(ttl))
			if err == nil {
				*granted = g.ID
			}
			return err
		}); err != nil {
			return clientv3.NoLease, err
		}
	}
	return *granted, nil
}

// getKV reads key (nil if absent) with one linearizable read.
func (b *Backend) getKV(ctx context.Context, key string) (*mvccpb.KeyValue, error) {
	var kv *mvccpb.KeyValue
	err := b.call(ctx, func(ctx context.Context) error {
		r, err := b.c.Get(ctx, key)
		if err == nil && len(r.Kvs) > 0 {
			kv = r.Kvs[0]
		}
		return err
	})
	return kv, err
}

// renew refreshes lease with one KeepAliveOnce; false if it is gone or
// the request failed (then the caller grants a new lease).
func (b *Backend) renew(ctx context.Context, id clientv3.LeaseID) bool {
	tctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	r, err := b.c.KeepAliveOnce(tctx, id)
	return err == nil && r.TTL > 0
}

// Get reads the entry with one linearizable read.
func (b *Backend) Get(ctx context.Context, space, name string) (lease.Entry, bool, error) {
	if err := lease.CheckName("space", space); err != nil {
		return lease.Entry{}, false, fmt.Errorf("etcd get: %w", err)
	}
	if err := lease.CheckName("entry name", name); err != nil {
		return lease.Entry{}, false, fmt.Errorf("etcd get: %w", err)
	}
	what := "get " + space + "/" + name
	if b.closed.Load() {
		return lease.Entry{}, false, fmt.Errorf("%s: %w", what, lease.ErrClosed)
	}
	prefix := b.entryPrefix(space)
	kv, err := b.getKV(ctx, prefix+name)
	if err != nil {
		return lease.Entry{}, false, fmt.Errorf("%s: %w", what, err)
	}
	if kv == nil {
		return lease.Entry{}, false, nil
	}
	e, err := parseEntry(prefix, kv)
	if err != nil {
		return lease.Entry{}, false, fmt.Errorf("%s: %w", what, err)
	}
	return e, true, nil
}

// List reads the space with one linearizable range read (etcd returns it
// sorted by key, hence by name).
func (b *Backend) List(ctx context.Context, space string) ([]lease.Entry, error) {
	if err := lease.CheckName("space", space); err != nil {
		return nil, fmt.Errorf("etcd list: %w", err)
	}
	what := "list " + space
	if b.closed.Load() {
		return nil, fmt.Errorf("%s: %w", what, lease.ErrClosed)
	}
	prefix := b.entryPrefix(space)
	var kvs []*mvccpb.KeyValue
	if err := b.call(ctx, func(ctx context.Context) error {
		r, err := b.c.Get(ctx, prefix, clientv3.WithPrefix())
		if err == nil {
			kvs = r.Kvs
		}
		return err
	}); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := make([]lease.Entry, 0, len(kvs))
	for _, kv := range kvs {
		e, err := parseEntry(prefix, kv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, e)
	}
	return out, nil
}
