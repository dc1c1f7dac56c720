package redlock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The single-node fast path. A client of one plain server (redis:// or
// rediss://) runs a round whose decision timeout is the per-node timeout
// (one key's Acquire, Extend, Release, Complete, SetNote, Inspect) on the
// caller's goroutine instead of handing it to the node's lane and back,
// when nothing else is queued or running on the node. That saves two
// goroutine switches per round, about a third of the client's CPU per
// Acquire+Release.
//
// The lane's two guarantees are kept:
//
//   - A caller stops waiting at the per-node timeout. The inline round uses
//     a connection of its own (a second go-redis client of the node with
//     one connection) whose reads and writes are bounded by a deadline of
//     now + the per-node timeout. That connection is set up on a goroutine
//     of its own (warmInline, bounded by warmTimeout: dial, TLS and
//     onConnect may take longer than a round) when a caller found it
//     missing or unused for connIdleRecheck; neither the lane nor a caller
//     waits for it, and that caller's round goes through the lane.
//   - Requests to the node are applied in submission order. Only one
//     executor runs at a time (node.executing): the lane, or one inline
//     caller when the lane's queue is empty. When an inline round fails at
//     the connection level (a timeout, a broken connection), its request
//     may still be in the network or in the server's buffer, and go-redis
//     closes the connection, which does not stop a request the server has
//     already received. So the connection's CLIENT ID (and address) is kept
//     as a pending kill: nothing runs inline while it is pending, and the
//     lane's next round sends CLIENT KILL ID <id> ADDR <addr> in front of
//     its calls, on the lane's connection. Redis then either ran the old
//     request before (and what follows, such as the release of a lost
//     acquire, is applied after it), or never runs it. The failed round
//     also raises the node's lane generation (gen.go), which the inline
//     path's calls carry like the lane's: the old request, arriving after
//     the next round, is refused by the server.
//
// The kill needs CLIENT INFO and CLIENT KILL: warmInline checks both (a
// kill that matches no client). A server that refuses either (an ACL user
// without +client, a renamed command), at the set-up or at a kill later,
// has the kills turned off for good (killOff); the path stays on, and the
// lane generation alone keeps the order.

// inlinePath is a node's single-node fast path.
type inlinePath struct {
	rdb     *redis.Client // the node's server: one connection, deadlines from ctx
	timeout time.Duration // the client's per-node timeout
	sc      stickyConn    // used by the node's executor only

	// own is whether the current inline round's deadline is its own (not
	// an earlier one of the caller's ctx); batch holds its op. Executor
	// only.
	own   bool
	batch [1]*op

	// Under the node's mu.
	killOff   error         // why failed rounds' connections are not killed (nil: they are)
	ready     bool          // sc holds a connection set up by warmInline
	probed    bool          // CLIENT KILL was found allowed
	used      time.Time     // when sc's connection was last set up or used
	next      *warmConn     // a connection warmInline set up, for sc
	warming   bool          // warmInline runs
	lastTry   time.Time     // the last call that could have run inline
	warmAfter time.Time     // no set-up before then (after one that failed)
	warmRetry time.Duration // the pause after a failed set-up
	id        int64         // sc's connection: CLIENT ID and address
	addr      string
	killID    int64 // a failed inline round's connection, to kill (0: none)
	killAddr  string
	noKill    bool // tests only: forget a pending kill instead of sending it

	// ctx ends the set-up goroutine (warmInline) when the node closes; wg
	// waits for it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	rounds  atomic.Int64 // inline rounds run (tests)
	warmups atomic.Int64 // set-ups started (tests)
}

// newInline returns the fast path of node n, whose URL is raw: nil unless
// it is a plain server (redis:// or rediss://).
func newInline(n *node, raw string, tlsConf *tls.Config, connTimeout, timeout time.Duration) (*inlinePath, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, nil
	}
	o, err := plainOptions(u.String(), raw, tlsConf, connTimeout)
	if err != nil {
		return nil, err
	}
	o.OnConnect = n.onConnect
	o.PoolSize = 1
	o.MinIdleConns = 0
	o.PipelinePoolSize = -1
	o.ContextTimeoutEnabled = true
	ctx, cancel := context.WithCancel(context.Background())
	return &inlinePath{rdb: redis.NewClient(o), timeout: timeout, warmRetry: warmRetry, sc: stickyConn{inline: true},
		ctx: ctx, cancel: cancel}, nil
}

