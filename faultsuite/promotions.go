package faultsuite

import (
	"context"
	"sync"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/etcdtest"
)

// An etcd leader elected restarts the countdown of every lease
// (docs/reliability.md, clocks): the lease of a daemon that died is then
// held for an election timeout and a TTL from that moment, however long
// ago the daemon died. So on etcd the nemesis watches the raft term from
// its start to the test's end, and the liveness oracle stretches the
// takeover bound of a lost lease past every election seen while the lease
// was still held (heldUntil).

// promotionPoll is how often the term is read.
const promotionPoll = 100 * time.Millisecond

// promotion is an election seen: the term grew between the start of the
// read before (after) and the end of the read that saw it (by).
type promotion struct{ after, by time.Time }

// promotionWatch reads the store's term until its test ends.
type promotionWatch struct {
	mu   sync.Mutex
	seen []promotion
}

// watchPromotions starts reading f's store's term (etcd only; nil for
// other stores) until f's test ends.
func watchPromotions(f *Fleet) *promotionWatch {
	if f.Store == nil || f.Store.Term == nil {
		return nil
	}
	w := &promotionWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	f.t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		last, lastStart := f.Store.Term(), time.Now()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(promotionPoll):
			}
			start := time.Now()
			term := f.Store.Term()
			if term > last && last > 0 {
				w.mu.Lock()
				w.seen = append(w.seen, promotion{after: lastStart, by: time.Now()})
				w.mu.Unlock()
			}
			if term > 0 {
				last, lastStart = term, start
			}
		}
	}()
	return w
}

// heldUntil is the latest a lease whose daemon lost it at lost may still
// be held as far as the other hosts can tell: the takeover bound past
// the loss and, on etcd, an election timeout and the takeover bound past
// each election that may have come while the lease was held.
func (n *Nemesis) heldUntil(lost time.Time) time.Time {
	until := lost.Add(n.takeover())
	if n.promotions == nil {
		return until
	}
	n.promotions.mu.Lock()
	defer n.promotions.mu.Unlock()
	for _, p := range n.promotions.seen {
		if p.by.After(lost) && p.after.Before(until) {
			until = latest(until, p.by.Add(etcdtest.ElectionMS*time.Millisecond+n.takeover()))
		}
	}
	return until
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
