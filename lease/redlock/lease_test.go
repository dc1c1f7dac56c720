package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

var sizes = []int{1, 3, 5}

func TestAcquireReleaseExtend(t *testing.T) {
	t.Parallel()
	for _, n := range sizes {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			t.Parallel()
			cl := start(t, n)
			c := votingClient(t, cl.URLs())
			if got, want := c.Quorum(), n/2+1; got != want {
				t.Errorf("Quorum() = %d, want %d", got, want)
			}
			k := key(t)
			ttl := 5 * time.Second
			drift := time.Duration(float64(ttl)*redlock.DefaultDrift) + 2*time.Millisecond
			before := time.Now()
			l := mustAcquire(t, c, lease.Request{Key: k, TTL: ttl, Owner: "host=a"})
			after := time.Now()
			if l.Key() != k || l.Owner() != "host=a" || l.TTL() != ttl || l.Epoch() != 0 || l.Token() == "" {
				t.Errorf("lease fields: key=%q owner=%q ttl=%s epoch=%d token=%q", l.Key(), l.Owner(), l.TTL(), l.Epoch(), l.Token())
			}
			if l.Fence() <= 0 {
				t.Errorf("Fence() = %d, want > 0", l.Fence())
			}
			checkValidity(t, l.ValidUntil(), before, after, ttl, drift)
			// At least a quorum holds the lock key (a node whose lane lags
			// may get the request late, or not at all: a request not yet
			// sent when the outcome is decided is dropped).
			holding := 0
			for i, node := range cl.Nodes {
				switch got := lockKeys(t, node); {
				case slices.Equal(got, []string{leaseHash(k)}):
					holding++
				case len(got) > 0:
					t.Errorf("node %d lock keys = %v", i, got)
				}
			}
			if holding < c.Quorum() {
				t.Errorf("lock on %d nodes, quorum %d", holding, c.Quorum())
			}

			// A second acquisition of a held key is refused, also for the
			// same caller (every Acquire uses a fresh token).
			_, err := c.Acquire(context.Background(), lease.Request{Key: k, TTL: ttl, Owner: "host=b"})
			re := refused(t, err, lease.ErrHeld)
			if re.Holder != "host=a" {
				t.Errorf("Holder = %q, want host=a", re.Holder)
			}
			if re.HolderTTL <= ttl-2*time.Second || re.HolderTTL > ttl {
				t.Errorf("HolderTTL = %s, want about %s", re.HolderTTL, ttl)
			}
			if re.HolderNodes < c.Quorum() {
				t.Errorf("HolderNodes = %d, want at least the quorum %d: host=a holds the lease on a quorum", re.HolderNodes, c.Quorum())
			}
			if re.Key != k {
				t.Errorf("RefusedError.Key = %q", re.Key)
			}
			if !strings.Contains(err.Error(), `"host=a"`) {
				t.Errorf("error %q does not name the holder", err)
			}

			// Extend counts validity from its own start.
			before = time.Now()
			if err := l.Extend(context.Background(), 0); err != nil {
				t.Fatalf("Extend: %v", err)
			}
			checkValidity(t, l.ValidUntil(), before, time.Now(), ttl, drift)
			if err := l.Extend(context.Background(), 10*time.Second); err != nil {
				t.Fatalf("Extend(10s): %v", err)
			}
			if d := time.Until(l.ValidUntil()); d <= 8*time.Second {
				t.Errorf("after Extend(10s) validity left %s", d)
			}

			if err := l.Release(context.Background()); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if !l.ValidUntil().IsZero() {
				t.Errorf("ValidUntil after Release = %s, want zero", l.ValidUntil())
			}
			// Extend after release: not held.
			if err := l.Extend(context.Background(), 0); !errors.Is(err, lease.ErrNotHeld) {
				t.Errorf("Extend after Release = %v, want ErrNotHeld", err)
			}
			// Releasing twice is harmless.
			if err := l.Release(context.Background()); err != nil {
				t.Errorf("second Release: %v", err)
			}
			l2 := mustAcquire(t, c, lease.Request{Key: k, TTL: ttl, Owner: "host=b"})
			if l2.Fence() <= l.Fence() {
				t.Errorf("fence %d after %d", l2.Fence(), l.Fence())
			}
			if err := l2.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i, node := range cl.Nodes {
				if !waitFor(2*time.Second, func() bool { return len(lockKeys(t, node)) == 0 }) {
					t.Errorf("node %d still has %v", i, lockKeys(t, node))
				}
			}
		})
	}
}

