package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// TestReleaseRoundSkipsMarkerNextGrantSeesLoss: a round of releases only
// does not check the data marker (the node is flushed, the release leaves
// the marker missing), and the next acquisition still sees the data loss
// in its own round: the node does not vote for it.
//
// A new connection checks the marker when it opens (birth.go), so the
// release must travel on a connection that was open before the flush; on
// a loaded machine the client may open one for it, and the scene is then
// played again (3 times at most).
func TestReleaseRoundSkipsMarkerNextGrantSeesLoss(t *testing.T) {
	t.Parallel()
	cl := start(t, 1)
	c := votingClient(t, cl.URLs())
	ctx := ctxT(t, 20*time.Second)
	n := cl.Nodes[0].Client()
	connections := func() string {
		info := n.Info(context.Background(), "stats").Val()
		_, v, _ := strings.Cut(info, "total_connections_received:")
		v, _, _ = strings.Cut(v, "\r\n")
		return v
	}
	k := key(t)
	for try := 1; ; try++ {
		l := mustAcquire(t, c, lease.Request{Key: k, TTL: 10 * time.Second})
		cl.Nodes[0].FlushAll()
		before := connections()
		_ = l.Release(ctx)
		if after := connections(); after != before {
			if try == 3 {
				t.Fatalf("the release opened a new connection 3 times (connections received %s -> %s)", before, after)
			}
			t.Logf("the release went on a new connection (connections received %s -> %s); again", before, after)
			continue
		}
		break
	}
	if n := n.Exists(context.Background(), markerKey).Val(); n != 0 {
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
