package etcd_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/etcdtest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/etcd"
	"github.com/leasecron/leasecron/lease/leasetest"
)

// TestFrozenMemberLeftOut SIGSTOPs one member (not the leader: the
// cluster keeps its leader and quorum) for three TTLs while three clients
// take a fresh key after another: each must take one at least once per
// TTL — the member that fails a probe is taken out of the clients'
// endpoints, so their balancer stops sending it requests.
func TestFrozenMemberLeftOut(t *testing.T) {
	t.Parallel()
	for i, g := range frozenMemberScenario(t, nil) {
		if g > conformanceTTL {
			t.Errorf("client %d: no key taken for %s of the freeze (bound: the TTL, %s)", i, g.Round(time.Millisecond), conformanceTTL)
		}
	}
}

// TestNegativeControlFrozenMemberKept: clients that keep the frozen member
// among their endpoints send it every third request, each of which waits
// its whole timeout; an acquisition (a grant and a transaction) fails
// more often than not, and the check above sees a client stalled past the
// TTL.
func TestNegativeControlFrozenMemberKept(t *testing.T) {
	t.Parallel()
	worst := time.Duration(0)
	for _, g := range frozenMemberScenario(t, etcd.SetUnsafeKeepFrozen) {
		worst = max(worst, g)
	}
	if worst <= conformanceTTL {
		t.Errorf("the check found no stall: longest gap %s, within the TTL %s", worst.Round(time.Millisecond), conformanceTTL)
	}
}

// frozenMemberScenario freezes a follower for three TTLs and returns,
// per client (opened with setup, if not nil), the longest stretch of the
// freeze without a key taken.
func frozenMemberScenario(t *testing.T, setup func(*etcd.Backend)) []time.Duration {
	c := etcdtest.Start(t)
	prefix := "/t/" + filepath.Base(t.TempDir()) + "/"
	const clients = 3
	var bs []*etcd.Backend
	for i := range clients {
		b := openT(t, c.Endpoints(), prefix, conformanceTimeout)
		if setup != nil {
			setup(b)
		}
		bs = append(bs, b)
		l, err := b.Acquire(ctxT(t, 20*time.Second), lease.Request{Key: fmt.Sprint("held-", i), TTL: conformanceTTL, Owner: "holder"})
		if err != nil {
			t.Fatal(err)
		}
		h := lease.NewHold(l, b.Timeout())
		t.Cleanup(func() { _ = h.Release(context.Background()) })
	}
	frozen := (c.Leader() + 1) % etcdtest.Members
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	wins := make([][]time.Time, clients)
	errs := make([]error, clients)
	for i, b := range bs {
		wg.Go(func() {
			wins[i], errs[i] = leasetest.TakeFresh(ctx, b, fmt.Sprint("fresh-", i), conformanceTTL)
		})
	}
	c.Pause(frozen)
	t.Cleanup(func() { c.Resume(frozen) })
	from := time.Now()
	time.Sleep(3 * conformanceTTL) // the freeze: the clients work meanwhile
	to := time.Now()
	c.Resume(frozen)
	stop()
	wg.Wait()
	gaps := make([]time.Duration, clients)
	for i, ws := range wins {
		gaps[i] = leasetest.LongestGap(ws, from, to)
		t.Logf("client %d: %d keys taken while member %d was frozen, longest gap %s; last refusal: %v",
			i, len(ws), frozen, gaps[i].Round(time.Millisecond), errs[i])
	}
	return gaps
}
