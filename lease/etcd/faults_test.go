package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasecron/leasecron/internal/testkit/etcdtest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/etcd"
)

// held is a lease kept by a Hold, with what its loss looked like.
type held struct {
	l    lease.Lease
	h    *lease.Hold
	lost chan struct{} // closed after doneAt/validAtDone are set
	// doneAt is when Done closed; validAtDone the validity then (the
	// final one: the Hold extends no more).
	doneAt, validAtDone time.Time
}

func hold(t *testing.T, b *etcd.Backend, key string) *held {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	l, err := b.Acquire(ctx, lease.Request{Key: key, TTL: testTTL, Owner: "A"})
	if err != nil {
		t.Fatal(err)
	}
	h := &held{l: l, h: lease.NewHold(l, b.Timeout()), lost: make(chan struct{})}
	go func() {
		<-h.h.Done()
		h.doneAt, h.validAtDone = time.Now(), l.ValidUntil()
		close(h.lost)
	}()
	t.Cleanup(func() { _ = h.h.Release(context.Background()) })
	return h
}

// isLost reports whether the Hold reported a loss (waiting for its record).
func (h *held) isLost() bool {
	select {
	case <-h.h.Done():
		<-h.lost
		return true
	default:
		return false
	}
}

// checkLossInTime fails unless Done closed before the validity ended and
// Err says ErrLost.
func (h *held) checkLossInTime(t *testing.T) {
	t.Helper()
	<-h.lost
	if !h.doneAt.Before(h.validAtDone) {
		t.Fatalf("Done closed %s after the validity ended", h.doneAt.Sub(h.validAtDone))
	}
	if !errors.Is(h.h.Err(), lease.ErrLost) {
		t.Fatalf("hold error: %v", h.h.Err())
	}
	t.Logf("loss reported %s before the validity ended", h.validAtDone.Sub(h.doneAt).Round(time.Millisecond))
}

// contend makes client b try key every 10 ms until it wins or d passes.
// It returns the start of the winning attempt (zero if none): the winner's
// validity window cannot begin earlier.
func contend(t *testing.T, b *etcd.Backend, key string, d time.Duration) (time.Time, lease.Lease) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		r := b.TryAcquireBatch(ctx, []lease.Request{{Key: key, TTL: testTTL, Owner: "B"}})[0]
		cancel()
		if r.Err == nil {
			return start, r.Lease
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}, nil
}

// checkNoOverlap is the interval check: B's window may start only after
// A's last validity ended, and only once A's Hold reported the loss.
func checkNoOverlap(t *testing.T, a *held, bStart time.Time) {
	t.Helper()
	if err := overlap(a, bStart); err != nil {
		t.Fatal(err)
	}
}

func overlap(a *held, bStart time.Time) error {
	if bStart.IsZero() {
		return nil
	}
	if !a.isLost() {
		return fmt.Errorf("B acquired at %s while A's Hold still holds (validity until %s)", bStart.Format(time.StampMilli), a.l.ValidUntil().Format(time.StampMilli))
	}
	if bStart.Before(a.validAtDone) {
		return fmt.Errorf("windows overlap: B's attempt started %s before A's validity ended", a.validAtDone.Sub(bStart).Round(time.Millisecond))
	}
	if bStart.Before(a.doneAt) {
		return fmt.Errorf("B acquired %s before A's Done closed", a.doneAt.Sub(bStart).Round(time.Millisecond))
	}
	return nil
}

// TestKillOneMember: with a follower killed, a held lease keeps renewing
// for 3 TTLs, another client stays refused, and the member rejoins.
func TestKillOneMember(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	a, b := open(t, c.Endpoints(), "/f1/"), open(t, c.Endpoints(), "/f1/")
	h := hold(t, a, "job")
	victim := (c.Leader() + 1) % etcdtest.Members
	c.Kill(victim)
	if start, _ := contend(t, b, "job", 3*testTTL); !start.IsZero() {
		checkNoOverlap(t, h, start)
		t.Fatal("B acquired a lease A kept renewing")
	}
	if h.isLost() {
		t.Fatalf("lease lost with one member of three down: %v", h.h.Err())
	}
	c.Restart(victim, true)
	ctx := ctxT(t, 30*time.Second)
	if _, err := b.Acquire(ctx, lease.Request{Key: "other", TTL: testTTL}); err != nil {
		t.Fatal(err)
	}
	if h.isLost() {
		t.Fatalf("lease lost after the restart: %v", h.h.Err())
	}
}

// TestKillTwoMembers: without a quorum, renewals fail and the Hold
// reports the loss before the validity ends; after both members restart,
// another client takes the key, not before A's validity ended.
func TestKillTwoMembers(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	a, b := open(t, c.Endpoints(), "/f2/"), open(t, c.Endpoints(), "/f2/")
	h := hold(t, a, "job")
	lead := c.Leader()
	c.Kill((lead + 1) % etcdtest.Members)
	c.Kill((lead + 2) % etcdtest.Members)
	select {
	case <-h.lost:
	case <-time.After(3 * testTTL):
		t.Fatal("no loss reported within 3 TTLs without a quorum")
	}
	h.checkLossInTime(t)
	c.Restart((lead+1)%etcdtest.Members, false)
	c.Restart((lead+2)%etcdtest.Members, false)
	start, _ := contend(t, b, "job", 30*time.Second)
	if start.IsZero() {
		t.Fatal("B never acquired after the restarts")
	}
	checkNoOverlap(t, h, start)
}

