package redlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// dataLossScenario is the double-grant setup of restartScenario with a
// data loss that keeps the server process: client A holds the key on nodes
// 0 and 1 only (node 2 is cut off from A), then lose() empties node 0
// without a restart. Client B (built with opts, restart guard = TTL) and a
// client D created after the loss (it meets node 0 for the first time)
// then try to acquire the key until A's validity is nearly over. It
// returns the first moment one of them got the lease while A was still
// valid (zero if none did) and whether a refusal named node 0 as not
// voting.
func dataLossScenario(t *testing.T, lose func(cl *redistest.Cluster), opts ...redlock.Option) (doubleAt time.Time, sawNotVoting bool) {
	t.Helper()
	return dataLossRun(t, dataLoss{lose: lose}, opts...)
}

// dataLoss is a data loss of node 0 for dataLossRun: prepare (optional)
// runs before A acquires the key, lose after; tweak (optional) adjusts
// client B once it is created.
type dataLoss struct {
	prepare, lose func(cl *redistest.Cluster)
	tweak         func(b *redlock.Client)
}

// dataLossRun is dataLossScenario with the steps of dl.
func dataLossRun(t *testing.T, dl dataLoss, opts ...redlock.Option) (doubleAt time.Time, sawNotVoting bool) {
	t.Helper()
	cl := start(t, 3)
	ttl := 3 * time.Second
	opts = append([]redlock.Option{redlock.WithRestartGuard(ttl), redlock.WithTimeout(testTimeout)}, opts...)
	b := newClient(t, cl.URLs(), opts...)
	if dl.tweak != nil {
		dl.tweak(b)
	}
	// B must see nodes 0 and 1 voting before the loss (fresh nodes do not
	// vote for a guard): then node 0 has been up longer than the guard.
	waitVoting(t, b, nil)
	if dl.prepare != nil {
		dl.prepare(cl)
		waitVoting(t, b, nil)
	}
	la := restartScenario(t, cl,
		func() { cl.Nodes[2].Proxy().Cut() },
		func() { dl.lose(cl) }, ttl)
	validUntil := la.ValidUntil()
	if got := lockKeys(t, cl.Nodes[0]); len(got) != 0 {
		t.Fatalf("node 0 still holds %v after the data loss", got)
	}
	var d *redlock.Client
	for i := 0; time.Now().Before(validUntil.Add(-100 * time.Millisecond)); i++ {
		c := b
		if i%2 == 1 {
			if d == nil {
				// D meets node 0 only now, after B's round re-created its
				// data marker.
				d = newClient(t, cl.URLs(), opts...)
			}
			c = d
		}
		l, err := c.Acquire(context.Background(), lease.Request{Key: la.Key(), TTL: ttl, Owner: "B"})
		if err == nil {
			now := time.Now()
			_ = l.Release(context.Background())
			if now.Before(validUntil) {
				return now, sawNotVoting
			}
			break
		}
		refused(t, err, lease.ErrHeld)
		for _, ne := range nodeErrors(err) {
			if errors.Is(ne, lease.ErrRestarted) {
				if ne.Node != b.Servers()[0] {
					t.Errorf("node %s not voting; only node 0 lost its data", ne.Node)
				}
				sawNotVoting = true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Time{}, sawNotVoting
}

// replicaOfEmpty demotes node 0 to a replica of a fresh, empty server and
// promotes it again: the same process and run_id, an empty dataset.
func replicaOfEmpty(t *testing.T) func(cl *redistest.Cluster) {
	// Without the diskless sync's default 5 s delay the sync takes
	// milliseconds, well inside A's validity.
	empty := start(t, 1, redistest.WithArgs("--repl-diskless-sync-delay", "0")).Nodes[0]
	return func(cl *redistest.Cluster) {
		cl.Nodes[0].ReplicaOf(empty)
		cl.Nodes[0].Promote()
	}
}

// TestReplicaOfEmptyNotVoting: a master that was demoted, synchronised
// from an empty server and promoted again keeps its run_id but lost its
// leases; clients that knew it must not count its grants for the guard.
func TestReplicaOfEmptyNotVoting(t *testing.T) {
	t.Parallel()
	at, saw := dataLossScenario(t, replicaOfEmpty(t))
	if !at.IsZero() {
		t.Fatal("double grant: a client acquired the key while A held it, counting the re-promoted node's vote")
	}
	if !saw {
		t.Error("no refusal named the re-promoted node as not voting (ErrRestarted)")
	}
}

// TestReplicaOfEmptyWithoutDetection is the negative control: with
// restart detection off the same scenario gives B the lease while A holds
// it.
func TestReplicaOfEmptyWithoutDetection(t *testing.T) {
	t.Parallel()
	at, _ := dataLossScenario(t, replicaOfEmpty(t), redlock.WithoutRestartDetection())
	if at.IsZero() {
		t.Fatal("negative control did not show the double grant")
	}
}

// TestFlushAllNotVoting: FLUSHALL empties a node without restarting it (the
// run_id and uptime stay); both a client that knew the node and one that
// meets it for the first time after the flush keep it from voting.
func TestFlushAllNotVoting(t *testing.T) {
	t.Parallel()
	at, saw := dataLossScenario(t, func(cl *redistest.Cluster) { cl.Nodes[0].FlushAll() })
	if !at.IsZero() {
		t.Fatal("double grant: a client acquired the key while A held it, counting the flushed node's vote")
	}
	if !saw {
		t.Error("no refusal named the flushed node as not voting (ErrRestarted)")
	}
}

// TestFlushAllWithoutDetection is the negative control of
// TestFlushAllNotVoting.
func TestFlushAllWithoutDetection(t *testing.T) {
	t.Parallel()
	at, _ := dataLossScenario(t, func(cl *redistest.Cluster) { cl.Nodes[0].FlushAll() }, redlock.WithoutRestartDetection())
	if at.IsZero() {
		t.Fatal("negative control did not show the double grant")
	}
}

// completedTickScenario completes epoch e (EpochTime tick) on all three
// nodes, restarts nodes 0 and 1 empty and returns a fresh client (a
// restarted daemon) on the proxied URLs that sees every node voting by the
// restart guard, with node 2, the only one that kept the completion mark,
// slower than the others, so that nodes 0 and 1 answer first.
func completedTickScenario(t *testing.T) (c *redlock.Client, req lease.Request, cl *redistest.Cluster) {
	t.Helper()
	cl = start(t, 3)
	c1 := votingClient(t, cl.ProxiedURLs())
	tick := time.Now() // the nodes have voted for the guard already
	req = lease.Request{Key: key(t), TTL: 5 * time.Second, Epoch: tick.UnixMilli(), EpochTime: tick, Owner: "first"}
	l := mustAcquire(t, c1, req)
	if err := l.Complete(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	for i, nd := range cl.Nodes {
		if got := leaseField(t, nd, req.Key, "e"); got == "" {
			t.Fatalf("node %d has no completed epoch after Complete", i)
		}
	}
	cl.Nodes[0].Restart()
	cl.Nodes[1].Restart()
	c = votingClient(t, cl.ProxiedURLs())
	cl.Nodes[2].Proxy().SetDelay(100 * time.Millisecond)
	return c, req, cl
}

// TestCompletedTickNotRerunAfterMajorityRestart: a tick completed on all
// three nodes is not run again after two of them restarted empty, although
// they vote again by the restart guard: their data is younger than the
// tick, so they do not vote for it, and the third node's mark refuses it.
// With the third node unreachable the tick cannot be taken at all (the
// liveness cost), and the refusal says why.
func TestCompletedTickNotRerunAfterMajorityRestart(t *testing.T) {
	t.Parallel()
	c, req, cl := completedTickScenario(t)
	req.Owner = "second"
	_, err := c.Acquire(ctxT(t, 10*time.Second), req)
	refused(t, err, lease.ErrEpochDone)
	restarted := slices.Sorted(slices.Values(c.Servers()[:2]))
	if names := youngNodes(err); !slices.Equal(names, restarted) {
		t.Errorf("nodes not voting for the epoch: %v, want the two restarted ones %v (err: %v)", names, restarted, err)
	}
	cl.Nodes[2].Proxy().Cut()
	_, err = c.Acquire(ctxT(t, 10*time.Second), req)
	refused(t, err, lease.ErrNoQuorum)
	if names := youngNodes(err); len(names) != 2 {
		t.Errorf("refusal without the marked node names %v as too young, want both restarted nodes: %v", names, err)
	}
	// A later tick is not affected once the restarted nodes' data is older
	// than it by the guard.
	later := time.Now()
	l := mustAcquire(t, c, lease.Request{Key: req.Key, TTL: time.Second, Epoch: later.UnixMilli(), EpochTime: later})
	_ = l.Release(context.Background())
}

// TestCompletedTickRerunWithoutEpochTime is the negative control: without
// EpochTime the two restarted nodes vote for the old epoch and, answering
// before the node with the mark, win it a second time.
func TestCompletedTickRerunWithoutEpochTime(t *testing.T) {
	t.Parallel()
	c, req, _ := completedTickScenario(t)
	req.Owner, req.EpochTime = "second", time.Time{}
	l, err := c.Acquire(ctxT(t, 10*time.Second), req)
	if err != nil {
		t.Fatalf("negative control did not rerun the completed tick: %v", err)
	}
	_ = l.Release(context.Background())
}

// TestEpochMarkOnAnyNodeRefuses: one node's completion mark refuses the
// epoch even when a quorum of others (which never got the mark) would
// grant it, as long as its answer comes before the quorum's.
func TestEpochMarkOnAnyNodeRefuses(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.ProxiedURLs())
	k := key(t)
	setLeaseField(t, cl.Nodes[2], k, "e", 5)
	cl.Nodes[0].Proxy().SetDelay(100 * time.Millisecond)
	cl.Nodes[1].Proxy().SetDelay(100 * time.Millisecond)
	_, err := c.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: k, TTL: time.Second, Epoch: 5})
	re := refused(t, err, lease.ErrEpochDone)
	if re.DoneEpoch != 5 {
		t.Errorf("DoneEpoch = %d, want 5", re.DoneEpoch)
	}
	if !waitFor(5*time.Second, func() bool { return len(lockKeys(t, cl.Nodes[0])) == 0 }) {
		t.Errorf("refused attempt left %v behind on node 0", lockKeys(t, cl.Nodes[0]))
	}
	// A later epoch is granted by all three.
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: time.Second, Epoch: 6})
	_ = l.Release(context.Background())
}

