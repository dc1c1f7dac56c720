package redlock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// Faults of the single-node fast path (inline.go): rounds whose requests
// are held back on the network past the per-node timeout, the kill of
// their connections, and servers that refuse the kill.

// inlineTimeout makes one inline Acquire time out while its request is
// held back on the way to the node for hold, past the per-node timeout,
// and returns the node's lock keys for that lease once the request
// arrived (or was dropped), with the client. kill false switches the
// kill of the timed-out connection off, and also the lane generation
// unless gen.
func inlineTimeout(t *testing.T, kill bool, gen ...bool) (*redistest.Node, *redlock.Client, string, []string) {
	t.Helper()
	const timeout, hold = testTimeout, 2500 * time.Millisecond
	rc := start(t, 1)
	fwd := newDelayFwd(t, rc.Nodes[0].Addr())
	c := votingClient(t, []string{"redis://" + fwd.Addr()}, redlock.WithTimeout(timeout))
	if !kill {
		// Without the kill and the lane generation (which also keeps the
		// held-back request from being applied after the next round).
		redlock.DisableInlineKill(c)
		if len(gen) == 0 || !gen[0] {
			redlock.DisableLaneGenerations(c)
		}
	}
	warmInline(t, c)
	k := key(t)
	// The Acquire runs inline only if the connection was used within the
	// last 100 ms; under load it may go through the lane (and succeed):
	// try again.
	var err error
	var began time.Time
	ran := waitFor(20*time.Second, func() bool {
		_, addr, _ := redlock.InlineConn(c)
		fwd.Delay(addr, hold)
		before := redlock.InlineRounds(c)
		began = time.Now()
		var l lease.Lease
		l, err = c.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: k, TTL: 60 * time.Second, Owner: "late"})
		if redlock.InlineRounds(c) > before {
			return true
		}
		fwd.Delay(addr, 0)
		if l != nil {
			if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
				t.Fatalf("Release: %v", err)
			}
		}
		warmInline(t, c)
		return false
	})
	if !ran {
		t.Fatal("the Acquire never ran inline in 20s")
	}
	took := time.Since(began)
	if err == nil {
		t.Fatalf("Acquire held back %s with a %s timeout succeeded", hold, timeout)
	}
	if took > 2*time.Second {
		t.Fatalf("Acquire returned after %s, want < 2s (timeout %s)", took, timeout)
	}
	if !errors.Is(err, lease.ErrNoQuorum) {
		t.Fatalf("Acquire: %v, want ErrNoQuorum", err)
	}
	var te interface{ Timeout() bool }
	if ne := nodeErrors(err); len(ne) != 1 || !errors.As(ne[0].Err, &te) || !te.Timeout() {
		t.Fatalf("Acquire: %v, want the node's timeout", err)
	}
	// The held-back request reaches the node (or its dead connection) at
	// began+hold; the lost attempt's cleanup was sent before that.
	time.Sleep(time.Until(began.Add(hold + time.Second)))
	var left []string
	for _, lk := range lockKeys(t, rc.Nodes[0]) {
		if lk == leaseHash(k) {
			left = append(left, lk)
		}
	}
	return rc.Nodes[0], c, k, left
}

// TestInlineTimeout: an inline Acquire whose request is held back on the
// network (2.5 s) for longer than the per-node timeout (1 s) returns at the
// timeout
// (far below the lane's 10 s read timeout) with the node's timeout; its
// cleanup kills the timed-out connection before it releases, so the
// request, arriving after the release, is never applied: no lock key is
// left behind. The next Acquire+Release work and run inline again.
func TestInlineTimeout(t *testing.T) {
	t.Parallel()
	_, c, k, left := inlineTimeout(t, true)
	if len(left) != 0 {
		t.Fatalf("lock key left behind by the timed-out inline acquire: %v", left)
	}
	if err := redlock.InlineKillOff(c); err != nil {
		t.Fatalf("kills turned off: %v", err)
	}
	if !waitFor(20*time.Second, func() bool {
		before := redlock.InlineRounds(c)
		l, err := c.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: k, TTL: time.Second, Owner: "next"})
		if err != nil {
			if !errors.Is(err, lease.ErrNoQuorum) {
				t.Fatalf("Acquire after the timeout: %v", err)
			}
			return false // a round past the timeout on a loaded machine
		}
		if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
			return false
		}
		return redlock.InlineRounds(c) >= before+2
	}) {
		t.Fatal("no Acquire+Release ran inline after the kill")
	}
}

// TestInlineTimeoutNoKill is the negative control of TestInlineTimeout:
// with the kill switched off, the held-back acquire is applied after its
// cleanup and leaves its lock key behind.
func TestInlineTimeoutNoKill(t *testing.T) {
	t.Parallel()
	_, _, k, left := inlineTimeout(t, false)
	if len(left) != 1 {
		t.Fatalf("no lock key of %s left behind without the kill: the test does not reproduce the overtaking", k)
	}
}

