package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Lease is a held acquisition of a key. Its methods are safe for concurrent
// use. A Lease does not renew itself; see Hold.
type Lease struct {
	c     *Client
	req   Request
	value string // token + " " + owner, as stored on the nodes
	token string
	fence int64

	mu         sync.Mutex
	validUntil time.Time
}

// Key returns the lease's key.
func (l *Lease) Key() string { return l.req.Key }

// Owner returns the Owner given in the Request.
func (l *Lease) Owner() string { return l.req.Owner }

// Token returns the random token that identifies this acquisition.
func (l *Lease) Token() string { return l.token }

// Epoch returns the Request's epoch (0 if none).
func (l *Lease) Epoch() int64 { return l.req.Epoch }

// TTL returns the TTL of the acquisition and of each extension by Hold.
func (l *Lease) TTL() time.Duration { return l.req.TTL }

// Fence returns the fencing token: strictly greater than the token of every
// earlier holder of the key (see the package documentation for the
// precondition). It is 0 when the client was built WithoutFencing.
func (l *Lease) Fence() int64 { return l.fence }

// ValidUntil returns the local instant (with a monotonic clock reading) at
// which the lease's validity ends, as of the last successful acquire or
// extend. Work protected by the lease must be finished before it.
func (l *Lease) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

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
		ttl = l.req.TTL
	}
	if !l.c.noExtendTTL {
		// A longer TTL raises the restart guard and the fence expiry
		// before the round counts votes, as an Acquire with it would.
		l.c.noteTTL(ttl)
	}
	k := leaseKey(l.req.Key)
	spread := "0"
	if time.Now().Before(l.ValidUntil()) {
		spread = "1"
	}
	epoch := strconv.FormatInt(l.req.Epoch, 10)
	good, start, errs := l.c.simpleRound(ctx, "extend",
		func(int) call {
			return call{script: extendScript, keys: []string{k}, args: []any{l.value, ttl.Milliseconds(), epoch, spread}}
		}, l.c.quorum, isHeld, true, false)
	if good < l.c.quorum {
		reason := ErrNotHeld
		if errs != nil {
			reason = ErrNoQuorum
		}
		return fmt.Errorf("extend %s: %w (%d of %d needed)%s", l.req.Key, reason, good, l.c.quorum, nodeSuffix(errs))
	}
	v := l.c.validity(ttl, start)
	if v <= 0 {
		return fmt.Errorf("extend %s: %w: round took %s, no validity left", l.req.Key, ErrNoQuorum, time.Since(start))
	}
	l.mu.Lock()
	l.validUntil = start.Add(v)
	l.mu.Unlock()
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
	k := leaseKey(l.req.Key)
	l.expire()
	good, _, errs := l.c.simpleRound(ctx, "release",
		func(int) call { return call{script: releaseScript, keys: []string{k}, args: []any{l.value}} },
		l.c.quorum, func(any) bool { return true }, false, false)
	if good < l.c.quorum {
		return fmt.Errorf("release %s: %w%s", l.req.Key, ErrNoQuorum, nodeSuffix(errs))
	}
	return nil
}

// Complete marks the lease's epoch completed and releases it. It retries
// until a quorum of nodes stored the mark or ctx ends; from then on no
// acquisition of this epoch or an older one can succeed. A node marks the
// epoch when no newer holder took the key since this acquisition: the lock
// is ours, or gone (expired) with the fence counter not past our Fence. When
// so many nodes name a newer holder that no quorum can mark the epoch,
// Complete returns ErrNotHeld and the epoch stays open for that holder.
// Without an epoch it is Release. Call it only after the epoch's work has
// really finished.
func (l *Lease) Complete(ctx context.Context) error {
	if l.req.Epoch <= 0 {
		return l.Release(ctx)
	}
	l.expire()
	// First a round that only looks: when a newer holder is seen on enough
	// nodes, nothing is written — not even on the nodes its requests have
	// not reached yet.
	if _, newer, errs := l.completeRound(ctx, true); newer > len(l.c.nodes)-l.c.quorum {
		return l.newerHolder(newer, errs)
	}
	var last error
	for attempt := 0; ; attempt++ {
		good, newer, errs := l.completeRound(ctx, false)
		if good >= l.c.quorum {
			return nil
		}
		if newer > len(l.c.nodes)-l.c.quorum {
			return l.newerHolder(newer, errs)
		}
		last = fmt.Errorf("complete %s epoch %d: %w (%d of %d)%s", l.req.Key, l.req.Epoch, ErrNoQuorum, good, l.c.quorum, nodeSuffix(errs))
		t := time.NewTimer(jitter(min(10*time.Millisecond<<min(attempt, 6), time.Second)))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(last, ctx.Err())
		case <-t.C:
		}
	}
}

// completeRound runs complete.lua on every node. The marking round waits
// for every node up to the timeout: the more nodes carry the mark, the
// more node restarts it survives; the checkOnly round (which writes
// nothing) stops once its outcome is decided. It returns how many nodes
// marked the epoch (or would) and how many named a newer holder.
func (l *Lease) completeRound(ctx context.Context, checkOnly bool) (good, newer int, errs error) {
	k := leaseKey(l.req.Key)
	check := "0"
	if checkOnly {
		check = "1"
	}
	good, _, errs = l.c.simpleRound(ctx, "complete",
		func(int) call {
			return call{script: completeScript, keys: []string{k},
				args: []any{l.value, l.req.Epoch, strconv.FormatInt(l.fence, 10), check}}
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
		l.req.Key, l.req.Epoch, ErrNotHeld, newer, len(l.c.nodes), nodeSuffix(errs))
}

// expire marks the lease invalid locally (it is being given up).
func (l *Lease) expire() {
	l.mu.Lock()
	l.validUntil = time.Time{}
	l.mu.Unlock()
}
