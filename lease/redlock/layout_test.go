package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// markerKey is the data marker, whose third field is the layout of keys of
// the client that wrote it.
const markerKey = "leasecron:lease:birth"

// TestOtherLayoutRefused: a node whose data was written by a client that
// keeps leases in another layout of keys is refused, with an error naming
// the node and both layouts: when a connection is opened (Ping), in every
// round (the acquisition counts only the other nodes), and on a connection
// that stayed open when the node was emptied and the other client wrote
// first. The nodes of this layout keep working.
func TestOtherLayoutRefused(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	ctx := ctxT(t, 30*time.Second)
	// Node 2 was first used by a client of layout 1: its marker has two
	// fields (time and nonce).
	if err := cl.Nodes[2].Client().Set(ctx, markerKey, "1700000000000000 0123456789abcdef", 0).Err(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, cl.URLs(), redlock.WithRestartGuard(testGuard), redlock.WithTimeout(testTimeout))
	waitVoting(t, c, []int{0, 1})
	st := c.Health(ctx)
	if err := st[2].Err; !errors.Is(err, redlock.ErrOtherLayout) || !strings.Contains(err.Error(), "layout 1") {
		t.Errorf("Health of node 2 = %v, want ErrOtherLayout naming layout 1", err)
	}
	for _, s := range st[:2] {
		if s.Err != nil {
			t.Errorf("Health %s: %v", s.Server, s.Err)
		}
	}
	k := key(t)
	res := c.TryAcquireBatch(ctx, []lease.Request{{Key: k, TTL: 10 * time.Second}})[0]
	if res.Err != nil {
		t.Fatalf("acquire on the two nodes of this layout: %v", res.Err)
	}
	_ = res.Lease.Release(ctx)
	if got := lockKeys(t, cl.Nodes[2]); len(got) != 0 {
		t.Errorf("node 2 of another layout holds %v", got)
	}

	// Node 0 is emptied and a client of layout 3 writes first, while this
	// client's connection stays open: its next round is refused.
	cl.Nodes[0].FlushAll()
	if err := cl.Nodes[0].Client().Set(ctx, markerKey, "1700000000000000 0123456789abcdef 3", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := c.Acquire(ctx, lease.Request{Key: k, TTL: 10 * time.Second})
	refused(t, err, lease.ErrNoQuorum)
	var named bool
	for _, ne := range nodeErrors(err) {
		if ne.Node == c.Servers()[0] && errors.Is(ne.Err, redlock.ErrOtherLayout) && strings.Contains(ne.Err.Error(), "layout 3") {
			named = true
		}
	}
	if !named {
		t.Errorf("refusal %v does not name node 0 with ErrOtherLayout", err)
	}
}

// TestLayoutWrittenInMarker: a client writes its layout into the data
// marker of an empty node, and a client of the same layout uses the node.
func TestLayoutWrittenInMarker(t *testing.T) {
	t.Parallel()
	cl := start(t, 1)
	c := votingClient(t, cl.URLs())
	m, err := cl.Nodes[0].Client().Get(context.Background(), markerKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(m); len(f) != 3 || f[2] != "2" {
		t.Errorf("marker %q, want time, nonce and layout 2", m)
	}
	other := votingClient(t, cl.URLs())
	mustAcquire(t, other, lease.Request{Key: key(t), TTL: time.Second})
	_ = c
}
