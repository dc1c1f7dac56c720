package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

const secret = "s3cretPW"

func TestNodeURLErrors(t *testing.T) {
	t.Parallel()
	ok := "redis://127.0.0.1:6379"
	for _, tc := range []struct {
		name string
		urls []string
		opts []redlock.Option
		want []string // substrings of the error
	}{
		{"no nodes", nil, nil, []string{"no nodes"}},
		{"bad scheme", []string{"http://127.0.0.1:6379"}, nil, []string{"node 1", "http://127.0.0.1:6379", "unsupported scheme"}},
		{"bad sub-scheme", []string{ok, "redis+foo://127.0.0.1:6380"}, nil, []string{"node 2", "redis+foo://127.0.0.1:6380", "unsupported scheme"}},
		{"missing host", []string{ok, "redis://"}, nil, []string{"node 2", "missing host"}},
		{"missing host, path only", []string{"redis:///0"}, nil, []string{"node 1", "missing host"}},
		{"port zero", []string{"redis://127.0.0.1:0"}, nil, []string{"node 1", "127.0.0.1:0", "bad port"}},
		{"port too big", []string{"redis://127.0.0.1:70000"}, nil, []string{"node 1", "127.0.0.1:70000", "bad port"}},
		{"port not a number", []string{"redis://127.0.0.1:abc"}, nil, []string{"node 1", "127.0.0.1:abc"}},
		{"duplicate", []string{ok, "redis://127.0.0.1:6380", ok}, nil, []string{"node 3", ok, "listed twice"}},
		{"sentinel without master_name", []string{"redis+sentinel://127.0.0.1:26379"}, nil, []string{"node 1", "127.0.0.1:26379", "master_name"}},
		{"bad db", []string{"redis://127.0.0.1:6379/x"}, nil, []string{"node 1", "127.0.0.1:6379"}},
		{"password, bad port", []string{"redis://:" + secret + "@127.0.0.1:0"}, nil, []string{"node 1", "127.0.0.1:0", "bad port"}},
		{"user and password, bad scheme", []string{"ftp://user:" + secret + "@127.0.0.1:1"}, nil, []string{"node 1", "user", "127.0.0.1:1"}},
		{"password, bad db", []string{ok, "redis://u:" + secret + "@127.0.0.1:6380/x"}, nil, []string{"node 2", "127.0.0.1:6380"}},
		{"password, bad option", []string{"redis://u:" + secret + "@127.0.0.1:6380/0?bogus=1"}, nil, []string{"node 1", "127.0.0.1:6380"}},
		{"password, unparsable", []string{"redis://u:" + secret + "%zz@127.0.0.1:6380"}, nil, []string{"node 1", "127.0.0.1:6380"}},
		{"password, duplicate", []string{"redis://:" + secret + "@127.0.0.1:1", "redis://:" + secret + "@127.0.0.1:1"}, nil, []string{"node 2", "listed twice"}},
		{"sentinel with password", []string{"redis+sentinel://:" + secret + "@127.0.0.1:26379"}, nil, []string{"node 1", "master_name"}},
		{"password option on a plain node", []string{"redis://127.0.0.1:6380?password=" + secret}, nil, []string{"node 1", "127.0.0.1:6380", "password=xxxxx", "unexpected option"}},
		{"sentinel_password option", []string{"redis+sentinel://127.0.0.1:26379?master_name=m&sentinel_password=" + secret}, nil, []string{"node 1", "unexpected option"}},
		{"timeout", []string{ok}, []redlock.Option{redlock.WithTimeout(0)}, []string{"timeout"}},
		{"drift", []string{ok}, []redlock.Option{redlock.WithDrift(1)}, []string{"drift"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redlock.New(tc.urls, tc.opts...)
			if err == nil {
				c.Close()
				t.Fatalf("New(%q) succeeded", tc.urls)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error leaks the password: %q", err)
			}
		})
	}
}