// checkValidity asserts the Redlock validity formula for a round that ran
// between before and after: validUntil = start + ttl - elapsed - drift with
// before <= start <= end of round <= after.
func checkValidity(t *testing.T, validUntil, before, after time.Time, ttl, drift time.Duration) {
	t.Helper()
	hi := after.Add(ttl - drift)
	lo := before.Add(ttl - drift - after.Sub(before))
	if validUntil.After(hi) || validUntil.Before(lo) {
		t.Errorf("ValidUntil %s outside [%s, %s]", validUntil.Format(time.StampMicro), lo.Format(time.StampMicro), hi.Format(time.StampMicro))
	}
}

func TestLeaseExpires(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs())
	k := key(t)
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: time.Second, Owner: "a"})
	time.Sleep(time.Until(l.ValidUntil()) + 50*time.Millisecond)
	if !waitFor(2*time.Second, func() bool {
		_, err := c.Acquire(context.Background(), lease.Request{Key: k, TTL: time.Second, Owner: "b"})
		return err == nil
	}) {
		t.Fatal("lease did not expire")
	}
	if err := l.Extend(context.Background(), 0); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Extend of an expired, taken-over lease = %v, want ErrNotHeld", err)
	}
}

func TestRequestValidation(t *testing.T) {
	t.Parallel()
	cl := start(t, 1)
	c := votingClient(t, cl.URLs())
	for _, req := range []lease.Request{
		{Key: "", TTL: time.Second},
		{Key: "a{b}", TTL: time.Second},
		{Key: "ok", TTL: 0},
	} {
		if _, err := c.Acquire(context.Background(), req); err == nil {
			t.Errorf("Acquire(%+v) succeeded", req)
		}
	}
	if err := c.SetNote(context.Background(), "x}", 1, "n"); err == nil {
		t.Error("SetNote with a brace succeeded")
	}
	if _, err := c.Inspect(context.Background(), ""); err == nil {
		t.Error("Inspect of an empty key succeeded")
	}
}

func TestClosedClient(t *testing.T) {
	t.Parallel()
	cl := start(t, 1)
	c, err := redlock.New(cl.URLs(), redlock.WithRestartGuard(testGuard))
	if err != nil {
		t.Fatal(err)
	}
	waitVoting(t, c, nil)
	l := mustAcquire(t, c, lease.Request{Key: key(t), TTL: time.Second})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Acquire(context.Background(), lease.Request{Key: key(t, "2"), TTL: time.Second}); !errors.Is(err, lease.ErrClosed) {
		t.Errorf("Acquire on closed client = %v, want ErrClosed", err)
	}
	if err := l.Extend(context.Background(), 0); err == nil {
		t.Error("Extend on closed client succeeded")
	}
	if err := l.Release(context.Background()); err == nil {
		t.Error("Release on closed client succeeded")
	}
}

func TestRefusalNoQuorum(t *testing.T) {
	t.Parallel()
	for _, n := range sizes {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			t.Parallel()
			cl := start(t, n)
			c := votingClient(t, cl.URLs())
			k := key(t)
			// Minority killed: still works.
			minority := (n - 1) / 2
			for i := 0; i < minority; i++ {
				cl.Nodes[i].Kill()
			}
			l, err := c.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: k, TTL: 5 * time.Second})
			if err != nil {
				t.Fatalf("with %d of %d nodes killed: %v", minority, n, err)
			}
			if err := l.Extend(context.Background(), 0); err != nil {
				t.Fatalf("Extend with a minority down: %v", err)
			}
			if err := l.Release(context.Background()); err != nil {
				t.Fatalf("Release with a minority down: %v", err)
			}
			// Majority killed: ErrNoQuorum naming the dead nodes.
			var dead []string
			for i := 0; i < n/2+1; i++ {
				if i >= minority {
					cl.Nodes[i].Kill()
				}
				dead = append(dead, c.Servers()[i])
			}
			slices.Sort(dead)
			_, err = c.Acquire(context.Background(), lease.Request{Key: k, TTL: 5 * time.Second})
			re := refused(t, err, lease.ErrNoQuorum)
			names := nodeErrorNames(re.NodeErrs)
			for _, d := range dead {
				if !slices.Contains(names, d) {
					t.Errorf("node errors %v do not name dead node %s (err: %v)", names, d, err)
				}
				if !strings.Contains(err.Error(), d) {
					t.Errorf("error text does not name %s: %v", d, err)
				}
			}
			var ne *lease.NodeError
			if !errors.As(err, &ne) || ne.Node == "" || ne.Err == nil {
				t.Errorf("errors.As(*NodeError) = %+v", ne)
			}
			for _, alive := range c.Servers()[n/2+1:] {
				if slices.Contains(names, alive) {
					t.Errorf("live node %s reported as failed: %v", alive, err)
				}
			}
		})
	}
}

