package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// submit queues o behind every earlier request to this node. It reports
// false when the client is closed (o.reply is then not called).
func (n *node) submit(o *op) bool {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return false
	}
	n.queue = append(n.queue, o)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	return true
}

// runLane sends queued ops in order, one pipelined round at a time, so
// requests to this node are applied in the order they were submitted (a
// release never overtakes the acquire it cleans up after). It returns when
// the node is closed, its queue is empty and no inline round (inline.go)
// is running.
//
// One executor at a time: the lane takes a batch and sets executing in
// the same critical section, and an inline caller runs only when the queue
// is empty and nobody is executing; while an inline round runs, the lane
// waits for the caller's wake. So every request to the node is sent after
// every request submitted before it was sent (and answered, or its
// connection killed before anything else is sent: see inlineLost).
func (n *node) runLane() {
	defer close(n.laneDone)
	defer n.dropConns()
	ctx := context.Background()
	for {
		n.mu.Lock()
		if n.executing {
			n.mu.Unlock()
			<-n.wake
			continue
		}
		batch := n.queue
		n.queue = nil
		closed := n.closed
		if len(batch) > 0 {
			n.executing, n.sent = true, batch
		}
		n.mu.Unlock()
		if len(batch) == 0 {
			if closed {
				return
			}
			<-n.wake
			continue
		}
		n.exec(ctx, batch, &n.lane)
		n.mu.Lock()
		n.executing, n.sent = false, nil
		n.mu.Unlock()
	}
}

// exec sends one round of ops on sc (the lane's connection, or the inline
// path's) and replies to each op. Only the node's executor calls it. Its
// phases: drop the abandoned ops, queue the round (with the kill of a
// stale inline request, the generation raise, the server recheck and the
// data-marker check), run it, reload the scripts and resend on NOSCRIPT,
// and judge the node's answer.
func (n *node) exec(ctx context.Context, batch []*op, sc *stickyConn) {
	live := liveOps(batch)
	if len(live) == 0 {
		return
	}
	sc.failed = nil
	pipe := n.pipeline(sc)
	kill := n.queueKill(ctx, pipe, sc)
	raise := n.queueRaise(ctx, pipe)
	info := n.recheck(ctx, pipe)
	r := n.queueCalls(ctx, pipe, live)
	res, err := sc.run(ctx, pipe)
	sc.used = time.Now()
	if kill != nil {
		err = n.killed(kill, res)
	}
	n.raised(raise)
	err = n.reloadIfNoScript(ctx, sc, live, &r, err)
	nodeErr := n.roundErr(sc, &r, err, info)
	for i, o := range live {
		o.reply(r.cmds[i], nodeErr)
	}
}

// liveOps returns the ops of batch whose caller still waits, replying
// errAbandoned to the others. batch itself is left as it is (cutOffOK
// reads it while the round runs).
func liveOps(batch []*op) []*op {
	var live []*op
	for i, o := range batch {
		if !o.gone() {
			if live != nil {
				live = append(live, o)
			}
			continue
		}
		if live == nil {
			live = append(make([]*op, 0, len(batch)-1), batch[:i]...)
		}
		o.reply(nil, errAbandoned)
	}
	if live == nil {
		return batch
	}
	return live
}

// round is what exec queued on one pipeline, and what it learned of the
// data marker.
type round struct {
	cmds  [][]*redis.Cmd // per op, per call
	last  pos            // the call that also checks the data marker ({-1, -1}: none)
	clock bool           // the round also reads the server's clock
	// birth is the marker check sent on its own (nil when a call carries it).
	birth *redis.Cmd
	// wrapped are the marker-checking calls, in the order they ran.
	wrapped []*redis.Cmd
	// standaloneNewer: a resend ended with birth on its own.
	standaloneNewer bool
}

