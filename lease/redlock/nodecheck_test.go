package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// unsafe asserts that node i is refused with ErrUnsafeNode, by Ping
// (what status and /healthz show) and in an acquisition's node errors,
// with a message that contains every one of want.
func unsafe(t *testing.T, c *redlock.Client, i int, want ...string) {
	t.Helper()
	st := c.Health(context.Background())[i]
	if st.Err == nil || st.Voting || !errors.Is(st.Err, redlock.ErrUnsafeNode) {
		t.Errorf("Ping of node %d: %+v, want ErrUnsafeNode and not voting", i, st)
	} else {
		for _, w := range want {
			if !strings.Contains(st.Err.Error(), w) {
				t.Errorf("Ping of node %d: %v does not say %q", i, st.Err, w)
			}
		}
	}
}

// TestEvictingNodeRefused: a node with maxmemory and a policy that can
// evict keys (volatile-* evicts every lock key, allkeys-* completion marks
// too) is refused, naming the setting; noeviction, or no maxmemory, is
// accepted (the negative control: the check passes safe nodes).
func TestEvictingNodeRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		maxmemory, policy string
		refused           bool
	}{
		{"64mb", "volatile-lru", true},
		{"64mb", "allkeys-lru", true},
		{"64mb", "volatile-ttl", true},
		{"64mb", "allkeys-random", true},
		{"64mb", "noeviction", false},
		{"0", "volatile-lru", false},
	} {
		t.Run(tc.maxmemory+"-"+tc.policy, func(t *testing.T) {
			t.Parallel()
			cl := start(t, 1, redistest.WithArgs("--maxmemory", tc.maxmemory, "--maxmemory-policy", tc.policy))
			if !tc.refused {
				c := votingClient(t, cl.URLs())
				l, err := c.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: key(t), TTL: 5 * time.Second})
				if err != nil {
					t.Fatalf("a node that cannot evict lease keys was refused: %v", err)
				}
				_ = l.Release(ctxT(t, 5*time.Second))
				if st := c.Health(context.Background())[0]; st.Err != nil || !st.Voting {
					t.Errorf("Ping: %+v", st)
				}
				return
			}
			c := newClient(t, cl.URLs(), redlock.WithRestartGuard(time.Millisecond), redlock.WithTimeout(testTimeout))
			_, err := c.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: key(t), TTL: 5 * time.Second})
			re := refused(t, err, lease.ErrNoQuorum)
			if !errors.Is(re, redlock.ErrUnsafeNode) || !strings.Contains(re.Error(), cl.Nodes[0].Addr()) {
				t.Errorf("refusal does not name the node and ErrUnsafeNode: %v", re)
			}
			unsafe(t, c, 0, "maxmemory-policy "+tc.policy, "noeviction")
			if ks := cl.Nodes[0].Keys("*"); len(ks) > 0 {
				t.Errorf("the refused node got keys: %v", ks)
			}
		})
	}
}

// TestEvictionConfiguredLater: a node reconfigured to evict while the
// client's connections stay open (CONFIG SET keeps them) is found by the
// lane's periodic check: its answers stop counting and Ping says why; a
// new client (what `leasecron status` runs) refuses it at once. Set back
// to noeviction, it votes again. The control before the change: the same
// client's rounds and Ping pass.
func TestEvictionConfiguredLater(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs())
	l := mustAcquire(t, c, lease.Request{Key: key(t), TTL: 5 * time.Second})
	_ = l.Release(ctxT(t, 5*time.Second))
	rdb := cl.Nodes[1].Client()
	set := func(k, v string) {
		t.Helper()
		if err := rdb.ConfigSet(context.Background(), k, v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	set("maxmemory", "100mb")
	set("maxmemory-policy", "volatile-lfu")
	fresh := newClient(t, cl.URLs(), redlock.WithRestartGuard(time.Millisecond), redlock.WithTimeout(testTimeout))
	unsafe(t, fresh, 1, "maxmemory-policy volatile-lfu", "104857600")

	if !waitFor(10*time.Second, func() bool {
		return errors.Is(c.Health(context.Background())[1].Err, redlock.ErrUnsafeNode)
	}) {
		t.Fatalf("the running client still counts the evicting node: %+v", c.Health(context.Background())[1])
	}
	unsafe(t, c, 1, "maxmemory-policy volatile-lfu")
	// Its grants do not count: with node 0 paused there is no quorum.
	cl.Nodes[0].Pause()
	_, err := c.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: key(t, "2"), TTL: 5 * time.Second})
	cl.Nodes[0].Resume()
	re := refused(t, err, lease.ErrNoQuorum)
	if !errors.Is(re, redlock.ErrUnsafeNode) {
		t.Errorf("refusal does not name the evicting node: %v", re)
	}

	set("maxmemory-policy", "noeviction")
	waitVoting(t, c, nil)
	l = mustAcquire(t, c, lease.Request{Key: key(t, "3"), TTL: 5 * time.Second})
	_ = l.Release(ctxT(t, 5*time.Second))
}

