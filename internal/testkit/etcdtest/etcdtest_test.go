package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestClusterKillRestartLeader: the cluster serves writes; killing the
// leader elects another; the killed member restarts from its data
// directory and sees the writes made while it was down.
func TestClusterKillRestartLeader(t *testing.T) {
	c := Start(t)
	cli, ctx := putA(t, c)
	old := c.Leader()
	c.Kill(old)
	if c.PID(old) != 0 {
		t.Fatalf("killed member %d still has a pid", old)
	}
	lead := c.Leader()
	if lead == old {
		t.Fatalf("leader is still the killed member %d", old)
	}
	if _, err := cli.Put(ctx, "b", "2"); err != nil {
		t.Fatal(err)
	}
	c.Restart(old, true)
	one, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Endpoint(old)}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	r, err := one.Get(ctx, "b") // linearizable: served once it caught up
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "2" {
		t.Fatalf("restarted member: get b = %v, %v", r, err)
	}
}

// TestProxyBlackhole: a client behind the proxies times out while they
// swallow traffic, and works again after Heal.
func TestProxyBlackhole(t *testing.T) {
	c := Start(t)
	ps, eps := c.Proxies()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	put := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := cli.Put(ctx, "k", "v")
		return err
	}
	if err := put(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		p.Blackhole(true)
	}
	if err := put(300 * time.Millisecond); err == nil {
		t.Fatal("put went through the blackholed proxies")
	}
	for _, p := range ps {
		p.Heal()
	}
	var last error
	for range 100 {
		if last = put(time.Second); last == nil {
			return
		}
	}
	t.Fatalf("no put after heal: %v", last)
}

// TestOneMember: WithMembers(1) starts a single member that serves
// writes and reads on its own.
func TestOneMember(t *testing.T) {
	c := Start(t, WithMembers(1))
	if eps := c.Endpoints(); len(eps) != 1 {
		t.Fatalf("endpoints %q, want one", eps)
	}
	cli, ctx := putA(t, c)
	if r, err := cli.Get(ctx, "a"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "1" {
		t.Fatalf("get a: %v %v, want 1", r, err)
	}
}

// putA opens a client on c's members (closed with the test) and writes
// a=1 through it; it returns the client and a context for the test's
// further requests.
func putA(t *testing.T, c *Cluster) (*clientv3.Client, context.Context) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if _, err := cli.Put(ctx, "a", "1"); err != nil {
		t.Fatal(err)
	}
	return cli, ctx
}