// youngNodes returns the sorted names of the nodes whose grant did not
// count because their data is younger than the epoch.
func youngNodes(err error) []string {
	var names []string
	for _, ne := range nodeErrors(err) {
		if errors.Is(ne, lease.ErrDataYounger) && !slices.Contains(names, ne.Node) {
			names = append(names, ne.Node)
		}
	}
	slices.Sort(names)
	return names
}

// failback makes node 0 fail back from its own former replica: a server
// Y replicates node 0 (so Y has node 0's data marker) and is promoted
// before A acquires the key; after that node 0 is made a replica of Y
// (a full sync: Y's copy, the same marker, without A's lock) and promoted
// again. Node 0 keeps its run_id and its clients' connections; only its
// master_replid changes.
func failback(t *testing.T) dataLoss {
	y := start(t, 1, redistest.WithArgs("--repl-diskless-sync-delay", "0")).Nodes[0]
	return dataLoss{
		prepare: func(cl *redistest.Cluster) {
			y.ReplicaOf(cl.Nodes[0])
			y.Promote()
		},
		lose: func(cl *redistest.Cluster) {
			cl.Nodes[0].ReplicaOf(y)
			cl.Nodes[0].Promote()
		},
	}
}

// TestFailbackFromFormerReplicaNotVoting: a client whose connections to
// node 0 stayed open across its failback sees the new master_replid in
// the marker check of its next round (the same atomic step as the grant)
// and does not count node 0's vote, although the marker and run_id are
// unchanged.
func TestFailbackFromFormerReplicaNotVoting(t *testing.T) {
	t.Parallel()
	at, saw := dataLossRun(t, failback(t))
	if !at.IsZero() {
		t.Fatal("double grant: a client acquired the key while A held it, counting the failed-back node's vote")
	}
	if !saw {
		t.Error("no refusal named the failed-back node as not voting (ErrRestarted)")
	}
}