// TestRefusalSplitVote: the votes of 3 nodes are split between two
// holders (each got one node) and a third contender gets the last one.
// Its refusal names the holder with the most nodes and says it has fewer
// than a quorum, which is how a caller tells a split (retry soon) from a
// lease that is really held (wait HolderTTL).
func TestRefusalSplitVote(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	urls := cl.URLs()
	k := key(t)
	req := func(owner string) []lease.Request {
		return []lease.Request{{Key: k, TTL: 10 * time.Second, Owner: owner}}
	}
	// A client on one node has a quorum of 1: each takes its node.
	for i, owner := range []string{"host=x", "host=y"} {
		one := votingClient(t, urls[i:i+1])
		if res := one.TryAcquireBatch(context.Background(), req(owner)); res[0].Err != nil {
			t.Fatalf("%s on node %d: %v", owner, i, res[0].Err)
		}
	}
	c := votingClient(t, urls)
	res := c.TryAcquireBatch(context.Background(), req("host=z"))
	re := refused(t, res[0].Err, lease.ErrHeld)
	if re.Holder != "host=x" && re.Holder != "host=y" {
		t.Errorf("Holder = %q, want host=x or host=y", re.Holder)
	}
	if re.HolderNodes != 1 {
		t.Errorf("HolderNodes = %d, want 1 (the votes split: nobody holds a quorum of %d)", re.HolderNodes, c.Quorum())
	}
	// The lost attempt cleans up on the node it won: only x and y remain.
	if !waitFor(5*time.Second, func() bool { return len(lockKeys(t, cl.Nodes[2])) == 0 }) {
		t.Errorf("node 2 still holds %v after the lost attempt", lockKeys(t, cl.Nodes[2]))
	}
}

// TestContention runs 32 goroutines that take turns on one key. An
// in-process recorder of [Acquire returned, min(Release called,
// ValidUntil)] intervals asserts that no two holders overlap.
func TestContention(t *testing.T) {
	t.Parallel()
	for _, n := range sizes {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			t.Parallel()
			cl := start(t, n)
			const workers, rounds = 32, 3
			c := votingClient(t, cl.URLs(), redlock.WithRetry(redlock.LinearBackoff(15*time.Millisecond)))
			k := key(t)
			var rec recorder
			ctx := ctxT(t, 60*time.Second)
			var wg sync.WaitGroup
			errs := make(chan error, workers*rounds)
			var mu sync.Mutex
			wins := map[string]int{}
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					who := fmt.Sprintf("w%02d", w)
					for range rounds {
						l, err := c.Acquire(ctx, lease.Request{Key: k, TTL: 10 * time.Second, Owner: who})
						if err != nil {
							errs <- fmt.Errorf("%s: %w", who, err)
							return
						}
						got := time.Now()
						time.Sleep(time.Millisecond)
						rel := time.Now()
						end := rel
						if vu := l.ValidUntil(); vu.Before(rel) {
							end = vu
							errs <- fmt.Errorf("%s: validity ended while holding", who)
						}
						rec.add(who, got, end)
						if err := l.Release(ctx); err != nil {
							errs <- fmt.Errorf("%s release: %w", who, err)
						}
						mu.Lock()
						wins[who]++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			checkHolders(t, errs, &rec)
			total := 0
			for _, v := range wins {
				total += v
			}
			if total != workers*rounds || len(wins) != workers {
				t.Errorf("wins = %d by %d workers, want %d by %d", total, len(wins), workers*rounds, workers)
			}
			t.Logf("%d intervals, no overlap", rec.len())
		})
	}
}

