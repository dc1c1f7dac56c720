package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// storeClient opens a client on urls for the store tests and waits until
// every node votes (a read counts only nodes whose data is older than the
// restart guard).
func storeClient(t *testing.T, urls []string) *redlock.Client {
	t.Helper()
	return votingClient(t, urls)
}

// TestEntryVersionsExact: versions are compared exactly on the server,
// also where float64 cannot tell them apart (unix nanoseconds one apart)
// and at the ends of int64. (store_internal_test.go has the negative
// control: the same comparison done on Lua numbers loses these.)
func TestEntryVersionsExact(t *testing.T) {
	t.Parallel()
	cl := start(t, 1)
	c := storeClient(t, cl.URLs())
	k := key(t)
	ctx := ctxT(t, 30*time.Second)
	base := int64(1_763_936_000_123_456_789)
	for _, c2 := range []struct {
		name string
		vers []int64 // put in order; each must replace the one before
	}{
		{"nanos", []int64{base, base + 1, base + 2}},
		{"extremes", []int64{-1 << 63, -(1 << 62), -1, 0, 1, 1<<63 - 2, 1<<63 - 1}},
	} {
		for i, v := range c2.vers {
			if err := c.PutEntry(ctx, k, redlock.Entry{Name: c2.name, Version: v, Data: []byte(fmt.Sprint(v))}); err != nil {
				t.Fatal(err)
			}
			e, ok, err := c.GetEntry(ctx, k, c2.name)
			if err != nil || !ok || e.Version != v || string(e.Data) != fmt.Sprint(v) {
				t.Fatalf("%s: after Put v%d: Get = %+v, %v, %v; want v%d", c2.name, v, e, ok, err, v)
			}
			if i == 0 {
				continue
			}
			// The one before (lower by as little as 1) must not come back.
			prev := c2.vers[i-1]
			if err := c.PutEntry(ctx, k, redlock.Entry{Name: c2.name, Version: prev, Data: []byte("late")}); err != nil {
				t.Fatal(err)
			}
			if e, _, _ := c.GetEntry(ctx, k, c2.name); e.Version != v {
				t.Fatalf("%s: a late Put of v%d replaced v%d", c2.name, prev, v)
			}
		}
	}
}

// TestEntryTTLRounding: a TTL is kept to the millisecond, rounded up
// (never shorter than asked), up to the largest time.Duration.
func TestEntryTTLRounding(t *testing.T) {
	t.Parallel()
	cl := start(t, 1)
	c := storeClient(t, cl.URLs())
	k := key(t)
	ctx := ctxT(t, 30*time.Second)
	v := int64(0)
	for _, tc := range []struct{ ttl, want time.Duration }{
		{time.Hour + time.Nanosecond, time.Hour + time.Millisecond},
		{time.Hour + 1500*time.Microsecond, time.Hour + 2*time.Millisecond},
		{time.Hour, time.Hour},
		{math.MaxInt64, math.MaxInt64},
	} {
		v++
		if err := c.PutEntry(ctx, k, redlock.Entry{Name: "e", Version: v, TTL: tc.ttl}); err != nil {
			t.Fatalf("Put with TTL %s: %v", tc.ttl, err)
		}
		e, ok, err := c.GetEntry(ctx, k, "e")
		if err != nil || !ok || e.TTL != tc.want {
			t.Errorf("Put with TTL %s: Get = %+v, %v, %v; want TTL %s", tc.ttl, e, ok, err, tc.want)
		}
	}
}

