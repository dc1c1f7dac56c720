package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
)

// TestDocumentedDefaults pins every default the documentation names.
func TestDocumentedDefaults(t *testing.T) {
	if DefaultTimeout != 50*time.Millisecond || DefaultDrift != 0.01 || DefaultFenceExpiry != time.Hour {
		t.Fatalf("DefaultTimeout %s, DefaultDrift %v, DefaultFenceExpiry %s", DefaultTimeout, DefaultDrift, DefaultFenceExpiry)
	}
	// The fence expiry is never below the restart guard or the longest TTL.
	fc, err := New([]string{"redis://127.0.0.1:1"}, WithFenceExpiry(time.Second), WithRestartGuard(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if d := fc.fenceExpiry(); d != 2*time.Second {
		t.Errorf("fence expiry %s, want the guard 2s", d)
	}
	fc.noteTTL(5 * time.Second)
	if d := fc.fenceExpiry(); d != 5*time.Second {
		t.Errorf("fence expiry %s, want the longest TTL 5s", d)
	}
	_ = fc.Close()
	dc, err := New([]string{"redis://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if d := dc.fenceExpiry(); d != time.Hour {
		t.Errorf("default fence expiry %s", d)
	}
	_ = dc.Close()
	urls := []string{"redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3", "redis://127.0.0.1:4", "redis://127.0.0.1:5"}
	for n := 1; n <= len(urls); n++ {
		c, err := New(urls[:n])
		if err != nil {
			t.Fatal(err)
		}
		if c.Quorum() != n/2+1 {
			t.Errorf("N=%d: quorum %d", n, c.Quorum())
		}
		if c.opts.timeout != DefaultTimeout || c.opts.drift != DefaultDrift {
			t.Errorf("timeout %s, drift %v", c.opts.timeout, c.opts.drift)
		}
		if _, ok := c.opts.retry.(noRetry); !ok {
			t.Errorf("default retry %T, want NoRetry", c.opts.retry)
		}
		if !c.opts.detect || !c.opts.fencing || c.opts.restartGuard != 0 {
			t.Errorf("detect %v fencing %v guard %s", c.opts.detect, c.opts.fencing, c.opts.restartGuard)
		}
		// The default restart guard is the longest TTL requested so far.
		if c.guard() != 0 {
			t.Errorf("guard before any request %s", c.guard())
		}
		c.noteTTL(3 * time.Second)
		c.noteTTL(time.Second)
		if c.guard() != 3*time.Second {
			t.Errorf("guard %s, want the longest TTL 3s", c.guard())
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}
	c, err := New(urls[:1], WithRestartGuard(time.Minute), WithTimeout(time.Second), WithDrift(0.1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.noteTTL(time.Hour)
	if c.guard() != time.Minute || c.opts.timeout != time.Second || c.opts.drift != 0.1 {
		t.Errorf("options not applied: guard %s timeout %s drift %v", c.guard(), c.opts.timeout, c.opts.drift)
	}
	// validity = ttl - elapsed - (ttl*drift + 2ms)
	if v := lease.Validity(time.Now(), 10*time.Second, c.opts.drift); v > 10*time.Second-time.Second-2*time.Millisecond || v < 8*time.Second {
		t.Errorf("validity %s", v)
	}
}

func TestRetryStrategies(t *testing.T) {
	if NoRetry().NextBackoff() != 0 {
		t.Error("NoRetry retries")
	}
	for range 100 {
		if d := LinearBackoff(100 * time.Millisecond).NextBackoff(); d < 75*time.Millisecond || d > 125*time.Millisecond {
			t.Fatalf("linear jitter out of ±25%%: %s", d)
		}
	}
	e := freshRetry(ExponentialBackoff(10*time.Millisecond, 80*time.Millisecond))
	for i, base := range []time.Duration{10, 20, 40, 80, 80} {
		d := e.NextBackoff()
		base *= time.Millisecond
		if d < base*3/4 || d > base*5/4 {
			t.Errorf("exponential step %d: %s, want about %s", i, d, base)
		}
	}
	lim := LimitRetry(LinearBackoff(time.Millisecond), 2)
	for call := range 2 {
		r := freshRetry(lim) // each Acquire call counts anew
		if r.NextBackoff() == 0 || r.NextBackoff() == 0 || r.NextBackoff() != 0 {
			t.Errorf("call %d: LimitRetry(2) did not allow exactly 2 retries", call)
		}
	}
}

// TestReentrantToken: an attempt with the token of a lease already held
// (a retry inside one Acquire call) acts as an extend; any other token is
// refused.
func TestReentrantToken(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 3)
	c, err := New(cl.URLs(), WithoutRestartDetection(), WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	req := lease.Request{Key: "reentrant", TTL: 5 * time.Second, Owner: "o"}
	first := c.tryBatch(ctx, []lease.Request{req}, []string{"tok"})[0]
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	req.TTL = 20 * time.Second
	again := c.tryBatch(ctx, []lease.Request{req}, []string{"tok"})[0]
	if again.Err != nil {
		t.Fatalf("same token again: %v", again.Err)
	}
	if again.Lease.Fence() <= first.Lease.Fence() {
		t.Errorf("fence %d after %d", again.Lease.Fence(), first.Lease.Fence())
	}
	extended := 0
	for _, n := range cl.Nodes {
		d, _ := n.Client().HGet(ctx, leaseKey("reentrant"), "d").Int64()
		now, _ := n.Client().Time(ctx).Result()
		if time.UnixMilli(d).Sub(now) > 5*time.Second {
			extended++
		}
	}
	if extended < c.Quorum() {
		t.Errorf("the re-entry extended the lock on %d nodes", extended)
	}
	other := c.tryBatch(ctx, []lease.Request{req}, []string{"other"})[0]
	if !errors.Is(other.Err, lease.ErrHeld) {
		t.Errorf("other token: %v", other.Err)
	}
	_ = again.Lease.Release(ctx)
}

// TestFailoverIsRestart: a plain or Sentinel node is one server at a time,
// so a different server behind it (a Sentinel failover to a promoted
// replica, at another address) is treated as a restart and does not vote
// for the guard. A Cluster node tracks each shard address by itself.
func TestFailoverIsRestart(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 2)
	ctx := context.Background()
	connect := func(n *node, addr string) {
		t.Helper()
		rdb := redis.NewClient(&redis.Options{Addr: addr, OnConnect: n.onConnect, Protocol: 2})
		defer rdb.Close()
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	guard := func() time.Duration { return time.Millisecond }
	// Another client's first connections write the servers' data markers;
	// then let both servers and markers age more than the first-sight
	// allowance.
	other := newNode("other-client", nil, nil, guard)
	connect(other, cl.Nodes[0].Addr())
	connect(other, cl.Nodes[1].Addr())
	time.Sleep(2100 * time.Millisecond)

	n := newNode("sentinel-node", nil, nil, guard)
	connect(n, cl.Nodes[0].Addr())
	if !n.voting(time.Now(), time.Millisecond) {
		t.Fatal("first server, up for 2 s, does not vote")
	}
	connect(n, cl.Nodes[1].Addr()) // failover: another server, another run_id
	if n.voting(time.Now(), time.Second) || n.restartedAt.IsZero() {
		t.Error("a new server behind the node was not treated as a restart")
	}

	cn := newNode("cluster-node", nil, nil, guard)
	cn.perShard = true
	connect(cn, cl.Nodes[0].Addr())
	connect(cn, cl.Nodes[1].Addr()) // another shard
	if !cn.voting(time.Now(), time.Millisecond) || !cn.restartedAt.IsZero() {
		t.Error("a second cluster shard was treated as a restart")
	}
}

// TestSentinelCredentials: the user info of a Sentinel URL logs in to the
// Sentinels and to the master; ?username= and ?password= set the master's
// own instead.
func TestSentinelCredentials(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ raw, user, pw string }{
		{"redis+sentinel://u:p@h:1?master_name=m", "u", "p"},
		{"redis+sentinel://u:p@h:1?master_name=m&username=mu&password=mp", "mu", "mp"},
		{"redis+sentinel://h:1?master_name=m&password=mp", "", "mp"},
	} {
		_, rdb, err := parseNode(tc.raw, nil, time.Second, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		o := rdb.(*redis.Client).Options()
		if o.Username != tc.user || o.Password != tc.pw {
			t.Errorf("%s: the master is logged in to as %q/%q, want %q/%q", Redact(tc.raw), o.Username, o.Password, tc.user, tc.pw)
		}
		_ = rdb.Close()
	}
}