// TestContentionProgress: independent clients (one connection per node
// each) that loop on one key with single attempts, releasing at once when
// they win, all make progress. Before a lost attempt's cleanup was awaited,
// each node could go straight back to the client that held it and nobody
// reached a quorum again (a livelock: 0 wins).
func TestContentionProgress(t *testing.T) {
	t.Parallel()
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			t.Parallel()
			cl := start(t, n)
			const clients, winsEach = 8, 3
			cs := make([]*redlock.Client, clients)
			for i := range cs {
				cs[i] = votingClient(t, cl.URLs())
			}
			k := key(t)
			ctx := ctxT(t, 60*time.Second)
			var rec recorder
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			for i, c := range cs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					who := fmt.Sprintf("c%02d", i)
					for won := 0; won < winsEach; {
						l, err := c.Acquire(ctx, lease.Request{Key: k, TTL: 10 * time.Second, Owner: who})
						if ctx.Err() != nil {
							errs <- fmt.Errorf("%s won %d of %d times before the deadline", who, won, winsEach)
							return
						}
						if err != nil {
							if !errors.Is(err, lease.ErrNotObtained) {
								errs <- fmt.Errorf("%s: %w", who, err)
								return
							}
							continue
						}
						got := time.Now()
						time.Sleep(100 * time.Microsecond)
						end := time.Now()
						if vu := l.ValidUntil(); vu.Before(end) {
							end = vu
						}
						rec.add(who, got, end)
						if err := l.Release(ctx); err != nil {
							errs <- fmt.Errorf("%s release: %w", who, err)
							return
						}
						won++
					}
				}()
			}
			wg.Wait()
			checkHolders(t, errs, &rec)
		})
	}
}

// TestSameOwnerTokenIsFresh: two clients with the same Owner text are
// still different holders.
func TestSameOwnerTokenIsFresh(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs())
	k := key(t)
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: 5 * time.Second, Owner: "same"})
	defer l.Release(context.Background())
	_, err := c.Acquire(context.Background(), lease.Request{Key: k, TTL: 5 * time.Second, Owner: "same"})
	refused(t, err, lease.ErrHeld)
}

func TestAcquireRetryUntilFree(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs(), redlock.WithRetry(redlock.LinearBackoff(20*time.Millisecond)))
	k := key(t)
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: time.Second, Owner: "a"})
	validUntil := l.ValidUntil()
	l2, err := c.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: k, TTL: time.Second, Owner: "b"})
	if err != nil {
		t.Fatalf("retrying Acquire: %v", err)
	}
	if now := time.Now(); now.Before(validUntil) {
		t.Fatalf("second holder got the lease %s before the first one's validity ended", validUntil.Sub(now))
	}
	_ = l2.Release(context.Background())

	// Limited retries give up with the refusal; a cancelled context adds
	// ctx.Err().
	l3 := mustAcquire(t, c, lease.Request{Key: k, TTL: 5 * time.Second, Owner: "c"})
	defer l3.Release(context.Background())
	lim := newClient(t, cl.URLs(), redlock.WithRestartGuard(testGuard), redlock.WithTimeout(testTimeout), redlock.WithRetry(redlock.LimitRetry(redlock.LinearBackoff(5*time.Millisecond), 2)))
	waitVoting(t, lim, nil)
	_, err = lim.Acquire(context.Background(), lease.Request{Key: k, TTL: time.Second})
	refused(t, err, lease.ErrHeld)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Acquire(ctx, lease.Request{Key: k, TTL: time.Second})
	if !errors.Is(err, lease.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire with expired ctx = %v, want it to match context.DeadlineExceeded", err)
	}
}

