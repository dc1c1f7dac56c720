package redlock

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// After a lost attempt on a key, the next attempt on that key from the same
// Client waits twice, like the random retry delay of the Redlock description:
//
//  1. until the cleanup release of the lost attempt was answered by every
//     node it went to (at most the timeout of that cleanup), so that the
//     nodes it held are free before it asks again. Without this wait the
//     next attempt travels in the same pipelined round as the cleanup, each
//     node goes straight back to the client that held it, and contending
//     clients can keep one node each forever (a livelock: nobody reaches a
//     quorum);
//  2. until a random moment within lostJitter × the lost attempt's duration
//     (at most the per-node timeout) after it ended, so that contending
//     clients stop asking in lock step.
//
// The waits apply to Acquire's own retries and to the caller's next Acquire
// or TryAcquireBatch of the key alike; a caller that comes back later than
// that does not wait at all.

// lostJitter bounds the random delay after a lost attempt, as a multiple of
// the attempt's duration.
const lostJitter = 4

// cleanup is the release sent after a lost attempt (one per attempt, shared
// by all keys of a batch).
type cleanup struct {
	done     chan struct{} // closed when every node it was sent to answered
	pending  atomic.Int32  // nodes still to answer
	deadline time.Time     // stop waiting for it then
}

func newCleanup(nodes int, timeout time.Duration) *cleanup {
	cl := &cleanup{done: make(chan struct{}), deadline: time.Now().Add(timeout)}
	cl.pending.Store(int32(nodes))
	if nodes == 0 {
		close(cl.done)
	}
	return cl
}

// answered records one node's answer (or a node it could not be sent to).
func (cl *cleanup) answered() {
	if cl.pending.Add(-1) == 0 {
		close(cl.done)
	}
}

// over reports whether nobody needs to wait for cl any more.
func (cl *cleanup) over(now time.Time) bool {
	select {
	case <-cl.done:
		return true
	default:
		return !now.Before(cl.deadline)
	}
}

// wait blocks until cl is answered, its deadline passed or ctx ended.
func (cl *cleanup) wait(ctx context.Context) {
	d := time.Until(cl.deadline)
	if d <= 0 {
		return
	}
	select {
	case <-cl.done:
		return
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-cl.done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// lostKey is what the next attempt on a key has to wait for.
type lostKey struct {
	cl        *cleanup
	notBefore time.Time
}

// lostKeys remembers the lost attempts of one Client, by key.
type lostKeys struct {
	mu    sync.Mutex
	m     map[string]lostKey
	sweep int // sweep finished entries when len(m) reaches this
}

// remember records that the attempts on keys ended lost at end after
// taking took, with their cleanup cl.
func (lk *lostKeys) remember(keys []string, cl *cleanup, end time.Time, took, maxJitter time.Duration) {
	span := min(lostJitter*took, maxJitter)
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.m == nil {
		lk.m = make(map[string]lostKey, len(keys))
	}
	if len(lk.m) >= lk.sweep {
		for k, e := range lk.m {
			if e.cl.over(end) && !end.Before(e.notBefore) {
				delete(lk.m, k)
			}
		}
		lk.sweep = max(1024, 2*len(lk.m), len(keys))
	}
	for _, k := range keys {
		nb := end
		if span > 0 {
			nb = end.Add(time.Duration(rand.Int64N(int64(span))))
		}
		lk.m[k] = lostKey{cl: cl, notBefore: nb}
	}
}

// wait blocks until the earlier lost attempts on keys allow a new one
// (see above), or ctx ends; it forgets them.
func (lk *lostKeys) wait(ctx context.Context, keys func(yield func(string) bool)) {
	lk.mu.Lock()
	if len(lk.m) == 0 {
		lk.mu.Unlock()
		return
	}
	var until time.Time
	var cls []*cleanup
	for k := range keys {
		e, ok := lk.m[k]
		if !ok {
			continue
		}
		delete(lk.m, k)
		if e.notBefore.After(until) {
			until = e.notBefore
		}
		if n := len(cls); n == 0 || cls[n-1] != e.cl {
			cls = append(cls, e.cl)
		}
	}
	lk.mu.Unlock()
	for _, cl := range cls {
		cl.wait(ctx)
	}
	if d := time.Until(until); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}
