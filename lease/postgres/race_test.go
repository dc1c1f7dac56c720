package postgres_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/postgres"
)

// TestContendingBatches: clients fire overlapping batches, their keys in
// random order, at the same keys. Per key, the leases ordered by fence
// have disjoint validity windows (from the grant's return to the release
// or ValidUntil), fences never repeat, and no batch fails (no deadlock:
// every batch locks rows in key order).
func TestContendingBatches(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t)
	const clients, rounds, nkeys = 4, 30, 6
	type window struct {
		fence      int64
		start, end time.Time
	}
	var mu sync.Mutex
	windows := map[string][]window{}
	var failures []error
	var wg sync.WaitGroup
	for c := range clients {
		b := open(t, s.URL(), postgres.WithTimeout(5*time.Second))
		wg.Go(func() {
			for r := range rounds {
				var reqs []lease.Request
				for _, k := range rand.Perm(nkeys)[:1+rand.IntN(nkeys)] {
					reqs = append(reqs, lease.Request{Key: fmt.Sprintf("k%d", k), TTL: 2 * time.Second, Owner: fmt.Sprintf("c%d r%d", c, r)})
				}
				for _, res := range b.TryAcquireBatch(ctxT(t), reqs) {
					if res.Err != nil {
						if !errors.Is(res.Err, lease.ErrHeld) {
							mu.Lock()
							failures = append(failures, res.Err)
							mu.Unlock()
						}
						continue
					}
					w := window{fence: res.Lease.Fence(), start: time.Now()}
					time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
					w.end = time.Now()
					if vu := res.Lease.ValidUntil(); vu.Before(w.end) {
						w.end = vu
					}
					if err := res.Lease.Release(ctxT(t)); err != nil {
						mu.Lock()
						failures = append(failures, err)
						mu.Unlock()
					}
					mu.Lock()
					windows[res.Lease.Key()] = append(windows[res.Lease.Key()], w)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d failures, first: %v", len(failures), failures[0])
	}
	grants := 0
	for k, ws := range windows {
		slices.SortFunc(ws, func(a, b window) int { return int(a.fence - b.fence) })
		for i := 1; i < len(ws); i++ {
			if ws[i].fence == ws[i-1].fence {
				t.Fatalf("%s: fence %d handed out twice", k, ws[i].fence)
			}
			if ws[i].start.Before(ws[i-1].end) {
				t.Fatalf("MUTUAL EXCLUSION VIOLATED on %s: fence %d started %s before fence %d ended", k, ws[i].fence, ws[i-1].end.Sub(ws[i].start), ws[i-1].fence)
			}
		}
		grants += len(ws)
	}
	t.Logf("%d grants over %d keys", grants, len(windows))
	if grants < nkeys {
		t.Fatalf("only %d grants", grants)
	}
}