// tryInline runs o on the caller's goroutine, within the per-node timeout,
// when the node's fast path allows it, and reports whether it did (o.reply
// has then been called); otherwise the caller submits o to the lane.
func (n *node) tryInline(ctx context.Context, o *op) bool {
	in := n.inline
	if in == nil || ctx.Err() != nil {
		return false
	}
	n.mu.Lock()
	if n.closed || n.executing || len(n.queue) > 0 || in.killID != 0 {
		n.mu.Unlock()
		return false
	}
	prevTry := in.lastTry
	in.lastTry = time.Now()
	var install *warmConn
	if !in.ready || time.Since(in.used) > connIdleRecheck {
		if nx := in.next; nx != nil && time.Since(nx.at) <= connIdleRecheck {
			install, in.next = nx, nil
		} else {
			n.unready(time.Since(prevTry) <= connIdleRecheck)
			return false
		}
	}
	n.executing = true
	n.mu.Unlock()
	defer n.inlineDone()
	if install != nil {
		in.sc.drop()
		in.sc.conn = install.cn
		n.mu.Lock()
		in.ready, in.id, in.addr = true, install.id, install.addr
		n.mu.Unlock()
	}

	in.rounds.Add(1)
	rctx := &roundCtx{Context: ctx, deadline: time.Now().Add(in.timeout)}
	d, ok := ctx.Deadline()
	in.own = !ok || !d.Before(rctx.deadline)
	if !in.own {
		rctx.deadline = d
	}
	in.batch[0] = o
	n.exec(rctx, in.batch[:], &in.sc)
	in.batch[0] = nil
	return true
}

// unready handles a caller that found the inline connection missing or
// unused for connIdleRecheck (n.mu held, nobody executing, nothing
// queued; it unlocks n.mu): an unused one goes back to its pool, where the
// set-up finds it again after the pool's health check, and a set-up is
// started when calls come close together (burst: the previous call came
// within connIdleRecheck). Sparse calls (a daemon's ticks, renewals every
// few seconds) stay on the lane: a connection set up for them would be
// stale again by the next call.
func (n *node) unready(burst bool) {
	in := n.inline
	if in.ready {
		in.ready = false
		n.executing = true
		n.mu.Unlock()
		in.sc.drop()
		n.mu.Lock()
		n.executing = false
		if len(n.queue) > 0 || n.closed {
			select {
			case n.wake <- struct{}{}:
			default:
			}
		}
	}
	if burst {
		n.startWarm()
	}
	n.mu.Unlock()
}