// TestInlineTimeoutGenerationWithoutKill: with the kill off, the lane
// generation alone keeps the held-back acquire from being applied after
// its cleanup (it is refused when it arrives): no lock key is left.
func TestInlineTimeoutGenerationWithoutKill(t *testing.T) {
	t.Parallel()
	if _, _, _, left := inlineTimeout(t, false, true); len(left) != 0 {
		t.Fatalf("lock key left behind with the generation on and the kill off: %v", left)
	}
}

// TestInlineACL: a node whose ACL user may not run CLIENT KILL. Refused
// from the start, or only after an inline round timed out (the
// permission revoked meanwhile), the kills are turned off for good. Either
// way the fast path stays on (the lane generation keeps the order without
// kills) and the results stay right.
func TestInlineACL(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, c *redlock.Client, k string) {
		t.Helper()
		if err := redlock.InlineKillOff(c); err == nil {
			t.Fatal("kills still on")
		}
		before := redlock.InlineRounds(c)
		for i := 0; i < 10; i++ {
			l := mustAcquire(t, c, lease.Request{Key: k, TTL: 10 * time.Second, Owner: "acl"})
			_, err := c.Acquire(ctxT(t, 5*time.Second), lease.Request{Key: k, TTL: time.Second})
			refused(t, err, lease.ErrHeld)
			if err := l.Extend(ctxT(t, 5*time.Second), 0); err != nil {
				t.Fatalf("Extend: %v", err)
			}
			if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
				t.Fatalf("Release: %v", err)
			}
		}
		if !waitFor(20*time.Second, func() bool {
			l := mustAcquire(t, c, lease.Request{Key: k, TTL: 10 * time.Second, Owner: "acl"})
			if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
				t.Fatalf("Release: %v", err)
			}
			return redlock.InlineRounds(c) > before
		}) {
			t.Fatal("no round ran inline with the kills off")
		}
	}
	aclURL := func(n *redistest.Node, addr, rules string) string {
		ctx := ctxT(t, 5*time.Second)
		args := []any{"acl", "setuser", "lim", "on", ">pw", "~*", "&*", "+@all"}
		if rules != "" {
			args = append(args, rules)
		}
		if err := n.Client().Do(ctx, args...).Err(); err != nil {
			t.Fatalf("ACL SETUSER: %v", err)
		}
		return fmt.Sprintf("redis://lim:pw@%s/0", addr)
	}

	t.Run("refused from the start", func(t *testing.T) {
		t.Parallel()
		rc := start(t, 1)
		c := votingClient(t, []string{aclURL(rc.Nodes[0], rc.Nodes[0].Addr(), "-client|kill")})
		if !waitFor(15*time.Second, func() bool {
			l := mustAcquire(t, c, lease.Request{Key: key(t, "warm"), TTL: 10 * time.Second})
			if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
				t.Fatalf("Release: %v", err)
			}
			return redlock.InlineKillOff(c) != nil
		}) {
			t.Fatal("kills not turned off for a user without CLIENT KILL")
		}
		check(t, c, key(t))
	})

	t.Run("refused at the kill", func(t *testing.T) {
		t.Parallel()
		const timeout, hold = testTimeout, 2500 * time.Millisecond
		rc := start(t, 1)
		nd := rc.Nodes[0]
		fwd := newDelayFwd(t, nd.Addr())
		c := votingClient(t, []string{aclURL(nd, fwd.Addr(), "")}, redlock.WithTimeout(timeout))
		warmInline(t, c)
		if err := nd.Client().Do(ctxT(t, 5*time.Second), "acl", "setuser", "lim", "-client|kill").Err(); err != nil {
			t.Fatalf("ACL SETUSER: %v", err)
		}
		k := key(t)
		inspectTimeout(t, c, fwd, k, hold)
		// The next round carries the kill, which is refused: its own calls
		// still count.
		l := mustAcquire(t, c, lease.Request{Key: k, TTL: 10 * time.Second, Owner: "acl"})
		if err := redlock.InlineKillOff(c); err == nil {
			t.Fatal("kills not turned off after a refused kill")
		}
		if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
			t.Fatalf("Release: %v", err)
		}
		check(t, c, k)
	})
}

// inspectTimeout makes one inline Inspect of k time out: its request is
// held back by hold (past the client's timeout) on the way to the node. It
// returns when the Inspect started and the CLIENT ID of its connection.
func inspectTimeout(t *testing.T, c *redlock.Client, fwd *delayFwd, k string, hold time.Duration) (time.Time, int64) {
	t.Helper()
	var began time.Time
	var id int64
	if !waitFor(20*time.Second, func() bool {
		var addr string
		id, addr, _ = redlock.InlineConn(c)
		fwd.Delay(addr, hold)
		before := redlock.InlineRounds(c)
		began = time.Now()
		_, err := c.Inspect(ctxT(t, 10*time.Second), k)
		if redlock.InlineRounds(c) > before {
			if err == nil {
				t.Fatalf("Inspect held back %s past the timeout succeeded", hold)
			}
			return true
		}
		fwd.Delay(addr, 0)
		warmInline(t, c)
		return false
	}) {
		t.Fatal("the Inspect never ran inline in 20s")
	}
	return began, id
}