func TestNodeURLForms(t *testing.T) {
	t.Parallel()
	urls := []string{
		"redis://127.0.0.1:1",
		"redis://:" + secret + "@127.0.0.1:2/3",
		"rediss://user:" + secret + "@127.0.0.1:3",
		"redis+sentinel://:" + secret + "@127.0.0.1:4?master_name=m&addr=127.0.0.1:5",
		"redis+cluster://127.0.0.1:6?addr=127.0.0.1:7",
		"redis://localhost", // default port
	}
	c, err := redlock.New(urls)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, n := range c.Servers() {
		if strings.Contains(n, secret) {
			t.Errorf("Nodes()[%d] = %q leaks the password", i, n)
		}
		if n != redlock.Redact(urls[i]) {
			t.Errorf("Nodes()[%d] = %q, want %q", i, n, redlock.Redact(urls[i]))
		}
	}
	if c.Quorum() != 4 {
		t.Errorf("Quorum() = %d for 6 nodes", c.Quorum())
	}
	for in, want := range map[string]string{
		"redis://h:1":                     "redis://h:1",
		"redis://:" + secret + "@h:1/2":   "redis://:xxxxx@h:1/2",
		"redis://u:" + secret + "@h:1":    "redis://u:xxxxx@h:1",
		"redis://u:" + secret + "%zz@h:1": "xxxxx@h:1",
		"redis://u:a@b" + secret + "@h:1": "redis://u:xxxxx@h:1",
		"admin:" + secret + "@db:6379":    "xxxxx@db:6379",
		"//u:" + secret + "@h:1":          "//u:xxxxx@h:1",
		"h:1":                             "h:1",
		"redis+sentinel://h:1?master_name=m&password=" + secret:          "redis+sentinel://h:1?master_name=m&password=xxxxx",
		"redis+sentinel://h:1?sentinel_password=" + secret + "&addr=h:2": "redis+sentinel://h:1?addr=h%3A2&sentinel_password=xxxxx",
		"redis://h:1?Password=" + secret:                                 "redis://h:1?Password=xxxxx",
	} {
		if got := redlock.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPasswordNodes(t *testing.T) {
	t.Parallel()
	pw := start(t, 1, redistest.WithPassword(secret))
	acl := start(t, 1, redistest.WithACLUser("leaser", secret))
	plain := start(t, 1)
	urls := []string{
		"redis://:" + secret + "@" + pw.Nodes[0].Addr(),
		"redis://leaser:" + secret + "@" + acl.Nodes[0].Addr(),
		plain.URLs()[0],
	}
	// Each node alone grants (so each form of credentials works) ...
	for _, u := range urls {
		c := votingClient(t, []string{u})
		l := mustAcquire(t, c, lease.Request{Key: key(t), TTL: 5 * time.Second})
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// ... and together they make a Redlock.
	c := votingClient(t, urls)
	l := mustAcquire(t, c, lease.Request{Key: key(t), TTL: 5 * time.Second})
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Servers() {
		if strings.Contains(n, secret) {
			t.Errorf("Nodes() leaks the password: %s", n)
		}
	}

	// Wrong password / wrong user / no password: acquire fails naming the
	// node, never showing the password.
	const wrong = "wr0ngPW"
	for _, u := range []string{
		"redis://:" + wrong + "@" + pw.Nodes[0].Addr(),
		"redis://leaser:" + wrong + "@" + acl.Nodes[0].Addr(),
		"redis://nobody:" + secret + "@" + acl.Nodes[0].Addr(),
		"redis://" + pw.Nodes[0].Addr(),
	} {
		bad := newClient(t, []string{u}, redlock.WithRestartGuard(time.Millisecond), redlock.WithTimeout(2*time.Second))
		_, err := bad.Acquire(context.Background(), lease.Request{Key: key(t), TTL: time.Second})
		re := refused(t, err, lease.ErrNoQuorum)
		if names := nodeErrorNames(re.NodeErrs); len(names) != 1 || names[0] != redlock.Redact(u) {
			t.Errorf("%s: node errors name %v", redlock.Redact(u), names)
		}
		msg := err.Error()
		if strings.Contains(msg, wrong) || strings.Contains(msg, secret) {
			t.Errorf("error leaks a password: %s", msg)
		}
		if !strings.Contains(msg, pw.Nodes[0].Addr()) && !strings.Contains(msg, acl.Nodes[0].Addr()) {
			t.Errorf("error does not name the node: %s", msg)
		}
		for _, st := range bad.Health(context.Background()) {
			if st.Err == nil || st.Voting || strings.Contains(st.Err.Error(), secret) || strings.Contains(st.Err.Error(), wrong) {
				t.Errorf("Ping: %+v", st)
			}
		}
	}
}

func TestReplicaRefused(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	host, port, _ := net.SplitHostPort(cl.Nodes[0].Addr())
	if err := cl.Nodes[2].Client().ReplicaOf(context.Background(), host, port).Err(); err != nil {
		t.Fatal(err)
	}
	// Only the replica: refused, and the error says why.
	solo := newClient(t, cl.URLs()[2:], redlock.WithRestartGuard(time.Millisecond), redlock.WithTimeout(2*time.Second))
	_, err := solo.Acquire(context.Background(), lease.Request{Key: key(t), TTL: time.Second})
	refused(t, err, lease.ErrNoQuorum)
	if !strings.Contains(err.Error(), "replica") || !strings.Contains(err.Error(), cl.Nodes[2].Addr()) {
		t.Errorf("error does not say the node is a replica: %v", err)
	}
	if st := solo.Health(context.Background())[0]; st.Err == nil || !strings.Contains(st.Err.Error(), "replica") || st.Voting {
		t.Errorf("Ping of a replica: %+v", st)
	}
	// Two masters and the replica: the masters are a quorum; the replica
	// is reported.
	c := newClient(t, cl.URLs(), redlock.WithRestartGuard(testGuard), redlock.WithTimeout(testTimeout))
	waitVoting(t, c, []int{0, 1})
	l := mustAcquire(t, c, lease.Request{Key: key(t, "3"), TTL: time.Second})
	_ = l.Release(context.Background())
	if st := c.Health(context.Background())[2]; st.Err == nil || !strings.Contains(st.Err.Error(), "replica") {
		t.Errorf("Ping of the replica: %+v", st)
	}
}

// TestClusterNode uses a real 3-master Redis Cluster as one of three
// Redlock nodes; the lease keys of each lease share a hash tag, so the
// scripts work although the leases live on different masters. One plain
// node is killed so that every round needs the cluster's vote.
func TestClusterNode(t *testing.T) {
	t.Parallel()
	rc := redistest.StartRedisCluster(t)
	addrs := rc.Addrs()
	if len(addrs) < 3 {
		t.Fatalf("cluster addrs %v", addrs)
	}
	plain := start(t, 2)
	clusterURL := "redis+cluster://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2]
	urls := append([]string{clusterURL}, plain.URLs()...)
	c := votingClient(t, urls, redlock.WithTimeout(time.Second))
	other := votingClient(t, urls, redlock.WithTimeout(time.Second))
	if err := newClient(t, urls).Warm(ctxT(t, 10*time.Second)); err != nil {
		t.Errorf("Warm with a Cluster node: %v", err)
	}
	plain.Nodes[1].Kill()
	ctx := context.Background()
	cc := rc.Client()

	var leases []lease.Lease
	for i := range 12 {
		k := key(t, fmt.Sprint(i))
		l := mustAcquire(t, c, lease.Request{Key: k, TTL: 30 * time.Second, Owner: "o"})
		leases = append(leases, l)
		// The cluster's vote was needed, so it holds the lease.
		if v, _ := lockOf(t, cc, k); !strings.HasPrefix(v, l.Token()+" ") {
			t.Errorf("%s on the cluster: %q", k, v)
		}
		if v, err := cc.HGet(ctx, leaseHash(k), "f").Int64(); err != nil || v != l.Fence() {
			t.Errorf("%s fence on the cluster: %d, %v; lease has %d", k, v, err, l.Fence())
		}
	}
	// The leases are spread over the cluster's masters.
	used := 0
	for _, n := range rc.Nodes {
		if len(n.Keys("*:lease")) > 0 {
			used++
		}
	}
	if used < 2 {
		t.Errorf("12 leases landed on %d cluster masters", used)
	}
	for _, l := range leases {
		_, err := other.Acquire(ctx, lease.Request{Key: l.Key(), TTL: time.Second})
		re := refused(t, err, lease.ErrHeld)
		if re.Holder != "o" {
			t.Errorf("holder %q", re.Holder)
		}
		if err := l.Extend(ctx, time.Minute); err != nil {
			t.Errorf("Extend %s: %v", l.Key(), err)
		}
		if _, ttl := lockOf(t, cc, l.Key()); ttl <= 30*time.Second {
			t.Errorf("%s: PTTL on the cluster after Extend(1m) = %s", l.Key(), ttl)
		}
		if err := l.Release(ctx); err != nil {
			t.Errorf("Release %s: %v", l.Key(), err)
		}
	}
	if !waitFor(5*time.Second, func() bool {
		for _, n := range rc.Nodes {
			if len(lockKeys(t, n)) > 0 {
				return false
			}
		}
		return true
	}) {
		t.Error("lock keys left on the cluster after release")
	}
	// Batch and epochs across slots, with all three nodes up again.
	plain.Nodes[1].Restart()
	waitVoting(t, c, nil)
	var reqs []lease.Request
	for i := range 20 {
		reqs = append(reqs, lease.Request{Key: key(t, "b", fmt.Sprint(i)), TTL: 5 * time.Second, Epoch: 3})
	}
	for _, r := range c.TryAcquireBatch(ctx, reqs) {
		if r.Err != nil {
			t.Fatalf("batch on cluster: %v", r.Err)
		}
		if err := r.Lease.Complete(ctx); err != nil {
			t.Fatal(err)
		}
		if v, err := cc.HGet(ctx, leaseHash(r.Lease.Key()), "e").Int64(); err != nil || v != 3 {
			t.Errorf("%s: completed epoch on the cluster %d, %v", r.Lease.Key(), v, err)
		}
	}
	for _, r := range other.TryAcquireBatch(ctx, reqs) {
		if !errors.Is(r.Err, lease.ErrEpochDone) {
			t.Errorf("after Complete on cluster: %v", r.Err)
		}
	}
}

// TestSentinelNode uses a real Sentinel-managed master (a master, its
// replica and one Sentinel) as one of three Redlock nodes, with one plain
// node killed so that every round needs its vote. Leases live on the
// master the Sentinel names. After a failover the promoted replica is a
// new server behind the same node, which may lack leases the old master
// granted: the client must treat it as a restart, keep the node from
// voting for the restart guard, and then take leases on the new master. A
// client that first meets the node after the failover must wait too.
func TestSentinelNode(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinelGroup(t)
	plain := start(t, 2)
	sentinelURL := "redis+sentinel://" + g.Sentinel.Addr() + "?master_name=" + redistest.SentinelMasterName
	const guard = 2 * time.Second
	var mu sync.Mutex
	var votesAgainAt []time.Time // from OnRestart for the Sentinel node
	ob := redlock.Observer{OnRestart: func(node string, at time.Time) {
		if strings.Contains(node, g.Sentinel.Addr()) {
			mu.Lock()
			votesAgainAt = append(votesAgainAt, at)
			mu.Unlock()
		}
	}}
	c := votingClient(t, append([]string{sentinelURL}, plain.URLs()...),
		redlock.WithTimeout(time.Second), redlock.WithRestartGuard(guard), redlock.WithObserver(ob))
	plain.Nodes[1].Kill()
	ctx := ctxT(t, time.Minute)

	// Listed as a plain node by mistake, the Sentinel is named as one.
	wrong := newClient(t, []string{g.Sentinel.URL()})
	if st := wrong.Health(ctx)[0]; st.Err == nil || !strings.Contains(st.Err.Error(), "redis+sentinel://") {
		t.Errorf("a Sentinel listed as a plain node: %+v", st)
	}

	k := key(t)
	lockOn := func(n *redistest.Node, k string) string {
		t.Helper()
		v, _ := lockOf(t, n.Client(), k)
		return v
	}
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: time.Minute, Owner: "o"})
	if v := lockOn(g.Master, k); !strings.HasPrefix(v, l.Token()+" ") {
		t.Errorf("the lock on the Sentinel's master is %q, want the lease's token %s", v, l.Token())
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Errorf("Extend through the Sentinel node: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release through the Sentinel node: %v", err)
	}
	if v := lockOn(g.Master, k); v != "" {
		t.Errorf("lock left on the master after Release: %q", v)
	}
	mu.Lock()
	if len(votesAgainAt) > 0 {
		t.Errorf("restart reported before any failover: %v", votesAgainAt)
	}
	mu.Unlock()

	g.Failover()
	// The old master takes writes until the Sentinel demotes it (a window
	// of Sentinel's own, see the package doc); start once it no longer does.
	g.WaitDemoted()
	// No lease until the guard has passed since the client met the new
	// master: the Sentinel node does not vote and the one live plain node
	// is no quorum. Then the node votes again, on the new master.
	k2 := key(t, "after")
	var l2 lease.Lease
	sawRestarted := false
	deadline := time.Now().Add(30 * time.Second)
	for l2 == nil {
		var err error
		l2, err = c.Acquire(ctx, lease.Request{Key: k2, TTL: 10 * time.Second, Owner: "o"})
		if err == nil {
			break
		}
		refused(t, err, lease.ErrNoQuorum)
		for _, ne := range nodeErrors(err) {
			if strings.Contains(ne.Node, g.Sentinel.Addr()) && errors.Is(ne, lease.ErrRestarted) {
				sawRestarted = true
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lease %s 30 s after the failover: %v", k2, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	won := time.Now()
	mu.Lock()
	defer mu.Unlock()
	if len(votesAgainAt) == 0 {
		t.Fatal("the failover was not reported as a restart (Observer.OnRestart)")
	}
	if !sawRestarted {
		t.Error("no refusal after the failover named the Sentinel node as restarted (ErrRestarted)")
	}
	if again := votesAgainAt[len(votesAgainAt)-1]; won.Before(again) {
		t.Errorf("lease won at %s, before the failed-over node votes again at %s", won.Format(time.StampMilli), again.Format(time.StampMilli))
	}
	if v := lockOn(g.Master, k2); !strings.HasPrefix(v, l2.Token()+" ") {
		t.Errorf("the lock on the new master %s is %q, want the lease's token %s", g.Master.Addr(), v, l2.Token())
	}
	if st := c.Health(ctx)[0]; st.Err != nil || !st.Voting || st.RestartedAt.IsZero() {
		t.Errorf("Ping of the Sentinel node after the failover: %+v", st)
	}
	// A client that meets the promoted master for the first time cannot
	// know when it was promoted: the node does not vote for a guard.
	fresh := newClient(t, []string{sentinelURL}, redlock.WithRestartGuard(guard))
	if st := fresh.Health(ctx)[0]; st.Err != nil || st.Voting || st.VotingAt.Before(time.Now().Add(guard/2)) {
		t.Errorf("a new client's first Ping of the promoted master: %+v, want it not voting for about %s", st, guard)
	}
	if err := l2.Release(ctx); err != nil {
		t.Errorf("Release after the failover: %v", err)
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"redis://127.0.0.1:1/0":                               "",
		"redis+sentinel://127.0.0.1:1?master_name=m":          "",
		"redis+cluster://127.0.0.1:1?addr=127.0.0.1:2":        "",
		"redis://127.0.0.1:1?bogus=1":                         "unexpected option: bogus",
		"redis://127.0.0.1:1?password=" + secret:              "unexpected option: password",
		"redis+sentinel://127.0.0.1:1":                        "master_name",
		"http://127.0.0.1:1":                                  "unsupported scheme",
		"redis://u:" + secret + "@127.0.0.1:1/x":              "invalid database number",
		"redis://u:" + secret + "@127.0.0.1:1?dial_timeout=x": "dial_timeout",
	} {
		err := redlock.CheckURL(raw)
		switch {
		case want == "" && err != nil:
			t.Errorf("CheckURL(%s) = %v", redlock.Redact(raw), err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("CheckURL(%s) = %v, want an error with %q", redlock.Redact(raw), err, want)
		}
		if err != nil && (strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "127.0.0.1")) {
			t.Errorf("CheckURL(%s) error quotes the URL: %v", redlock.Redact(raw), err)
		}
	}
}

// TestTLSNodes: rediss:// nodes whose certificate is signed by a private
// CA, trusted through WithTLSConfig (which sets no ServerName: the client
// checks the certificate against each node's own host). Without the CA
// every node is refused with a certificate error that names it, also when
// the round timed out before the handshake failed.
func TestTLSNodes(t *testing.T) {
	t.Parallel()
	ca := redistest.NewCA(t)
	cl := start(t, 3, redistest.WithTLS(ca), redistest.WithPassword(secret))
	urls := cl.TLSURLs()
	c := votingClient(t, urls, redlock.WithTLSConfig(ca.ClientConfig()))
	ctx := ctxT(t, 20*time.Second)
	l := mustAcquire(t, c, lease.Request{Key: key(t), TTL: 10 * time.Second, Owner: "o"})
	// A grant needs a quorum (2 of 3), not every node: on a loaded machine
	// one node's answer may come after the request timeout. Every node's
	// TLS is checked by Warm below.
	holders := 0
	for _, n := range cl.Nodes {
		v, _ := lockOf(t, n.Client(), l.Key())
		if strings.HasPrefix(v, l.Token()+" ") {
			holders++
		} else {
			t.Logf("lock on %s: %q", n.Addr(), v)
		}
	}
	if holders < 2 {
		t.Errorf("lock held on %d nodes over TLS, want a quorum of 2", holders)
	}
	if err := l.Extend(ctx, 10*time.Second); err != nil {
		t.Errorf("Extend over TLS: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release over TLS: %v", err)
	}

	// Warm opens a fresh client's connections (TLS handshakes included)
	// before its first round.
	fresh := newClient(t, urls, redlock.WithTLSConfig(ca.ClientConfig()))
	if err := fresh.Warm(ctx); err != nil {
		t.Errorf("Warm with the CA: %v", err)
	}

	untrusting := newClient(t, urls)
	werr := untrusting.Warm(ctx)
	if werr == nil || !strings.Contains(werr.Error(), "certificate") || !strings.Contains(werr.Error(), cl.Nodes[0].TLSAddr()) {
		t.Errorf("Warm without the CA: %v, want certificate errors naming each node", werr)
	}
	_, err := untrusting.Acquire(ctx, lease.Request{Key: key(t, "untrusted"), TTL: time.Second})
	refused(t, err, lease.ErrNoQuorum)
	if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Acquire without the CA does not say why: %v", err)
	}
	for _, st := range untrusting.Health(ctx) {
		if st.Err == nil || !strings.Contains(st.Err.Error(), "certificate") {
			t.Errorf("Ping of %s without the CA: %v", st.Server, st.Err)
		}
		if strings.Contains(st.Server, secret) {
			t.Errorf("node name leaks the password: %s", st.Server)
		}
	}
}
