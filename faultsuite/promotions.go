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
// ago the daemon died. So on etcd the nemesis watches the members' raft
// terms from its start to the test's end, and the liveness oracle
// stretches the takeover bound of a lost lease past every election seen
// while the lease was held (heldUntil).

// promotionPoll is the pause between two reads of the terms.
const promotionPoll = 100 * time.Millisecond

// promotion is an election won: no earlier than after, no later than by.
type promotion struct{ after, by time.Time }

// promotionWatch reads the store's terms until its test ends.
type promotionWatch struct {
	mu   sync.Mutex
	seen []promotion
}

// quorumRead is a read of the terms that a quorum of members answered:
// when it began, and the highest term they reported.
type quorumRead struct {
	start   time.Time
	highest uint64
}

// watchPromotions starts reading f's store's terms (etcd only; nil for
// other stores) until f's test ends. A leader at a term above the last
// one seen is an election won: by the end of the read that showed it,
// and after the start of the last read a quorum answered with lower
// terms (a winner needs the votes of a quorum, and any two quorums
// share a member, which had not voted when it answered). A candidate
// that never wins raises terms but no leader's.
func watchPromotions(f *Fleet) *promotionWatch {
	if f.Store == nil || f.Store.ReadTerms == nil {
		return nil
	}
	w := &promotionWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	f.t.Cleanup(func() { cancel(); <-done })
	quorum := len(f.Store.Servers)/2 + 1
	go func() {
		defer close(done)
		began := time.Now()
		var led uint64
		var reads []quorumRead
		for ctx.Err() == nil {
			start := time.Now()
			t := f.Store.ReadTerms()
			by := time.Now()
			if t.Answered >= quorum {
				reads = append(reads, quorumRead{start: start, highest: t.Highest})
				if len(reads) > 300 { // 30 s and more: longer than any fault
					reads = reads[len(reads)-300:]
				}
			}
			if t.Led > led {
				if led > 0 {
					after := began
					for _, r := range reads {
						if r.highest < t.Led && r.start.After(after) {
							after = r.start
						}
					}
					w.mu.Lock()
					w.seen = append(w.seen, promotion{after: after, by: by})
					w.mu.Unlock()
				}
				led = t.Led
			}
			select {
			case <-ctx.Done():
			case <-time.After(promotionPoll):
			}
		}
	}()
	return w
}

// heldUntil is the latest a lease whose daemon lost it at lost may still
// be held as far as the other hosts can tell: the takeover bound past
// the loss and, on etcd, an election timeout and the takeover bound past
// each election that may have come while the lease was held (the new
// leader's sweep of expired leases and their revocation fall in the
// bound's recheck and request timeout, as after a loss).
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
