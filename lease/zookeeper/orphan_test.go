package zookeeper

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasecron/leasecron/internal/testkit/zktest"
	"github.com/leasecron/leasecron/lease"
)

// TestOrphansNeverFreeAHeldLock: with a request timeout of a couple of
// milliseconds, many acquisitions time out while their multi is still
// applied: their locks are orphans, removed by later attempts of the same
// session or by the late reply's own cleanup. Contenders on two sessions
// (two goroutines per session share it) take one key over and over; their
// tenures, cut at ValidUntil, must never overlap — an orphan removal that
// deleted a lock taken after the orphan was seen would let two hold it.
func TestOrphansNeverFreeAHeldLock(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 1)
	var bs []*Backend
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		b, err := Open(ctx, Config{Servers: e.Addrs(), Root: "/orphans", Timeout: 2 * time.Millisecond, SessionTimeout: 5 * time.Second})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		bs = append(bs, b)
	}
	type tenure struct {
		who        string
		start, end time.Time
	}
	var mu sync.Mutex
	var ts []tenure
	// At least 8 s and 20 tenures (a loaded machine answers few attempts
	// within 2 ms), at most a minute.
	from := time.Now()
	enough := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return time.Since(from) > 8*time.Second && len(ts) >= 20 || time.Since(from) > time.Minute
	}
	var wg sync.WaitGroup
	for g := range 6 {
		b := bs[g%2]
		wg.Go(func() {
			for n := 0; !enough(); n++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				l, err := b.Acquire(ctx, lease.Request{Key: "k", TTL: 5 * time.Second, Owner: fmt.Sprintf("g%d.%d", g, n)})
				cancel()
				if err != nil {
					continue
				}
				tn := tenure{who: l.Owner(), start: time.Now()}
				time.Sleep(time.Millisecond)
				tn.end = time.Now()
				if vu := l.ValidUntil(); vu.Before(tn.end) {
					tn.end = vu
				}
				mu.Lock()
				ts = append(ts, tn)
				mu.Unlock()
				rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
				_ = l.Release(rctx)
				rcancel()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(ts, func(a, b tenure) int { return a.start.Compare(b.start) })
	if len(ts) < 20 {
		t.Fatalf("only %d tenures in %s: the test did not exercise the key", len(ts), time.Since(from).Round(time.Second))
	}
	for i := 1; i < len(ts); i++ {
		if ts[i].start.Before(ts[i-1].end) {
			t.Errorf("%s held from %s while %s held until %s", ts[i].who, ts[i].start.Format("15:04:05.000000"),
				ts[i-1].who, ts[i-1].end.Format("15:04:05.000000"))
		}
	}
	t.Logf("%d tenures", len(ts))
}

// TestOrphanRemovalSparesALaterLock is the orphan race made certain: a
// lock of this session with an unknown token (a create whose reply was
// lost) is found by an attempt; before that attempt deletes it, the orphan
// goes and another acquisition of the same session takes the key. The
// orphan's deletion must fail (it is checked against the done version read
// before the lock) and leave the new holder's lock alone.
func TestOrphanRemovalSparesALaterLock(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 1)
	b := open(t, e.Addrs(), 5*time.Second)
	ctx := ctxT(t, 30*time.Second)
	// The key exists; an orphan lock (this session's, a token nobody
	// holds) sits on it.
	first, err := b.Acquire(ctx, lease.Request{Key: "k", TTL: 5 * time.Second, Owner: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p := b.paths("k")
	// Made as an acquisition makes it: created, then written (version 1).
	orphan := []byte("orphantoken lost-reply")
	if _, err := b.conn.Create(p.lock, orphan, zk.FlagEphemeral, b.acl()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.conn.Set(p.lock, orphan, 0); err != nil {
		t.Fatal(err)
	}
	var later lease.Lease
	setHeldByHook(b, func() {
		setHeldByHook(b, nil)
		if err := b.conn.Delete(p.lock, -1); err != nil {
			t.Error(err)
		}
		var err error
		later, err = b.Acquire(ctx, lease.Request{Key: "k", TTL: 5 * time.Second, Owner: "later"})
		if err != nil {
			t.Error(err)
		}
	})
	res := b.TryAcquireBatch(ctx, []lease.Request{{Key: "k", TTL: 5 * time.Second, Owner: "finder"}})
	if later == nil {
		t.Fatal("the hook did not run: no orphan was found")
	}
	if res[0].Err == nil && res[0].Lease.Owner() == "finder" {
		t.Fatalf("the finder got the key while %q held it", later.Owner())
	}
	info, err := b.Inspect(ctx, "k")
	if err != nil || info.Holder != "later" {
		t.Fatalf("after the orphan's removal the key's holder is %q (%v), want later: its lock was deleted", info.Holder, err)
	}
	if err := later.Extend(ctx, 0); err != nil {
		t.Errorf("the later holder lost its lock: %v", err)
	}
}