// inlineDone ends an inline round (also one that panicked, so that the
// lane is not left waiting): nobody executes any more, and the lane is
// woken if requests were queued meanwhile or the client is closing.
func (n *node) inlineDone() {
	in := n.inline
	n.mu.Lock()
	n.executing = false
	if in.ready {
		in.used = time.Now()
	}
	wake := len(n.queue) > 0 || n.closed
	n.mu.Unlock()
	if wake {
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
}

// roundCtx is the context of an inline round: its Deadline bounds the
// round's reads and writes (go-redis sets the socket deadlines from it, as
// the inline client has ContextTimeoutEnabled), without the timer of a
// context.WithDeadline; the rest is the caller's context.
type roundCtx struct {
	context.Context
	deadline time.Time
}

// Deadline returns the round's deadline.
func (c *roundCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// inlineLost handles the end of an inline round (n.mu held; sc's
// connection already dropped if the round failed): after a
// connection-level failure the connection is no longer ready and becomes
// the pending kill, and a timeout is reported as the lane path reports one:
// timeoutErr when the per-node timeout ran out, the context's error when
// the caller's deadline came first. It returns the round's error and
// whether it was a timeout (which, as on the lane path, does not become
// the node's lastFail).
func (n *node) inlineLost(sc *stickyConn, nodeErr error) (error, bool) {
	in := n.inline
	if sc.failed == nil {
		if sc.conn == nil {
			in.ready = false // dropped after an error reply: set up again
			n.startWarm()
		}
		return nodeErr, false
	}
	in.ready = false
	if in.killOff == nil {
		in.killID, in.killAddr = in.id, in.addr
	}
	switch {
	case isTimeout(sc.failed) && in.own:
		return timeoutErr{d: in.timeout, last: n.lastFail}, true
	case isTimeout(sc.failed):
		return context.DeadlineExceeded, true
	}
	return nodeErr, false
}

// isTimeout reports whether err is a deadline that ran out.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// queueKill queues the pending kill of a failed inline round's connection
// in front of a lane round and returns its command (nil when none is
// pending, or on the inline path's own rounds).
func (n *node) queueKill(ctx context.Context, pipe redis.Pipeliner, sc *stickyConn) *redis.Cmd {
	in := n.inline
	if in == nil || sc.inline {
		return nil
	}
	n.mu.Lock()
	id, addr := in.killID, in.killAddr
	if in.noKill {
		in.killID = 0
		id = 0
	}
	n.mu.Unlock()
	if id == 0 {
		return nil
	}
	return pipe.Do(ctx, "client", "kill", "id", id, "addr", addr)
}

// killed applies the answer to a kill sent in front of a lane round (res:
// the round's commands, the kill first) and returns the round's own error:
// that of its first failed command after the kill. A kill that ran (or
// found no such client) is done; one the server refused disables the
// inline path for good; one that got no answer stays pending.
func (n *node) killed(kill *redis.Cmd, res []redis.Cmder) error {
	var err error
	kerr := kill.Err()
	setup := kerr != nil // every command failed with the kill's error: connection setup
	for _, c := range res {
		if c == redis.Cmder(kill) {
			continue
		}
		e := c.Err()
		if e == nil || kerr == nil || !errors.Is(e, kerr) {
			setup = false
		}
		if e != nil && err == nil {
			err = e
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	in := n.inline
	switch {
	case kerr == nil || redis.HasErrorPrefix(kerr, "ERR No such client"):
		in.killID = 0
		n.startWarm()
	case isReplyError(kerr) && !setup:
		in.killID = 0
		in.killOff = fmt.Errorf("CLIENT KILL refused: %w", kerr)
		n.startWarm()
	}
	return err
}

// warmConn is a connection warmInline set up for the inline path, with
// its CLIENT ID and address as the server sees it.
type warmConn struct {
	cn   *redis.Conn
	id   int64
	addr string
	at   time.Time // when it was set up
}

// startWarm starts warmInline unless it runs, is not due (after a failed
// set-up), is not wanted (the path is off, a kill is pending, a fresh
// connection is waiting) or the node is closed (n.mu held).
func (n *node) startWarm() {
	in := n.inline
	if in.warming || in.killID != 0 || n.closed || time.Now().Before(in.warmAfter) ||
		in.next != nil && time.Since(in.next.at) <= connIdleRecheck {
		return
	}
	in.warming = true
	in.warmups.Add(1)
	in.wg.Add(1)
	go n.warmInline()
}

// warmInline sets up a connection for the inline path, on a goroutine of
// its own (startWarm), so that neither the lane nor a caller waits for it:
// a connection from the inline client's pool (the pool's health check
// and, on a new one, dial, TLS and onConnect), then CLIENT INFO for its ID
// and address and, the first time, a CLIENT KILL that matches no client
// to check that kills are allowed (a refusal turns the kills off). It leaves the connection in next, where
// the next inline caller takes it. It is bounded by warmTimeout, longer
// than a round may take; after a set-up that failed none is tried for
// warmRetry, and rounds go through the lane meanwhile.
func (n *node) warmInline() {
	in := n.inline
	defer in.wg.Done()
	ctx, cancel := context.WithTimeout(in.ctx, in.warmTimeout())
	defer cancel()
	n.mu.Lock()
	probed := in.probed
	old := in.next
	in.next = nil
	n.mu.Unlock()
	if old != nil {
		_ = old.cn.Close() // stale: back to the pool, health-checked again below
	}
	cn := in.rdb.Conn()
	pipe := cn.Pipeline()
	ping := pipe.Ping(ctx)
	ci := pipe.Do(ctx, "client", "info")
	_, _ = pipe.Exec(ctx)
	var refused error // a reply that turns the kills off (killOff)
	err := ping.Err()
	var id int64
	var addr string
	if err == nil {
		info, ierr := ci.Text()
		id, addr = parseClientInfo(info)
		switch {
		case ierr != nil && isReplyError(ierr):
			refused = fmt.Errorf("CLIENT INFO refused: %w", ierr)
		case ierr != nil:
			err = ierr
		case id <= 0 || addr == "":
			refused = errors.New("CLIENT INFO has no id or addr")
		}
	}
	if err == nil && refused == nil && !probed {
		// Our own connection is the only match, and SKIPME leaves it.
		kerr := cn.Do(ctx, "client", "kill", "id", id, "skipme", "yes").Err()
		switch {
		case kerr != nil && isReplyError(kerr):
			refused = fmt.Errorf("CLIENT KILL refused: %w", kerr)
		case kerr != nil:
			err = kerr
		}
	}
	n.mu.Lock()
	in.warming = false
	keep := false
	if refused != nil && in.killOff == nil {
		in.killOff = refused
	}
	switch {
	case err != nil:
		in.warmAfter = time.Now().Add(in.warmRetry) // not ready; tried again then
	case n.closed:
	default:
		in.probed = true
		in.next = &warmConn{cn: cn, id: id, addr: addr, at: time.Now()}
		keep = true
	}
	n.mu.Unlock()
	if !keep {
		_ = cn.Close() // not under n.mu: closing a TLS connection may block
	}
}

// stopWarm ends a running set-up, waits for it and gives a connection it
// left back to its pool (the lane, when it exits: nothing executes any more).
func (n *node) stopWarm() {
	in := n.inline
	in.cancel()
	in.wg.Wait()
	n.mu.Lock()
	nx := in.next
	in.next = nil
	n.mu.Unlock()
	if nx != nil {
		_ = nx.cn.Close()
	}
}

// warmRetry is how long after a failed set-up of the inline path's
// connection the next one may be tried.
const warmRetry = 10 * time.Second

// warmTimeout bounds one set-up of the inline path's connection: 20 times
// the per-node timeout, between 250 ms and 1 s.
func (in *inlinePath) warmTimeout() time.Duration {
	return min(max(20*in.timeout, 250*time.Millisecond), time.Second)
}

// parseClientInfo returns the id= and addr= fields of a CLIENT INFO line.
func parseClientInfo(s string) (int64, string) {
	var id int64
	var addr string
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "id":
			id, _ = strconv.ParseInt(v, 10, 64)
		case "addr":
			addr = v
		}
	}
	return id, addr
}