// TestNoRunIDRefused: a server reached through a proxy that hides run_id
// from INFO (as proxies and some Redis-compatible servers do) is refused:
// its restarts could not be seen. The negative control is the same proxy
// passing INFO as it is: accepted.
func TestNoRunIDRefused(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	p := netproxy.New(t, cl.Nodes[0].Addr())
	p.RewriteReplies("run_id:", "run_no:")
	urls := cl.URLs()
	urls[0] = "redis://" + p.Addr()
	// The proxy really hides it.
	via := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer via.Close()
	info, err := via.Info(context.Background(), "server").Result()
	if err != nil || strings.Contains(info, "run_id:") || !strings.Contains(info, "run_no:") {
		t.Fatalf("INFO through the rewriting proxy (err %v) still has run_id:\n%s", err, info)
	}
	c := newClient(t, urls, redlock.WithRestartGuard(testGuard), redlock.WithTimeout(testTimeout))
	waitVoting(t, c, []int{1, 2})
	unsafe(t, c, 0, "run_id")
	// The two others are a quorum.
	l := mustAcquire(t, c, lease.Request{Key: key(t), TTL: 5 * time.Second})
	_ = l.Release(ctxT(t, 5*time.Second))

	plain := netproxy.New(t, cl.Nodes[0].Addr())
	urls[0] = "redis://" + plain.Addr()
	votingClient(t, urls) // fails the test unless all three vote
}

// TestSameServerTwice: one server listed under two addresses (localhost
// and 127.0.0.1, or through a proxy) must not get two votes. With the
// only other server stopped, it alone must not make a quorum of 3.
func TestSameServerTwice(t *testing.T) {
	t.Parallel()
	cl := start(t, 2)
	_, port, _ := strings.Cut(cl.Nodes[0].Addr(), ":")
	p := netproxy.New(t, cl.Nodes[0].Addr())
	for name, second := range map[string]string{
		"localhost": "redis://localhost:" + port,
		"proxy":     "redis://" + p.Addr(),
	} {
		t.Run(name, func(t *testing.T) {
			urls := []string{cl.URLs()[0], second, cl.URLs()[1]}
			c := newClient(t, urls, redlock.WithRestartGuard(testGuard), redlock.WithTimeout(testTimeout))
			waitVoting(t, c, []int{2})
			// Wait until both names of the server connected and either
			// vote or are refused.
			if !waitFor(15*time.Second, func() bool {
				st := c.Health(context.Background())
				return (st[0].Err != nil || st[0].Voting) && (st[1].Err != nil || st[1].Voting)
			}) {
				t.Fatalf("the server's two names neither vote nor are refused: %+v", c.Health(context.Background()))
			}

			// Without the other server only one vote is left: no quorum.
			cl.Nodes[1].Pause()
			for i := range 3 {
				l, err := c.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: key(t, "alone"), TTL: 5 * time.Second})
				if err == nil {
					_ = l.Release(ctxT(t, 5*time.Second))
					cl.Nodes[1].Resume()
					t.Fatalf("attempt %d: one server made a quorum of 3 by being listed twice", i)
				}
				refused(t, err, lease.ErrNoQuorum)
			}
			cl.Nodes[1].Resume()

			// Exactly one of the two names is refused, naming the other.
			st := c.Health(context.Background())
			if (st[0].Err == nil) == (st[1].Err == nil) {
				t.Fatalf("not exactly one of the two names of one server refused: %+v", st)
			}
			dup := 1
			if st[0].Err != nil {
				dup = 0
			}
			if !errors.Is(st[dup].Err, redlock.ErrDuplicateNode) || !strings.Contains(st[dup].Err.Error(), redlock.Redact(urls[1-dup])) || st[dup].Voting {
				t.Errorf("Ping of the second name: %+v, want ErrDuplicateNode naming %s", st[dup], urls[1-dup])
			}
			// With both distinct servers the lease is taken.
			waitVoting(t, c, []int{1 - dup, 2})
			l := mustAcquire(t, c, lease.Request{Key: key(t), TTL: 5 * time.Second})
			_ = l.Release(ctxT(t, 5*time.Second))
		})
	}
}

// TestReplicaOnlyRejected: a Sentinel URL with replica_only=true would
// send every round to a replica (refused at connection); CheckURL, which
// `leasecron check` runs, and New reject it at once.
func TestReplicaOnlyRejected(t *testing.T) {
	t.Parallel()
	const base = "redis+sentinel://127.0.0.1:26379?master_name=mymaster"
	if err := redlock.CheckURL(base); err != nil {
		t.Fatalf("CheckURL(%s): %v", base, err)
	}
	for _, u := range []string{base + "&replica_only=true", base + "&replica_only=1"} {
		err := redlock.CheckURL(u)
		if err == nil || !strings.Contains(err.Error(), "replica_only") {
			t.Errorf("CheckURL(%s) = %v, want an error naming replica_only", u, err)
		}
		if c, err := redlock.New([]string{u}); err == nil {
			_ = c.Close()
			t.Errorf("New accepted %s", u)
		}
	}
}