func TestTryAcquireBatch(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	a := votingClient(t, cl.URLs())
	b := votingClient(t, cl.URLs())
	var reqs []lease.Request
	for i := range 100 {
		reqs = append(reqs, lease.Request{Key: key(t, fmt.Sprint(i)), TTL: 10 * time.Second, Owner: "a"})
	}
	res := a.TryAcquireBatch(ctxT(t, 10*time.Second), reqs)
	if len(res) != 100 {
		t.Fatalf("%d results", len(res))
	}
	fences := map[int64]bool{}
	for i, r := range res {
		if r.Err != nil || r.Lease == nil {
			t.Fatalf("key %d: %v", i, r.Err)
		}
		if r.Lease.Key() != reqs[i].Key {
			t.Errorf("result %d is for %s", i, r.Lease.Key())
		}
		fences[r.Lease.Fence()] = true
	}
	for _, r := range res {
		if err := r.Lease.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// b holds the even keys; a's batch gets exactly the odd ones.
	var breqs []lease.Request
	for i := 0; i < 100; i += 2 {
		breqs = append(breqs, lease.Request{Key: reqs[i].Key, TTL: 10 * time.Second, Owner: "b"})
	}
	for i, r := range b.TryAcquireBatch(context.Background(), breqs) {
		if r.Err != nil {
			t.Fatalf("b key %d: %v", i, r.Err)
		}
		defer r.Lease.Release(context.Background())
	}
	res = a.TryAcquireBatch(context.Background(), reqs)
	for i, r := range res {
		if i%2 == 0 {
			if r.Err == nil {
				t.Errorf("key %d held by b was granted to a", i)
				continue
			}
			re := refused(t, r.Err, lease.ErrHeld)
			if re.Holder != "b" || re.Key != reqs[i].Key {
				t.Errorf("key %d: holder %q key %q", i, re.Holder, re.Key)
			}
		} else if r.Err != nil {
			t.Errorf("free key %d refused: %v", i, r.Err)
		} else {
			defer r.Lease.Release(context.Background())
		}
	}
	// Invalid requests fail alone.
	mixed := a.TryAcquireBatch(context.Background(), []lease.Request{{Key: "bad{", TTL: time.Second}, {Key: key(t, "ok"), TTL: time.Second}})
	if mixed[0].Err == nil || mixed[1].Err != nil {
		t.Errorf("mixed batch: %v / %v", mixed[0].Err, mixed[1].Err)
	}
	if mixed[1].Lease != nil {
		_ = mixed[1].Lease.Release(context.Background())
	}
}

func TestSetNoteInspect(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs())
	k := key(t)
	info, err := c.Inspect(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if info.Holder != "" || info.HolderNodes != 0 || info.NoteVersion != -1 || info.Note != "" || info.Answered != 3 || info.TTL != 0 {
		t.Errorf("empty key: %+v", info)
	}
	if err := c.SetNote(context.Background(), k, 5, "run 5: ok"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetNote(context.Background(), k, 3, "run 3: stale"); err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: 5 * time.Second, Owner: "host=a tick=7", Epoch: 7})
	info, err = c.Inspect(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if info.Note != "run 5: ok" || info.NoteVersion != 5 {
		t.Errorf("note = %q v%d, want the newest (v5)", info.Note, info.NoteVersion)
	}
	if info.Holder != "host=a tick=7" || info.HolderNodes < c.Quorum() {
		t.Errorf("holder = %q on %d nodes", info.Holder, info.HolderNodes)
	}
	if info.TTL <= 3*time.Second || info.TTL > 5*time.Second {
		t.Errorf("TTL = %s", info.TTL)
	}
	if info.Fence != l.Fence() {
		t.Errorf("Fence = %d, lease has %d", info.Fence, l.Fence())
	}
	if err := l.Complete(context.Background()); err != nil {
		t.Fatal(err)
	}
	info, err = c.Inspect(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if info.DoneEpoch != 7 || info.Holder != "" {
		t.Errorf("after Complete: %+v", info)
	}
	// With a majority down Inspect fails but still reports what it saw.
	cl.Nodes[0].Kill()
	cl.Nodes[1].Kill()
	info, err = c.Inspect(context.Background(), k)
	if !errors.Is(err, lease.ErrNoQuorum) || info.Answered != 1 || info.NodeErrs == nil {
		t.Errorf("Inspect with 2 of 3 down: %+v, %v", info, err)
	}
	if err := c.SetNote(context.Background(), k, 9, "x"); !errors.Is(err, lease.ErrNoQuorum) {
		t.Errorf("SetNote with 2 of 3 down: %v", err)
	}
}

func TestObserver(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	var mu sync.Mutex
	votes := map[string]map[redlock.Vote]int{}
	nodes := map[string]bool{}
	var renews []redlock.RenewEvent
	var restarts []string
	ob := redlock.Observer{
		OnVote: func(e redlock.VoteEvent) {
			mu.Lock()
			defer mu.Unlock()
			if votes[e.Op] == nil {
				votes[e.Op] = map[redlock.Vote]int{}
			}
			votes[e.Op][e.Vote]++
			nodes[e.Node] = true
			if e.Latency < 0 {
				panic("negative latency")
			}
		},
		OnRenew: func(e redlock.RenewEvent) {
			mu.Lock()
			defer mu.Unlock()
			renews = append(renews, e)
		},
		OnRestart: func(node string, at time.Time) {
			mu.Lock()
			defer mu.Unlock()
			restarts = append(restarts, node)
		},
	}
	c := votingClient(t, cl.URLs(), redlock.WithObserver(ob))
	k := key(t)
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: 5 * time.Second, Owner: "a"})
	_, err := c.Acquire(context.Background(), lease.Request{Key: k, TTL: 5 * time.Second, Owner: "b"})
	refused(t, err, lease.ErrHeld)
	h := c.Hold(l, lease.RenewEvery(50*time.Millisecond))
	waitFor(5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(renews) >= 2 })
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A restart is reported.
	cl.Nodes[2].Restart()
	waitFor(5*time.Second, func() bool {
		c.Health(context.Background())
		mu.Lock()
		defer mu.Unlock()
		return len(restarts) > 0
	})

	mu.Lock()
	defer mu.Unlock()
	if votes["acquire"][redlock.VoteGranted] < 2 || votes["acquire"][redlock.VoteRefused] < 2 {
		t.Errorf("acquire votes %v", votes["acquire"])
	}
	// The fencing token is raised by the acquire script itself; a "fence"
	// round only follows when the nodes' counters disagreed.
	if votes["fence"][redlock.VoteFailed] > 0 {
		t.Errorf("fence votes %v", votes["fence"])
	}
	if votes["extend"][redlock.VoteGranted] < 2 || votes["release"][redlock.VoteGranted] < 2 {
		t.Errorf("extend votes %v, release votes %v", votes["extend"], votes["release"])
	}
	for n := range nodes {
		if !slices.Contains(c.Servers(), n) {
			t.Errorf("vote from unknown node %q", n)
		}
	}
	if len(renews) < 2 || !renews[0].OK || renews[0].Key != k || renews[0].Err != nil {
		t.Errorf("renew events %+v", renews)
	}
	if len(restarts) == 0 || restarts[0] != c.Servers()[2] {
		t.Errorf("restart events %v, want %s", restarts, c.Servers()[2])
	}
	for v, s := range map[redlock.Vote]string{redlock.VoteGranted: "granted", redlock.VoteRefused: "refused", redlock.VoteFailed: "failed", redlock.VoteNotVoting: "not_voting"} {
		if v.String() != s {
			t.Errorf("Vote(%d).String() = %q, want %q", v, v.String(), s)
		}
	}
}