// TestInlineKillInFront: after an inline round timed out, the next round
// goes through the lane with CLIENT KILL of the timed-out connection in
// front of its calls: the connection is gone from the server before its
// held-back request could have arrived (go-redis's own close of it is held
// back too), and the kill's reply does not make the round's calls fail.
// The negative control (kill off) finds the connection still there.
func TestInlineKillInFront(t *testing.T) {
	t.Parallel()
	for _, kill := range []bool{true, false} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			t.Parallel()
			killInFront(t, kill)
		})
	}
}

func killInFront(t *testing.T, kill bool) {
	const hold = 4 * time.Second
	rc := start(t, 1)
	fwd := newDelayFwd(t, rc.Nodes[0].Addr())
	c := votingClient(t, []string{"redis://" + fwd.Addr()})
	if !kill {
		redlock.DisableInlineKill(c)
	}
	warmInline(t, c)
	k := key(t)
	began, id := inspectTimeout(t, c, fwd, k, hold)
	before := redlock.InlineRounds(c)
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: 10 * time.Second, Owner: "after"})
	if redlock.InlineRounds(c) != before {
		t.Fatal("a round ran inline with a kill pending")
	}
	info, err := rc.Nodes[0].Client().Do(ctxT(t, 5*time.Second), "client", "list", "id", id).Text()
	if err != nil {
		t.Fatalf("CLIENT LIST ID: %v", err)
	}
	switch {
	case time.Since(began) >= hold:
		t.Logf("the check came %s after the held-back request was sent: not conclusive", time.Since(began))
	case kill && info != "":
		t.Fatalf("the timed-out connection %d is still on the server after the next round: %q", id, info)
	case !kill && info == "":
		t.Fatalf("without the kill the timed-out connection %d is gone: the test does not show the kill", id)
	}
	if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := redlock.InlineKillOff(c); err != nil {
		t.Fatalf("kills turned off: %v", err)
	}
}

// TestInlineSetupOffThePath: when new connections to the server hang (a
// full connection-tracking table, say) while the existing ones work, the
// set-up of a new inline connection holds up neither the lane nor a
// caller: rounds go through the lane at their usual speed, and the fast
// path comes back once new connections work again. The control shows the
// scenario is real: a client that has to open a connection for its round
// waits for it.
func TestInlineSetupOffThePath(t *testing.T) {
	t.Parallel()
	const hold = 3 * time.Second
	rc := start(t, 1)
	fwd := newDelayFwd(t, rc.Nodes[0].Addr())
	c := votingClient(t, []string{"redis://" + fwd.Addr()}, redlock.WithTimeout(testTimeout))
	redlock.SetInlineWarmRetry(c, 500*time.Millisecond)
	warmInline(t, c)
	id, _, _ := redlock.InlineConn(c)
	fwd.DelayNew(hold)
	// The inline connection dies; the next set-up needs a new one.
	if err := rc.Nodes[0].Client().Do(ctxT(t, 5*time.Second), "client", "kill", "id", id).Err(); err != nil {
		t.Fatalf("CLIENT KILL of the inline connection: %v", err)
	}
	before := redlock.InlineRounds(c)
	for i := range 8 {
		time.Sleep(150 * time.Millisecond) // past connIdleRecheck: a set-up is wanted
		began := time.Now()
		l, err := c.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: key(t, fmt.Sprint(i)), TTL: 5 * time.Second, Owner: "o"})
		if err != nil {
			t.Fatalf("Acquire %d: %v", i, err)
		}
		if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
			t.Fatalf("Release %d: %v", i, err)
		}
		if d := time.Since(began); d > 700*time.Millisecond {
			t.Errorf("round %d took %s: it waited for the set-up of a connection", i, d)
		}
	}
	if n := redlock.InlineRounds(c) - before; n != 0 {
		t.Errorf("%d rounds ran inline while no connection could be set up", n)
	}

	// Control: a fresh client's first round needs a new connection.
	fresh := newClient(t, []string{"redis://" + fwd.Addr()}, redlock.WithTimeout(testTimeout))
	began := time.Now()
	_, err := fresh.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: key(t, "fresh"), TTL: 5 * time.Second, Owner: "o"})
	if d := time.Since(began); err == nil && d < 700*time.Millisecond {
		t.Errorf("a fresh client got through in %s: new connections do not hang, the test shows nothing", d)
	}

	fwd.DelayNew(0)
	warmInline(t, c) // fails the test if the fast path does not come back
}