// TestLeaderPaused: the leader is paused (SIGSTOP) for 3 TTLs while A
// holds a lease and B keeps trying: A keeps it or reports its loss before
// the validity ends, and B's window never overlaps A's.
func TestLeaderPaused(t *testing.T) {
	t.Parallel()
	leaderPaused(t, false)
}

// TestLeaderPausedClientOnLeader is TestLeaderPaused with A's client
// knowing only the leader's endpoint: its renewals must fail, so A must
// report the loss before its validity ends, and B takes the key from the
// new leader only after that.
func TestLeaderPausedClientOnLeader(t *testing.T) {
	t.Parallel()
	leaderPaused(t, true)
}

func leaderPaused(t *testing.T, onlyLeader bool) {
	c := etcdtest.Start(t)
	lead := c.Leader()
	eps := c.Endpoints()
	if onlyLeader {
		eps = []string{c.Endpoint(lead)}
	}
	a, b := open(t, eps, "/f3/"), open(t, c.Endpoints(), "/f3/")
	h := hold(t, a, "job")
	c.Pause(lead)
	start, _ := contend(t, b, "job", 3*testTTL)
	c.Resume(lead)
	if onlyLeader && !h.isLost() {
		t.Fatal("A's renewals went only to the paused leader, yet no loss was reported")
	}
	if onlyLeader && start.IsZero() {
		t.Fatal("B never acquired the key from the new leader")
	}
	if h.isLost() {
		h.checkLossInTime(t)
	}
	checkNoOverlap(t, h, start)
	t.Logf("A lost: %v; B acquired: %v", h.isLost(), !start.IsZero())
}

// TestBlackholedClient: A's connections are blackholed (as if A were
// paused past its TTL): A's Hold reports the loss before its validity
// ends, and B takes the key only after that validity ended.
func TestBlackholedClient(t *testing.T) {
	t.Parallel()
	blackholed(t, 0)
}

// TestBlackholedClientNegativeControl is TestBlackholedClient with the
// protection off: A overstates its validity by 1.5 s (as a client that
// counted the rounded-up TTL from the reply, or trusted the KeepAlive
// channel, could), and the interval check must find the overlap.
//
// It stays serial: the overlap it must see lasts 1.5 s, and beside the
// parallel tests at load 60 B's takeover came later than that.
func TestBlackholedClientNegativeControl(t *testing.T) {
	blackholed(t, 1500*time.Millisecond)
}

func blackholed(t *testing.T, bonus time.Duration) {
	c := etcdtest.Start(t)
	ps, eps := c.Proxies()
	a, b := open(t, eps, "/f4/"), open(t, c.Endpoints(), "/f4/")
	etcd.SetUnsafeValidityBonus(a, bonus)
	h := hold(t, a, "job")
	for _, p := range ps {
		p.Blackhole(true)
	}
	start, _ := contend(t, b, "job", 5*testTTL)
	if start.IsZero() {
		t.Fatal("B never acquired the lease of a blackholed client")
	}
	if bonus > 0 {
		err := overlap(h, start)
		if err == nil {
			t.Fatal("negative control: no overlap found with the validity overstated")
		}
		t.Logf("negative control found: %v", err)
		return
	}
	checkNoOverlap(t, h, start)
	h.checkLossInTime(t)
}

// TestOrphanCleanedWhenQuorumReturns: a lock that an acquire transaction
// whose answer was lost may have written (the member that took it was
// killed) is deleted once the cluster answers again, not left to hold the
// key — and the next ticks of its job — for its whole TTL.
func TestOrphanCleanedWhenQuorumReturns(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b := open(t, c.Endpoints(), "/orphan/")
	cli := c.Client("", "")
	ctx := ctxT(t, 30*time.Second)
	g, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	lock, value := etcd.LockKey(b, "job"), "orphan-token-value"
	if _, err := cli.Put(ctx, lock, value, clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	// No quorum while the clean-up starts: its first attempts fail.
	leader := c.Leader()
	for i := range etcdtest.Members {
		if i != leader {
			c.Pause(i)
		}
	}
	done := make(chan struct{})
	go func() { etcd.CleanOrphans(b, "job", value, 60*time.Second); close(done) }()
	time.Sleep(2 * time.Second)
	for i := range etcdtest.Members {
		if i != leader {
			c.Resume(i)
		}
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the clean-up did not end within 20 s of the quorum's return")
	}
	resp, err := cli.Get(ctx, lock)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Fatalf("the orphan lock is still there after the quorum came back (its lease has 60 s)")
	}
}

// TestOwnLostLockNotHeldByAnother: an acquisition whose transaction's
// answer was lost (a loaded or failing cluster) is refused for lack of
// a quorum; when the key then shows the very lock that transaction
// wrote, the refusal stays "no quorum" — it is not a key held by another
// owner (a batch of free keys would read as taken). The control: a lock
// with another value is reported held.
func TestOwnLostLockNotHeldByAnother(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b := open(t, c.Endpoints(), "/lost/")
	cli := c.Client("", "")
	ctx := ctxT(t, 30*time.Second)
	lock, value := etcd.LockKey(b, "job"), "lost-token 60000 me"
	if _, err := cli.Put(ctx, lock, value); err != nil {
		t.Fatal(err)
	}
	err := etcd.RefusalAfterLostAnswer(ctx, b, "job", value)
	if errors.Is(err, lease.ErrHeld) || !errors.Is(err, lease.ErrNoQuorum) {
		t.Errorf("the key holds this request's own lost lock: %v; want no quorum, not held", err)
	}
	if err := etcd.RefusalAfterLostAnswer(ctx, b, "job", "other-token 60000 me"); !errors.Is(err, lease.ErrHeld) {
		t.Errorf("the key holds another request's lock: %v; want held", err)
	}
}
