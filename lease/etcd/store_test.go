package etcd_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasecron/leasecron/internal/testkit/etcdtest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/etcd"
)

// leaseCount is how many etcd leases the cluster holds.
func leaseCount(t *testing.T, cli *clientv3.Client) int {
	t.Helper()
	r, err := cli.Leases(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatalf("list leases: %v", err)
	}
	return len(r.Leases)
}

// TestEntryLeasesRecycled: a heartbeat put again and again holds one etcd
// lease, whether its TTL stays (the lease is renewed) or changes (a new
// lease, the old one revoked); an entry that drops its TTL keeps no lease
// and survives the revocation of the old one. Negative control: with the
// recycling switched off, the same Puts leave a lease each.
func TestEntryLeasesRecycled(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	cli := c.Client("", "")
	const n = 40
	// Long TTLs, so that a leaked lease is still there when counted.
	ttls := []time.Duration{30 * time.Second, 31 * time.Second}
	run := func(prefix string, unsafe bool) int {
		b, err := etcd.Open(context.Background(), etcd.Config{Endpoints: c.Endpoints(), Prefix: prefix, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if unsafe {
			etcd.SetUnsafeNoLeaseRecycle(b)
		}
		ctx := ctxT(t, 60*time.Second)
		for i := range n {
			// Same TTL for the first half (renewed), alternating after.
			ttl := ttls[0]
			if i >= n/2 {
				ttl = ttls[i%2]
			}
			if err := b.Put(ctx, lease.SpaceHosts, lease.Entry{Name: "host-a", Version: int64(i + 1), Data: []byte("up"), TTL: ttl}); err != nil {
				t.Fatalf("Put %d: %v", i, err)
			}
		}
		e, ok, err := b.Get(ctx, lease.SpaceHosts, "host-a")
		if err != nil || !ok || e.Version != n || e.TTL != ttls[(n-1)%2] {
			t.Fatalf("Get after %d Puts: %+v, %v, %v", n, e, ok, err)
		}
		_ = b.Close() // waits for the background revokes
		return leaseCount(t, cli)
	}
	if got := run("/safe/", false); got != 1 {
		t.Errorf("%d Puts of one entry with a TTL left %d etcd leases, want 1", n, got)
	}
	if got := run("/unsafe/", true); got < n {
		t.Errorf("negative control: without recycling, %d Puts left only %d leases (more than %d expected): the count proves nothing", n, got, n)
	}

	// TTL then none: the entry stays after its old lease's TTL; none then
	// TTL: it goes.
	b := open(t, c.Endpoints(), "/drop/")
	ctx := ctxT(t, 60*time.Second)
	put := func(name string, v int64, ttl time.Duration) {
		t.Helper()
		if err := b.Put(ctx, "s", lease.Entry{Name: name, Version: v, TTL: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	put("kept", 1, 2*time.Second)
	put("kept", 2, 0)
	put("goes", 1, 0)
	put("goes", 2, 2*time.Second)
	time.Sleep(4 * time.Second)
	l, err := b.List(ctx, "s")
	if err != nil || len(l) != 1 || l[0].Name != "kept" || l[0].Version != 2 || l[0].TTL != 0 {
		t.Fatalf("4s after the Puts: List = %+v, %v; want only kept v2 without TTL", l, err)
	}
}

// TestPutConcurrentVersions: clients putting one entry concurrently, each
// its own versions in random order, leave the highest version — the
// compare-and-swap never lets a lower version overwrite a higher one.
func TestPutConcurrentVersions(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	const clients, each = 6, 30
	var bs []*etcd.Backend
	for range clients {
		bs = append(bs, openT(t, c.Endpoints(), "/cas/", 2*time.Second))
	}
	ctx := ctxT(t, 120*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for g, b := range bs {
		wg.Go(func() {
			vs := make([]int64, each)
			for i := range vs {
				vs[i] = int64(i*clients + g + 1) // disjoint, up to clients*each
			}
			rand.Shuffle(len(vs), func(i, j int) { vs[i], vs[j] = vs[j], vs[i] })
			for _, v := range vs {
				ttl := time.Duration(0)
				if v%3 == 0 {
					ttl = 30 * time.Second
				}
				if err := b.Put(ctx, "retry", lease.Entry{Name: "job", Version: v, Data: []byte(fmt.Sprint(v)), TTL: ttl}); err != nil {
					errs <- err
					return
				}
				// Never below what this client wrote.
				e, ok, err := b.Get(ctx, "retry", "job")
				if err != nil || !ok || e.Version < v || string(e.Data) != fmt.Sprint(e.Version) {
					errs <- fmt.Errorf("after Put v%d: Get = %+v, %v, %v", v, e, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e, ok, err := bs[0].Get(ctx, "retry", "job")
	if err != nil || !ok || e.Version != clients*each {
		t.Fatalf("final Get = %+v, %v, %v; want version %d", e, ok, err, clients*each)
	}
}

// TestLogKeysBounded: after many Appends the log holds exactly limit
// record keys and limit ID keys (nothing else grows); an ID already in
// the log is not added again even with another At; a trimmed record
// appended again is trimmed again; records before 1970 sort too.
func TestLogKeysBounded(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	cli := c.Client("", "")
	b := open(t, c.Endpoints(), "/logs/")
	ctx := ctxT(t, 120*time.Second)
	const limit = 20
	base := time.UnixMilli(-60_000) // the first minute of records is before 1970
	for i := range 150 {
		if err := b.Append(ctx, "job", lease.Record{ID: fmt.Sprintf("r%03d", i), At: base.Add(time.Duration(i) * time.Second), Data: []byte{byte(i)}}, limit); err != nil {
			t.Fatal(err)
		}
	}
	count := func(prefix string) int64 {
		r, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return r.Count
	}
	if n, ids := count("/logs/log/job/"), count("/logs/logid/job/"); n != limit || ids != limit {
		t.Errorf("after 150 Appends with limit %d: %d record keys and %d ID keys, want %d each", limit, n, ids, limit)
	}
	// r149 again with a newer At: not added. r000 (trimmed) again: dropped.
	for _, r := range []lease.Record{{ID: "r149", At: base.Add(time.Hour)}, {ID: "r000", At: base}} {
		if err := b.Append(ctx, "job", r, limit); err != nil {
			t.Fatal(err)
		}
	}
	l, err := b.Log(ctx, "job", lease.MaxLogLimit)
	if err != nil || len(l) != limit {
		t.Fatalf("Log: %d records, %v", len(l), err)
	}
	for k, r := range l {
		i := 149 - k
		if r.ID != fmt.Sprintf("r%03d", i) || !r.At.Equal(base.Add(time.Duration(i)*time.Second)) || len(r.Data) != 1 || r.Data[0] != byte(i) {
			t.Fatalf("Log[%d] = %+v, want r%03d", k, r, i)
		}
	}
	if n := count("/logs/"); n != 2*limit {
		t.Errorf("%d keys under the prefix, want %d (a record key and an ID key per record)", n, 2*limit)
	}

	// Records before 1970 are ordered too.
	for i, at := range []time.Time{time.UnixMilli(5), time.UnixMilli(-5), time.UnixMilli(0), time.UnixMilli(-3000)} {
		if err := b.Append(ctx, "old", lease.Record{ID: fmt.Sprint("o", i), At: at}, 3); err != nil {
			t.Fatal(err)
		}
	}
	l, err = b.Log(ctx, "old", 10)
	var got []int64
	for _, r := range l {
		got = append(got, r.At.UnixMilli())
	}
	if err != nil || fmt.Sprint(got) != "[5 0 -5]" {
		t.Errorf("Log around 1970 = %v, %v; want [5 0 -5]", got, err)
	}
}

// TestStoreLeaderFaults: with the leader killed, then (after a restart)
// with the new leader paused by SIGSTOP, Put and Append still succeed
// (their requests are sent again across the election) and another
// client reads every acknowledged write back at once; no lower version
// replaces a higher one.
func TestStoreLeaderFaults(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	a := openT(t, c.Endpoints(), "/lf/", 400*time.Millisecond)
	b := openT(t, c.Endpoints(), "/lf/", 400*time.Millisecond)
	ctx := ctxT(t, 120*time.Second)
	at := time.Now().Truncate(time.Millisecond)
	var v int64
	step := func(fault string) {
		t.Helper()
		v++
		if err := a.Put(ctx, lease.SpacePause, lease.Entry{Name: "all", Version: v, Data: []byte(fault)}); err != nil {
			t.Fatalf("%s: Put v%d: %v", fault, v, err)
		}
		if err := a.Put(ctx, lease.SpacePause, lease.Entry{Name: "all", Version: v - 1, Data: []byte("late")}); err != nil {
			t.Fatalf("%s: Put of an older version: %v", fault, err)
		}
		if err := a.Append(ctx, "job", lease.Record{ID: fault, At: at.Add(time.Duration(v) * time.Second), Data: []byte(fault)}, 5); err != nil {
			t.Fatalf("%s: Append: %v", fault, err)
		}
		e, ok, err := b.Get(ctx, lease.SpacePause, "all")
		if err != nil || !ok || e.Version != v || string(e.Data) != fault {
			t.Fatalf("%s: Get from another client = %+v, %v, %v; want v%d %q", fault, e, ok, err, v, fault)
		}
		l, err := b.Log(ctx, "job", 5)
		if err != nil || len(l) != int(v) || l[0].ID != fault {
			t.Fatalf("%s: Log from another client = %+v, %v; want %d records, %s first", fault, l, err, v, fault)
		}
	}
	step("steady")
	lead := c.Leader()
	c.Kill(lead)
	step("leader-killed")
	c.Restart(lead, true)
	lead = c.Leader()
	c.Pause(lead)
	step("leader-paused")
	c.Resume(lead)
	step("resumed")
}
