package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// TestReleaseRoundSkipsMarkerNextGrantSeesLoss: a round of releases only
// does not check the data marker (the node is flushed, the release leaves
// the marker missing), and the next acquisition still sees the data loss
// in its own round: the node does not vote for it.
func TestReleaseRoundSkipsMarkerNextGrantSeesLoss(t *testing.T) {
	t.Parallel()
	cl := start(t, 1)
	c := votingClient(t, cl.URLs())
	ctx := ctxT(t, 20*time.Second)
	k := key(t)
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: 10 * time.Second})
	cl.Nodes[0].FlushAll()
	_ = l.Release(ctx)
	if n := cl.Nodes[0].Client().Exists(context.Background(), markerKey).Val(); n != 0 {
		t.Errorf("the release round wrote the data marker: it checked it")
	}
	_, err := c.Acquire(ctx, lease.Request{Key: k, TTL: 10 * time.Second})
	refused(t, err, lease.ErrNoQuorum)
	found := false
	for _, ne := range nodeErrors(err) {
		found = found || errors.Is(ne.Err, lease.ErrRestarted)
	}
	if !found {
		t.Errorf("acquisition after the flush = %v, want the node not voting (ErrRestarted)", err)
	}
}
