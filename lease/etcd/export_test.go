package etcd

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasecron/leasecron/lease"
)

// SetUnsafeValidityBonus makes b overstate every validity by d: the
// negative control of the tests' interval check (a client that trusts
// more time than the server grants).
func SetUnsafeValidityBonus(b *Backend, d time.Duration) { b.test.validityBonus = d }

// SetUnsafeNoLeaseRecycle makes b's Put grant a new etcd lease for every
// entry with a TTL and never revoke the replaced one: the negative
// control of the lease-leak check.
func SetUnsafeNoLeaseRecycle(b *Backend) { b.test.noLeaseRecycle = true }

// SetUnsafeKeepFrozen keeps members that fail a probe among b's client's
// endpoints: the negative control of the frozen-member test (the client's
// balancer keeps sending requests to the frozen member).
func SetUnsafeKeepFrozen(b *Backend) { b.test.keepFrozen = true }

// SetUnsafeUnorderedDial lets b change its client's endpoints while a
// Status probe dials: the negative control of the probe/endpoint-change
// ordering (the race detector reports the client's unlocked read).
func SetUnsafeUnorderedDial(b *Backend) { b.test.unorderedDial = true }

// CleanOrphans runs b's clean-up of locks a lost acquire transaction may
// have written (cleanLater) for key, whose lock holds value, and waits for
// it; LockKey is key's lock key.
func CleanOrphans(b *Backend, key, value string, ttl time.Duration) {
	b.cleanLater([]lease.Request{{Key: key, Owner: value, TTL: ttl}})
	b.wg.Wait()
}

// LockKey is the etcd key of key's lock.
func LockKey(b *Backend, key string) string { return b.keys(key).lock }

// RefusalAfterLostAnswer is what an acquisition of key refused for lack
// of a quorum reports once b reads the key from one member (readRefused),
// written being the lock value this request's transaction, whose answer
// was lost, may have stored ("" for none).
func RefusalAfterLostAnswer(ctx context.Context, b *Backend, key, written string) error {
	reqs := []lease.Request{{Key: key, Owner: "me", TTL: time.Minute}}
	out := []lease.Result{{Err: &lease.RefusedError{Key: key, Reason: lease.ErrNoQuorum}}}
	b.readRefused(ctx, reqs, out, make([]clientv3.LeaseID, 1), []string{written})
	return out[0].Err
}