func TestSentinelErrors(t *testing.T) {
	t.Parallel()
	all := []error{lease.ErrNotObtained, lease.ErrHeld, lease.ErrEpochDone, lease.ErrNoQuorum, lease.ErrLost,
		lease.ErrMaxLifetime, lease.ErrNotHeld, lease.ErrRestarted, lease.ErrClosed}
	for i, a := range all {
		if !strings.HasPrefix(a.Error(), "lease: ") {
			t.Errorf("%q lacks the package prefix", a)
		}
		for j, b := range all {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v matches %v", a, b)
			}
		}
	}
	ne := &lease.NodeError{Node: "redis://h:1", Err: lease.ErrRestarted}
	re := &lease.RefusedError{Key: "k", Reason: lease.ErrHeld, Holder: "h1", HolderTTL: 1500 * time.Millisecond,
		NodeErrs: errors.Join(ne), Detail: "d"}
	if !errors.Is(re, lease.ErrNotObtained) || !errors.Is(re, lease.ErrHeld) || errors.Is(re, lease.ErrNoQuorum) {
		t.Error("RefusedError.Is")
	}
	if !errors.Is(re, lease.ErrRestarted) {
		t.Error("RefusedError does not unwrap to its node errors")
	}
	var got *lease.NodeError
	if !errors.As(re, &got) || got != ne {
		t.Error("errors.As(*NodeError) through RefusedError")
	}
	want := `acquire k: lease: held by another owner (holder "h1", free in 1.5s): d; nodes: redis://h:1: lease: node restarted recently, not voting`
	if re.Error() != want {
		t.Errorf("Error() =\n%s\nwant\n%s", re.Error(), want)
	}
	ed := &lease.RefusedError{Key: "k", Reason: lease.ErrEpochDone, DoneEpoch: 4}
	if !strings.Contains(ed.Error(), "completed epoch 4") {
		t.Errorf("epoch refusal text %q", ed.Error())
	}
}
