package redlock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// Lease is a held acquisition of a key: a lease.Lease. Its methods are
// safe for concurrent use. A Lease does not renew itself; see Client.Hold.
// Its Fence is strictly greater than the fence of every earlier holder of
// the key (see the package documentation for the precondition); it is 0
// when the client was built WithoutFencing.
type Lease struct {
	lease.State
	c     *Client
	value string // token + " " + owner, as stored on the nodes
}

var _ lease.Lease = (*Lease)(nil)

// Extend resets the lease's TTL on the nodes that still hold it. While the
// lease is still valid when the extend starts, it also takes the lock on
// nodes where it is missing (a node that had another client's lock at
// acquisition time, since expired, or one that missed the acquire
// request), unless the node has the lease's epoch completed: so a lease
// won on a bare quorum spreads to every reachable node and survives the
// loss of one of them. That is safe because no other client can hold a
// quorum while the lease is valid. It succeeds when a quorum holds the
// lease after the round and validity, counted from the start of the
// extend, is still positive; ValidUntil then moves. On failure ValidUntil
// is unchanged and the error matches ErrNotHeld (refused by too many nodes)
// or ErrNoQuorum (too few answered).
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = l.TTL()
	}
	if !l.c.test.noExtendTTL {
		// A longer TTL raises the restart guard and the fence expiry
		// before the round counts votes, as an Acquire with it would.
		l.c.noteTTL(ttl)
	}
	k := l.c.hashKey(l.Key())
	spread := "0"
	if time.Now().Before(l.ValidUntil()) {
		spread = "1"
	}
	epoch := strconv.FormatInt(l.Epoch(), 10)
	good, start, errs := l.c.simpleRound(ctx, "extend",
		func(int) call {
			return call{script: extendScript, keys: []string{k}, args: []any{l.value, ttl.Milliseconds(), epoch, spread}}
		}, l.c.quorum, isHeld, true, false)
	if good < l.c.quorum {
		reason := lease.ErrNotHeld
		if errs != nil {
			reason = lease.ErrNoQuorum
		}
		return fmt.Errorf("extend %s: %w (%d of %d needed)%s", l.Key(), reason, good, l.c.quorum, nodeSuffix(errs))
	}
	v := lease.Validity(start, ttl, l.c.opts.drift)
	if v <= 0 {
		return fmt.Errorf("extend %s: %w: round took %s, no validity left", l.Key(), lease.ErrNoQuorum, time.Since(start))
	}
	if !l.SetValidUntil(start.Add(v)) {
		return fmt.Errorf("extend %s: %w (given up)", l.Key(), lease.ErrNotHeld)
	}
	return nil
}

func nodeSuffix(errs error) string {
	if errs == nil {
		return ""
	}
	return ": " + errs.Error()
}

// Release deletes the lease on every node where it is still ours
// (compare-and-delete by token). Each node's release is applied after any
// earlier request of this client to that node, so a slow node never keeps a
// key past its release. Release returns once a quorum answered; the others
// are finished in the background (Client.Close waits for them). An error
// means fewer than a quorum answered; the lease then expires by its TTL.
func (l *Lease) Release(ctx context.Context) error {
	k := l.c.hashKey(l.Key())
	l.Invalidate()
	good, _, errs := l.c.simpleRound(ctx, "release",
		func(int) call { return call{script: releaseScript, keys: []string{k}, args: []any{l.value}} },
		l.c.quorum, func(any) bool { return true }, false, false)
	if good < l.c.quorum {
		return fmt.Errorf("release %s: %w%s", l.Key(), lease.ErrNoQuorum, nodeSuffix(errs))
	}
	return nil
}

// Complete marks the lease's epoch completed and releases it. It retries
// (lease.RetryComplete) until a quorum of nodes stored the mark or ctx ends; from then on no
// acquisition of this epoch or an older one can succeed. A node marks the
// epoch when no newer holder took the key since this acquisition: the lock
// is ours, or gone (expired) with the fence counter not past our Fence. When
// so many nodes name a newer holder that no quorum can mark the epoch,
// Complete returns ErrNotHeld and the epoch stays open for that holder.
// Without an epoch it is Release. Call it only after the epoch's work has
// really finished.
func (l *Lease) Complete(ctx context.Context) error {
	if l.Epoch() <= 0 {
		return l.Release(ctx)
	}
	l.Invalidate()
	// First a round that only looks: when a newer holder is seen on enough
	// nodes, nothing is written — not even on the nodes its requests have
	// not reached yet.
	if _, newer, errs := l.completeRound(ctx, true); newer > len(l.c.nodes)-l.c.quorum {
		return l.newerHolder(newer, errs)
	}
	return lease.RetryComplete(ctx, func(ctx context.Context) (bool, error) {
		good, newer, errs := l.completeRound(ctx, false)
		if good >= l.c.quorum {
			return true, nil
		}
		if newer > len(l.c.nodes)-l.c.quorum {
			return true, l.newerHolder(newer, errs)
		}
		return false, fmt.Errorf("complete %s epoch %d: %w (%d of %d)%s", l.Key(), l.Epoch(), lease.ErrNoQuorum, good, l.c.quorum, nodeSuffix(errs))
	})
}

// completeRound runs complete.lua on every node. The marking round waits
// for every node up to the timeout: the more nodes carry the mark, the
// more node restarts it survives; the checkOnly round (which writes
// nothing) stops once its outcome is decided. It returns how many nodes
// marked the epoch (or would) and how many named a newer holder.
func (l *Lease) completeRound(ctx context.Context, checkOnly bool) (good, newer int, errs error) {
	k := l.c.hashKey(l.Key())
	check := "0"
	if checkOnly {
		check = "1"
	}
	good, _, errs = l.c.simpleRound(ctx, "complete",
		func(int) call {
			return call{script: completeScript, keys: []string{k},
				args: []any{l.value, l.Epoch(), strconv.FormatInt(l.Fence(), 10), check}}
		}, l.c.quorum, func(v any) bool {
			if isOne(v) {
				return true
			}
			newer++
			return false
		}, false, !checkOnly)
	return good, newer, errs
}

// newerHolder is Complete's error when too many nodes name a newer holder
// of the key for a quorum to mark the epoch.
func (l *Lease) newerHolder(newer int, errs error) error {
	return fmt.Errorf("complete %s epoch %d: %w: %d of %d nodes name a newer holder of the key%s",
		l.Key(), l.Epoch(), lease.ErrNotHeld, newer, len(l.c.nodes), nodeSuffix(errs))
}
