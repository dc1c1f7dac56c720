package etcd

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasecron/leasecron/lease"
)

// Lease is a held acquisition: the lock key attached to its own etcd
// lease. Its methods are safe for concurrent use.
type Lease struct {
	lease.State // its fence is the lock's CreateRevision
	b           *Backend
	sh          *shared // the etcd lease, shared with the Leases of one batch
}

var _ lease.Lease = (*Lease)(nil)

// LeaseID returns the etcd lease the lock is attached to.
func (l *Lease) LeaseID() clientv3.LeaseID { return l.sh.id }

// Extend renews the etcd lease with one KeepAliveOnce. The new validity
// is min(ttl, the granted TTL) - elapsed since before the request - drift
// (ttl <= 0: the request's TTL). TTL <= 0 or lease not found in the answer
// is ErrNotHeld; a failed request is ErrNoQuorum, validity unchanged.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = l.TTL()
	}
	if l.Gone() {
		return fmt.Errorf("extend %s: %w (released)", l.Key(), lease.ErrNotHeld)
	}
	if l.b.closed.Load() {
		return fmt.Errorf("extend %s: %w", l.Key(), lease.ErrClosed)
	}
	start := time.Now()
	kctx, cancel := context.WithTimeout(ctx, l.b.cfg.Timeout)
	resp, err := l.b.c.KeepAliveOnce(kctx, l.sh.id)
	cancel()
	if err != nil {
		if isLeaseGone(err) {
			return fmt.Errorf("extend %s: %w: %w", l.Key(), lease.ErrNotHeld, err)
		}
		return fmt.Errorf("extend %s: %w: %w", l.Key(), lease.ErrNoQuorum, l.b.nodeErr(err))
	}
	ttl = min(ttl, time.Duration(resp.TTL)*time.Second)
	left := lease.Validity(start, ttl, l.b.o.drift) + l.b.test.validityBonus
	if left <= 0 {
		return fmt.Errorf("extend %s: %w: answered after %s, past the validity", l.Key(), lease.ErrNoQuorum, time.Since(start).Round(time.Millisecond))
	}
	if !l.SetValidUntil(start.Add(left)) {
		return fmt.Errorf("extend %s: %w (released)", l.Key(), lease.ErrNotHeld)
	}
	return nil
}

// Release deletes the lock if it is still this acquisition's (guarded by
// its CreateRevision) and revokes the etcd lease. A lock already gone is
// not an error; a failed request is (the lock then expires by its TTL).
func (l *Lease) Release(ctx context.Context) error {
	if l.Invalidate() {
		return nil
	}
	k := l.b.keys(l.Key())
	tctx, cancel := context.WithTimeout(ctx, l.b.cfg.Timeout)
	defer cancel()
	_, err := l.b.c.Txn(tctx).If(guard(k, l.Fence())).Then(clientv3.OpDelete(k.lock)).Commit()
	rerr := l.revoke(ctx)
	if err != nil {
		return fmt.Errorf("release %s: %w", l.Key(), l.b.nodeErr(err))
	}
	return rerr
}

// revoke revokes the etcd lease once no Lease of its batch holds it any
// more; a lease already gone is fine.
func (l *Lease) revoke(ctx context.Context) error {
	if l.sh.refs.Add(-1) > 0 {
		return nil
	}
	tctx, cancel := context.WithTimeout(ctx, l.b.cfg.Timeout)
	defer cancel()
	if _, err := l.b.c.Revoke(tctx, l.sh.id); err != nil && !isLeaseGone(err) {
		return fmt.Errorf("revoke lease of %s: %w", l.Key(), l.b.nodeErr(err))
	}
	return nil
}

// Complete marks the epoch done and deletes the lock in one transaction
// guarded by the fence key's ModRevision (nobody acquired the key since
// us: the lock is ours, or gone with our expired etcd lease), retrying
// failed requests (lease.RetryComplete) until ctx ends, then revokes the etcd lease. If the
// guard fails, a newer holder took the key: Complete returns ErrNotHeld
// unless the done key already shows the epoch (an earlier attempt
// succeeded but its answer was lost). Without an epoch it is Release.
func (l *Lease) Complete(ctx context.Context) error {
	if l.Epoch() <= 0 {
		return l.Release(ctx)
	}
	if l.Gone() {
		return fmt.Errorf("complete %s: %w (released)", l.Key(), lease.ErrNotHeld)
	}
	k := l.b.keys(l.Key())
	cmp, then, els := completeOps(k, l.Fence(), l.Epoch())
	return lease.RetryComplete(ctx, func(ctx context.Context) (bool, error) {
		tctx, cancel := context.WithTimeout(ctx, l.b.cfg.Timeout)
		resp, err := l.b.c.Txn(tctx).If(cmp).Then(then...).Else(els...).Commit()
		cancel()
		if err == nil {
			l.Invalidate()
			rerr := l.revoke(ctx)
			if resp.Succeeded {
				return true, rerr
			}
			if done := parseDone(resp.Responses[0].GetResponseRange().GetKvs()); done >= l.Epoch() {
				return true, rerr
			}
			return true, fmt.Errorf("complete %s: %w: a newer holder took the key before epoch %d was marked", l.Key(), lease.ErrNotHeld, l.Epoch())
		}
		if l.b.closed.Load() {
			return true, fmt.Errorf("complete %s: %w", l.Key(), lease.ErrClosed)
		}
		return false, fmt.Errorf("complete %s: %w", l.Key(), l.b.nodeErr(err))
	})
}