// TestEntriesMemoryBounded: expired entries leave Redis memory. A space
// whose entries all have a TTL disappears by itself after the last one
// expires (no call needed); in a mixed space, the next Put deletes the
// expired entries and their index.
func TestEntriesMemoryBounded(t *testing.T) {
	t.Parallel()
	cl := start(t, 1)
	c := storeClient(t, cl.URLs())
	rdb := cl.Nodes[0].Client()
	ctx := ctxT(t, 60*time.Second)
	beats, mixed := key(t, "beats"), key(t, "mixed")
	const ttl = 3 * time.Second // longer than 50 Puts take on a loaded machine
	for i := range 50 {
		for _, k := range []string{beats, mixed} {
			if err := c.PutEntry(ctx, k, redlock.Entry{Name: fmt.Sprintf("h%02d", i), Version: 1, Data: []byte("x"), TTL: ttl}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Every entry with a TTL was written by now (on the server's clock,
	// which is this machine's): each has expired a TTL from now.
	allExpire := time.Now().Add(ttl)
	if err := c.PutEntry(ctx, mixed, redlock.Entry{Name: "kept", Version: 1}); err != nil {
		t.Fatal(err)
	}
	if n := rdb.HLen(ctx, "{"+beats+"}").Val(); n != 50 {
		t.Fatalf("heartbeat space holds %d fields, want 50", n)
	}
	// The heartbeat space goes on its own.
	deadline := time.Now().Add(20 * time.Second)
	for rdb.Exists(ctx, "{"+beats+"}", "{"+beats+"}:exp").Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a space of expired entries is still in Redis 20 s after its TTL %s: %v", ttl, cl.Nodes[0].Keys("*"+beats+"*"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The mixed one: the next Put sweeps. (The heartbeat space can go
	// before the mixed space's last entry expires: that one was written
	// after the heartbeat space's last.)
	time.Sleep(time.Until(allExpire))
	if err := c.PutEntry(ctx, mixed, redlock.Entry{Name: "kept", Version: 2}); err != nil {
		t.Fatal(err)
	}
	if n, x := rdb.HLen(ctx, "{"+mixed+"}").Val(), rdb.Exists(ctx, "{"+mixed+"}:exp").Val(); n != 1 || x != 0 {
		t.Errorf("after expiry and a Put: the mixed space holds %d fields (want 1) and its expiry index exists: %v", n, x == 1)
	}
	if pttl := rdb.PTTL(ctx, "{"+mixed+"}").Val(); pttl >= 0 {
		t.Errorf("a space with an entry without TTL expires in %s", pttl)
	}
	l, err := c.ListEntries(ctx, mixed)
	if err != nil || len(l) != 1 || l[0].Name != "kept" || l[0].Version != 2 {
		t.Errorf("List = %+v, %v; want only kept v2", l, err)
	}
}

// TestLogMemoryBounded: whatever is appended, each node holds at most
// limit records (IDs and data alike), a repeated ID is stored once, and a
// smaller limit trims at once.
func TestLogMemoryBounded(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := storeClient(t, cl.URLs())
	ctx := ctxT(t, 60*time.Second)
	k := key(t)
	at := time.Now().Truncate(time.Millisecond)
	for i := range 120 {
		rec := redlock.Record{ID: fmt.Sprintf("r%03d", i), At: at.Add(time.Duration(i%40) * time.Second), Data: []byte("d")}
		for range 2 { // a retried Append
			if err := c.AppendLog(ctx, k, rec, 20); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(limit int64) {
		t.Helper()
		// A write returns at quorum: wait for the third node's lane.
		deadline := time.Now().Add(10 * time.Second)
		for _, n := range cl.Nodes {
			for {
				z, h := n.Client().ZCard(ctx, "{"+k+"}").Val(), n.Client().HLen(ctx, "{"+k+"}:data").Val()
				if z == limit && h == limit+1 { // + the limit field
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s holds %d IDs and %d data fields, want %d and %d", n.Addr(), z, h, limit, limit+1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	check(20)
	l, err := c.ReadLog(ctx, k, 1000)
	if err != nil || len(l) != 20 {
		t.Fatalf("ReadLog = %d records, %v; want 20", len(l), err)
	}
	// The newest 20 by At, ties by ID: At slots 39 down, three IDs each
	// (s, s+40, s+80), the greatest ID first.
	for i, r := range l {
		slot := 39 - i/3
		want := fmt.Sprintf("r%03d", slot+40*(2-i%3))
		if r.ID != want || !r.At.Equal(at.Add(time.Duration(slot)*time.Second)) {
			t.Fatalf("ReadLog[%d] = %s at %s, want %s at slot %d", i, r.ID, r.At, want, slot)
		}
	}
	if err := c.AppendLog(ctx, k, redlock.Record{ID: "last", At: at.Add(time.Hour)}, 5); err != nil {
		t.Fatal(err)
	}
	check(5)
}

// TestStoreMergesDivergedNodes: node 2 misses a Put and an Append (a
// client of nodes 0 and 1 alone makes them), then node 0 is cut: the
// quorum that answers (1 and 2) disagrees, and the reads must return the
// newest version and every record. The control reads node 2 alone and
// finds the old state, so the merge is what made the reads right. With
// two of three cut, every call fails naming both.
//
// (A client of all three with node 2's link cut would send node 2 the
// writes anyway once the link healed, if its request lane got to them
// late, as on a loaded machine: a write goes to every node.)
func TestStoreMergesDivergedNodes(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := storeClient(t, cl.ProxiedURLs())
	ctx := ctxT(t, 60*time.Second)
	k, lg := key(t, "entries"), key(t, "log")
	at := time.Now().Truncate(time.Millisecond)
	// Nodes 0 and 1 only, for the writes node 2 must miss.
	w := newClient(t, cl.ProxiedURLs()[:2], redlock.WithTimeout(testTimeout))
	writer := c
	put := func(v int64) {
		t.Helper()
		if err := writer.PutEntry(ctx, k, redlock.Entry{Name: "e", Version: v, Data: []byte(fmt.Sprint("v", v))}); err != nil {
			t.Fatalf("Put v%d: %v", v, err)
		}
	}
	appendRec := func(id string, d time.Duration) {
		t.Helper()
		if err := writer.AppendLog(ctx, lg, redlock.Record{ID: id, At: at.Add(d)}, 10); err != nil {
			t.Fatalf("Append %s: %v", id, err)
		}
	}
	put(1)
	appendRec("a", 0)
	waitWritten(t, cl, k, lg)
	writer = w
	put(2)
	appendRec("b", time.Second)
	cl.Nodes[0].Proxy().Cut()

	e, ok, err := c.GetEntry(ctx, k, "e")
	if err != nil || !ok || e.Version != 2 {
		t.Errorf("Get with node 0 cut: %+v, %v, %v; want v2 (on node 1 only)", e, ok, err)
	}
	if l, err := c.ListEntries(ctx, k); err != nil || len(l) != 1 || l[0].Version != 2 {
		t.Errorf("List with node 0 cut: %+v, %v; want v2", l, err)
	}
	l, err := c.ReadLog(ctx, lg, 10)
	if err != nil || len(l) != 2 || l[0].ID != "b" || l[1].ID != "a" {
		t.Errorf("ReadLog with node 0 cut: %+v, %v; want b, a", l, err)
	}
	// Control: node 2 by itself has the old state.
	alone := storeClient(t, cl.URLs()[2:])
	if e, _, err := alone.GetEntry(ctx, k, "e"); err != nil || e.Version != 1 {
		t.Fatalf("control: node 2 alone has %+v, %v; want v1 (it missed v2)", e, err)
	}
	if l, err := alone.ReadLog(ctx, lg, 10); err != nil || len(l) != 1 {
		t.Fatalf("control: node 2 alone has %+v, %v; want only a", l, err)
	}

	// Two of three cut: no quorum, and the error names both.
	cl.Nodes[1].Proxy().Cut()
	dead := []string{cl.ProxiedURLs()[0], cl.ProxiedURLs()[1]}
	_, _, gerr := c.GetEntry(ctx, k, "e")
	_, rerr := c.ReadLog(ctx, lg, 10)
	for name, err := range map[string]error{
		"Put":    c.PutEntry(ctx, k, redlock.Entry{Name: "e", Version: 3}),
		"Get":    gerr,
		"Append": c.AppendLog(ctx, lg, redlock.Record{ID: "c", At: at}, 10),
		"Log":    rerr,
	} {
		if !errors.Is(err, lease.ErrNoQuorum) {
			t.Errorf("%s with 2 of 3 nodes cut: %v, want ErrNoQuorum", name, err)
			continue
		}
		var ne *lease.NodeError
		if !errors.As(err, &ne) {
			t.Errorf("%s: no *NodeError in %v", name, err)
		}
		for _, d := range dead {
			if !strings.Contains(err.Error(), d) {
				t.Errorf("%s: error does not name cut node %s: %v", name, d, err)
			}
		}
	}
}

// waitWritten waits until every node has the entry space k and the log lg
// (a write returns at quorum; the last node follows in its lane).
func waitWritten(t *testing.T, cl *redistest.Cluster, k, lg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range cl.Nodes {
		for n.Client().Exists(context.Background(), "{"+k+"}", "{"+lg+"}").Val() != 2 {
			if time.Now().After(deadline) {
				t.Fatalf("%s never got the first writes", n.Addr())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestStoreScriptFlush: after SCRIPT FLUSH on every node (connections
// stay open, so nothing reloads the scripts on connect), the lanes reload
// them on NOSCRIPT and every store call works at once.
func TestStoreScriptFlush(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := storeClient(t, cl.URLs())
	ctx := ctxT(t, 60*time.Second)
	k, lg := key(t, "entries"), key(t, "log")
	for round := range 3 {
		for _, n := range cl.Nodes {
			if err := n.Client().ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		v := int64(round + 1)
		if err := c.PutEntry(ctx, k, redlock.Entry{Name: "e", Version: v}); err != nil {
			t.Fatalf("round %d: Put after SCRIPT FLUSH: %v", round, err)
		}
		if e, ok, err := c.GetEntry(ctx, k, "e"); err != nil || !ok || e.Version != v {
			t.Fatalf("round %d: Get after SCRIPT FLUSH: %+v, %v, %v", round, e, ok, err)
		}
		for _, n := range cl.Nodes {
			if err := n.Client().ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.AppendLog(ctx, lg, redlock.Record{ID: fmt.Sprint("r", round), At: time.Now()}, 5); err != nil {
			t.Fatalf("round %d: Append after SCRIPT FLUSH: %v", round, err)
		}
		if l, err := c.ReadLog(ctx, lg, 5); err != nil || len(l) != round+1 {
			t.Fatalf("round %d: ReadLog after SCRIPT FLUSH: %d records, %v", round, len(l), err)
		}
	}
}
