package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasecron/leasecron/lease"
)

// Lease is a held acquisition: the lock key attached to its own etcd
// lease. Its methods are safe for concurrent use.
type Lease struct {
	b     *Backend
	req   lease.Request
	token string
	sh    *shared // the etcd lease, shared with the Leases of one batch
	fence int64   // the lock's CreateRevision

	mu         sync.Mutex
	validUntil time.Time
	gone       bool // released or completed
}

var _ lease.Lease = (*Lease)(nil)

// Key returns the key as given in the request.
func (l *Lease) Key() string { return l.req.Key }

// Owner returns the request's Owner.
func (l *Lease) Owner() string { return l.req.Owner }

// Token returns the acquisition's random token (stored in the lock).
func (l *Lease) Token() string { return l.token }

// Epoch returns the request's epoch.
func (l *Lease) Epoch() int64 { return l.req.Epoch }

// TTL returns the request's TTL (the etcd lease has GrantSeconds of it).
func (l *Lease) TTL() time.Duration { return l.req.TTL }

// Fence returns the revision of the transaction that created the lock.
func (l *Lease) Fence() int64 { return l.fence }

// LeaseID returns the etcd lease the lock is attached to.
func (l *Lease) LeaseID() clientv3.LeaseID { return l.sh.id }

// ValidUntil returns the end of the validity; zero once released.
func (l *Lease) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone {
		return time.Time{}
	}
	return l.validUntil
}

// Extend renews the etcd lease with one KeepAliveOnce. The new validity
// is min(ttl, the granted TTL) - elapsed since before the request - drift
// (ttl <= 0: the request's TTL). TTL <= 0 or lease not found in the answer
// is ErrNotHeld; a failed request is ErrNoQuorum, validity unchanged.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = l.req.TTL
	}
	l.mu.Lock()
	gone := l.gone
	l.mu.Unlock()
	if gone {
		return fmt.Errorf("extend %s: %w (released)", l.req.Key, lease.ErrNotHeld)
	}
	if l.b.closed.Load() {
		return fmt.Errorf("extend %s: %w", l.req.Key, lease.ErrClosed)
	}
	start := time.Now()
	kctx, cancel := context.WithTimeout(ctx, l.b.cfg.Timeout)
	resp, err := l.b.c.KeepAliveOnce(kctx, l.sh.id)
	cancel()
	if err != nil {
		if isLeaseGone(err) {
			return fmt.Errorf("extend %s: %w: %w", l.req.Key, lease.ErrNotHeld, err)
		}
		return fmt.Errorf("extend %s: %w: %w", l.req.Key, lease.ErrNoQuorum, l.b.nodeErr(err))
	}
	ttl = min(ttl, time.Duration(resp.TTL)*time.Second)
	left := l.b.validity(start, ttl)
	if left <= 0 {
		return fmt.Errorf("extend %s: %w: answered after %s, past the validity", l.req.Key, lease.ErrNoQuorum, time.Since(start).Round(time.Millisecond))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone {
		return fmt.Errorf("extend %s: %w (released)", l.req.Key, lease.ErrNotHeld)
	}
	l.validUntil = time.Now().Add(left)
	return nil
}

// markGone ends the validity locally; it reports whether it was already.
func (l *Lease) markGone() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	was := l.gone
	l.gone = true
	return was
}

// Release deletes the lock if it is still this acquisition's (guarded by
// its CreateRevision) and revokes the etcd lease. A lock already gone is
// not an error; a failed request is (the lock then expires by its TTL).
func (l *Lease) Release(ctx context.Context) error {
	if l.markGone() {
		return nil
	}
	k := l.b.keys(l.req.Key)
	tctx, cancel := context.WithTimeout(ctx, l.b.cfg.Timeout)
	defer cancel()
	_, err := l.b.c.Txn(tctx).If(guard(k, l.fence)).Then(clientv3.OpDelete(k.lock)).Commit()
	rerr := l.revoke(ctx)
	if err != nil {
		return fmt.Errorf("release %s: %w", l.req.Key, l.b.nodeErr(err))
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
		return fmt.Errorf("revoke lease of %s: %w", l.req.Key, l.b.nodeErr(err))
	}
	return nil
}

// Complete marks the epoch done and deletes the lock in one transaction
// guarded by the fence key's ModRevision (nobody acquired the key since
// us: the lock is ours, or gone with our expired etcd lease), retrying
// failed requests until ctx ends, then revokes the etcd lease. If the
// guard fails, a newer holder took the key: Complete returns ErrNotHeld
// unless the done key already shows the epoch (an earlier attempt
// succeeded but its answer was lost). Without an epoch it is Release.
func (l *Lease) Complete(ctx context.Context) error {
	if l.req.Epoch <= 0 {
		return l.Release(ctx)
	}
	l.mu.Lock()
	gone := l.gone
	l.mu.Unlock()
	if gone {
		return fmt.Errorf("complete %s: %w (released)", l.req.Key, lease.ErrNotHeld)
	}
	k := l.b.keys(l.req.Key)
	cmp, then, els := completeOps(k, l.fence, l.req.Epoch)
	for {
		tctx, cancel := context.WithTimeout(ctx, l.b.cfg.Timeout)
		resp, err := l.b.c.Txn(tctx).If(cmp).Then(then...).Else(els...).Commit()
		cancel()
		if err == nil {
			l.markGone()
			rerr := l.revoke(ctx)
			if resp.Succeeded {
				return rerr
			}
			if done := parseDone(resp.Responses[0].GetResponseRange().GetKvs()); done >= l.req.Epoch {
				return rerr
			}
			return fmt.Errorf("complete %s: %w: a newer holder took the key before epoch %d was marked", l.req.Key, lease.ErrNotHeld, l.req.Epoch)
		}
		if l.b.closed.Load() {
			return fmt.Errorf("complete %s: %w", l.req.Key, lease.ErrClosed)
		}
		t := time.NewTimer(lease.Jitter(max(l.b.cfg.Timeout/5, 10*time.Millisecond)))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(fmt.Errorf("complete %s: %w", l.req.Key, l.b.nodeErr(err)), ctx.Err())
		case <-t.C:
		}
	}
}