// queueCalls queues the script calls of live on pipe. The last script call
// of the round also checks the data marker (birth.go); a round of PINGs,
// or one whose last script has no marker-checking variant, sends the check
// on its own after it. A round of releases only is not checked (see
// releasesOnly).
func (n *node) queueCalls(ctx context.Context, pipe redis.Pipeliner, live []*op) round {
	r := round{last: pos{-1, -1}}
	check := !n.perShard && !releasesOnly(live)
	if check {
		for i := len(live) - 1; i >= 0; i-- {
			if k := len(live[i].calls); k > 0 {
				if birthWrapped[live[i].calls[k-1].script] != nil {
					r.last = pos{i, k - 1}
				}
				break
			}
		}
	}
	r.clock = !n.perShard && n.needClock()
	r.cmds = make([][]*redis.Cmd, len(live))
	for i, o := range live {
		if len(o.calls) == 0 {
			pipe.Ping(ctx)
			continue
		}
		r.cmds[i] = make([]*redis.Cmd, len(o.calls))
		for j, c := range o.calls {
			c = n.roundCall(c, i == r.last.i && j == r.last.j, r.clock)
			r.cmds[i][j] = pipe.EvalSha(ctx, c.script.Hash(), c.keys, c.args...)
		}
	}
	if check && r.last.i < 0 {
		bc := n.birthCall()
		r.birth = pipe.EvalSha(ctx, bc.script.Hash(), bc.keys, bc.args...)
	}
	if r.last.i >= 0 {
		r.wrapped = append(r.wrapped, r.cmds[r.last.i][r.last.j])
	}
	return r
}

// reloadIfNoScript reloads the scripts and resends what it can when some
// call of the round failed with NOSCRIPT (see reloadAndRetry), and returns
// the round's error after that: nil when every call then succeeded.
func (n *node) reloadIfNoScript(ctx context.Context, sc *stickyConn, live []*op, r *round, err error) error {
	if err == nil || !isReplyError(err) || n.noReload.Load() ||
		!(anyNoScript(r.cmds) || r.birth != nil && isNoScript(r.birth.Err())) {
		return err
	}
	var again *redis.Cmd
	before := r.birth
	r.birth, again = n.reloadAndRetry(ctx, sc, live, r.cmds, r.birth, r.clock)
	r.standaloneNewer = r.birth != nil && r.birth != before
	if again != nil {
		if len(r.wrapped) > 0 && isNoScript(r.wrapped[0].Err()) {
			r.wrapped = r.wrapped[:0] // resent: again replaced it
		}
		r.wrapped = append(r.wrapped, again)
	}
	if !anyCmdErr(r.cmds) && (r.birth == nil || r.birth.Err() == nil) {
		return nil
	}
	return err
}

// birthCheck is what a round learned of the node's data marker.
type birthCheck struct {
	vals    []any
	err     error
	ran     bool // a marker check ran at all
	checked bool // the round carried a marker check
}

// marker reads the round's data-marker check. Whether it ran is read
// before the marker-checking calls' replies are split (the error of a
// body inside one is that call's own, not the round's). A round whose
// connection could not be set up (AUTH failed) leaves every call without
// a reply: no check ran.
func (r *round) marker() birthCheck {
	var b birthCheck
	b.ran = r.birth != nil && (r.birth.Err() != nil || r.birth.Val() != nil)
	for _, w := range r.wrapped {
		b.ran = b.ran || w.Err() != nil || w.Val() != nil
	}
	b.checked = r.birth != nil || len(r.wrapped) > 0
	for _, w := range r.wrapped {
		b.vals, b.err = unwrapBirth(w)
	}
	if r.birth != nil && (len(r.wrapped) == 0 || r.standaloneNewer) {
		b.vals, _ = r.birth.Val().([]any)
		b.err = r.birth.Err()
	}
	return b
}

// roundErr judges the node's answer to the round whose error was err:
// the error every op of the round gets (nil: each call's own reply
// counts). It drops a connection a failed round may have spoilt, records
// the data marker and the server recheck (info), and the inline path's
// timeouts.
func (n *node) roundErr(sc *stickyConn, r *round, err error, info *redis.StringCmd) error {
	// Whether some call failed as a whole (before the marker-checking
	// calls' replies are split by marker).
	cmdErr := anyCmdErr(r.cmds)
	bc := r.marker()
	if err != nil || sc.failed != nil {
		// A failed round may leave the connection unusable (go-redis
		// then refuses it for good): the next round dials afresh.
		sc.drop()
	}
	if sc.failed != nil || err != nil && !isReplyError(err) {
		// Its requests may still be in the network: the next round
		// raises the generation first (gen.go).
		n.connFailed()
	}
	var nodeErr error
	if err != nil && (!isReplyError(err) || !cmdErr && !bc.ran) {
		// Connection-level failure: every call failed. An error reply
		// that no command carries came from setting up the connection
		// (AUTH with a wrong password: WRONGPASS).
		nodeErr = err
	}
	if nodeErr == nil && bc.checked {
		// A round whose data marker could not be checked counts as failed.
		nodeErr = n.noteBirth(bc.vals, bc.err, sc.used)
	}
	n.mu.Lock()
	if cerr := n.onConnectErr; cerr != nil && nodeErr != nil {
		nodeErr = cerr
	}
	n.mu.Unlock()
	if lerr := n.rechecked(info); lerr != nil {
		// The server was found unsafe before the round's calls ran:
		// none of its answers count.
		nodeErr = lerr
	}
	n.mu.Lock()
	timedOut := false
	if sc.inline {
		nodeErr, timedOut = n.inlineLost(sc, nodeErr)
	}
	if !timedOut {
		n.lastFail = nodeErr
	}
	n.mu.Unlock()
	return nodeErr
}

