package lease

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
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
//     now + the per-node timeout. Only the lane sets that connection up
//     (warmInline, without that deadline: dial, TLS and onConnect may take
//     longer), after a round in which a caller found it missing or unused
//     for connIdleRecheck.
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
//     acquire, is applied after it), or never runs it.
//
// The path needs CLIENT INFO and CLIENT KILL: warmInline checks both (a
// kill that matches no client), and a server that refuses either (an ACL
// user without +client, a renamed command) has its rounds go through the
// lane for good, as does one whose kill is refused later.

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
	disabled   error     // why the path is off for good (nil: it is not)
	ready      bool      // sc holds a connection set up by warmInline
	probed     bool      // CLIENT KILL was found allowed
	used       time.Time // when sc's connection was last set up or used
	warmWanted bool      // a caller found sc not ready or stale
	id         int64     // sc's connection: CLIENT ID and address
	addr       string
	killID     int64 // a failed inline round's connection, to kill (0: none)
	killAddr   string
	noKill     bool // tests only: forget a pending kill instead of sending it

	rounds atomic.Int64 // inline rounds run (tests)
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
	return &inlinePath{rdb: redis.NewClient(o), timeout: timeout, sc: stickyConn{inline: true}}, nil
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
	if n.closed || n.executing || len(n.queue) > 0 || in.disabled != nil || in.killID != 0 {
		n.mu.Unlock()
		return false
	}
	if !in.ready || time.Since(in.used) > connIdleRecheck {
		in.warmWanted = true
		n.mu.Unlock()
		return false
	}
	n.executing = true
	n.mu.Unlock()
	defer n.inlineDone()

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
		}
		return nodeErr, false
	}
	in.ready = false
	in.killID, in.killAddr = in.id, in.addr
	in.warmWanted = true // once the kill ran (warmInline waits for it)
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
	case isReplyError(kerr) && !setup:
		in.killID = 0
		in.disabled = fmt.Errorf("CLIENT KILL refused: %w", kerr)
	}
	return err
}

// warmInline sets up the inline path's connection when a caller asked for
// it (lane goroutine, executing): a connection from its pool (the pool's
// health check and, on a new one, onConnect), then CLIENT INFO for its ID
// and address and, the first time, a CLIENT KILL that matches no client
// to check that kills are allowed. The ctx has no deadline: dial, TLS and
// onConnect are not bounded by the per-node timeout.
func (n *node) warmInline(ctx context.Context) {
	in := n.inline
	n.mu.Lock()
	if in.killID != 0 {
		n.mu.Unlock()
		return // still wanted after the kill
	}
	want := in.warmWanted && in.disabled == nil
	in.warmWanted = false
	probed := in.probed
	n.mu.Unlock()
	if !want {
		return
	}
	in.sc.drop()
	cn := in.rdb.Conn()
	pipe := cn.Pipeline()
	ping := pipe.Ping(ctx)
	ci := pipe.Do(ctx, "client", "info")
	_, _ = pipe.Exec(ctx)
	var refused error // a reply that disables the path for good
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
	if err != nil || refused != nil {
		_ = cn.Close()
		cn = nil
	}
	in.sc.conn = cn
	n.mu.Lock()
	defer n.mu.Unlock()
	if refused != nil {
		in.disabled = refused
		return
	}
	if err != nil {
		return // not ready; the next caller asks again
	}
	in.probed = true
	in.ready, in.used, in.id, in.addr = true, time.Now(), id, addr
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