// TestFailbackWithoutReplIDCheck is the negative control: with the
// marker check's master_replid ignored, client B counts node 0's vote and
// takes the key while A holds it.
func TestFailbackWithoutReplIDCheck(t *testing.T) {
	t.Parallel()
	dl := failback(t)
	dl.tweak = redlock.IgnoreReplIDChange
	at, _ := dataLossRun(t, dl)
	if at.IsZero() {
		t.Fatal("negative control did not show the double grant")
	}
}

// failbackEpoch completes epoch e (EpochTime: the tick) through client A
// on nodes 0 and 1 only (node 2 is cut off from A), fails node 0 back
// from its former replica (losing the mark there) and, with node 1
// stopped (SIGSTOP), lets client B, whose connections to node 0 stayed
// open, try e again. It returns node 0's name and B's error (nil: e was
// won again).
func failbackEpoch(t *testing.T, tweak func(*redlock.Client)) (string, error) {
	t.Helper()
	dl := failback(t)
	cl := start(t, 3)
	ttl := 2 * time.Second
	b := newClient(t, cl.URLs(), redlock.WithRestartGuard(ttl), redlock.WithTimeout(testTimeout))
	if tweak != nil {
		tweak(b)
	}
	waitVoting(t, b, nil)
	dl.prepare(cl)
	waitVoting(t, b, nil)
	a := newClient(t, cl.ProxiedURLs(), redlock.WithoutRestartDetection(), redlock.WithTimeout(testTimeout))
	cl.Nodes[2].Proxy().Cut()
	tick := time.Now()
	req := lease.Request{Key: key(t), TTL: ttl, Epoch: tick.UnixMilli(), EpochTime: tick, Owner: "A"}
	la, err := a.Acquire(ctxT(t, 10*time.Second), req)
	if err != nil {
		t.Fatalf("A: %v", err)
	}
	if err := la.Complete(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("A complete: %v", err)
	}
	if got := leaseField(t, cl.Nodes[2], req.Key, "e"); got != "" {
		t.Fatalf("node 2 was cut off from A but has the mark %v", got)
	}
	dl.lose(cl)
	if got := leaseField(t, cl.Nodes[0], req.Key, "e"); got != "" {
		t.Fatalf("node 0 kept the mark %v across the failback", got)
	}
	cl.Nodes[1].Pause()
	defer cl.Nodes[1].Resume()
	req.Owner = "B"
	lb, err := b.Acquire(ctxT(t, 10*time.Second), req)
	if err == nil {
		_ = lb.Release(context.Background())
	}
	return b.Servers()[0], err
}

// TestFailbackCompletedEpochNotRewon: the completed epoch is not won
// again through the failed-back node, whose data (a copy older than the
// mark) is younger than the tick by the marker check's master_replid.
func TestFailbackCompletedEpochNotRewon(t *testing.T) {
	t.Parallel()
	node0, err := failbackEpoch(t, nil)
	refused(t, err, lease.ErrNoQuorum)
	named := false
	for _, ne := range nodeErrors(err) {
		named = named || ne.Node == node0 && (errors.Is(ne, lease.ErrDataYounger) || errors.Is(ne, lease.ErrRestarted))
	}
	if !named {
		t.Errorf("the refusal does not name the failed-back node %s as not voting: %v", node0, err)
	}
}

// TestFailbackEpochWithoutReplIDCheck is the negative control: with the
// master_replid ignored, nodes 0 and 2 win the completed epoch again.
func TestFailbackEpochWithoutReplIDCheck(t *testing.T) {
	t.Parallel()
	if _, err := failbackEpoch(t, redlock.IgnoreReplIDChange); err != nil {
		t.Fatalf("negative control did not win the completed epoch again: %v", err)
	}
}