// releasesOnly reports whether every call of a round is a release (of a
// lease, or of a batch's lost attempts). Such a round skips the data
// marker check: its answers are never votes for a grant, a mark or a read
// (a release counts only towards Release returning, and a lock lost with
// the node's data is released already), and a data loss before it is
// seen by the next round that counts, which checks the marker in the
// same atomic step as its own work. That saves the server the check's
// INFO replication and the marker read on half of the rounds of an
// Acquire+Release.
func releasesOnly(ops []*op) bool {
	for _, o := range ops {
		if len(o.calls) == 0 {
			return false
		}
		for _, c := range o.calls {
			if c.script != releaseScript && c.script != releaseBatchScript {
				return false
			}
		}
	}
	return true
}

// stickyConn is a connection that one executor of a node's rounds (the
// lane, or the inline path's callers: see inline.go) keeps checked out of a
// go-redis pool between rounds. Only the node's executor uses it.
type stickyConn struct {
	conn   *redis.Conn // nil: none checked out
	used   time.Time   // when its last round ended
	failed error       // the current round's connection-level failure (nil: none)
	inline bool        // the inline path's connection (set up by warmInline only)
}

// run sends pipe and records in failed a connection-level failure of any of
// its commands (a Redis error reply is a command's own).
func (sc *stickyConn) run(ctx context.Context, pipe redis.Pipeliner) ([]redis.Cmder, error) {
	res, err := pipe.Exec(ctx)
	if err != nil {
		for _, c := range res {
			if e := c.Err(); e != nil && !isReplyError(e) {
				sc.failed = e
				break
			}
		}
	}
	return res, err
}

// drop gives the connection back to its pool (which closes it if a round
// failed on it), if there is one.
func (sc *stickyConn) drop() {
	if sc.conn != nil {
		_ = sc.conn.Close()
		sc.conn = nil
	}
}

// pipeline returns a pipeline for the next round on sc. A lane sends one
// round at a time, so a node that is one server (plain or Sentinel-managed)
// keeps one connection checked out of the client's pool while rounds follow
// each other closely: back-to-back rounds skip the pool's health check
// of the connection (a system call and pool bookkeeping on every round,
// about a sixth of the client's CPU per Acquire+Release). After
// connIdleRecheck without a round the connection goes back to the pool and
// is checked out again, health check included, so a connection the server
// closed while idle (a restart, Redis's idle `timeout`) is replaced
// before it is used instead of failing a round. A Cluster routes by key
// and uses the client's pools as they are. New connections run onConnect
// like any other.
//
// The inline path's connection is set up by warmInline and used inline
// only while it is fresh (see tryInline).
func (n *node) pipeline(sc *stickyConn) redis.Pipeliner {
	if sc.inline {
		return sc.conn.Pipeline()
	}
	c, ok := n.rdb.(*redis.Client)
	if !ok {
		return n.rdb.Pipeline()
	}
	if sc.conn != nil && time.Since(sc.used) > connIdleRecheck {
		sc.drop()
	}
	if sc.conn == nil {
		sc.conn = c.Conn()
	}
	return sc.conn.Pipeline()
}

// connIdleRecheck is how long a lane keeps its connection without a round
// before handing it back to the pool (see pipeline), and how long the
// inline path's connection may go unused and still be used inline.
const connIdleRecheck = 100 * time.Millisecond

// dropConns gives the lane's connection and the inline path's back to
// their pools (lane goroutine, on exit: nothing executes any more).
func (n *node) dropConns() {
	n.lane.drop()
	if n.inline != nil {
		n.stopWarm()
		n.inline.sc.drop()
	}
}

// close stops accepting ops; the lane sends what is queued and exits.
func (n *node) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}
