package lease

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
// the node is closed and its queue is empty.
func (n *node) runLane() {
	defer close(n.laneDone)
	defer n.dropConn()
	ctx := context.Background()
	for {
		n.mu.Lock()
		batch := n.queue
		n.queue = nil
		closed := n.closed
		n.mu.Unlock()
		if len(batch) == 0 {
			if closed {
				return
			}
			<-n.wake
			continue
		}
		n.exec(ctx, batch)
	}
}

func (n *node) exec(ctx context.Context, batch []*op) {
	live := batch[:0]
	for _, o := range batch {
		if o.abandoned != nil {
			select {
			case <-o.abandoned:
				o.reply(nil, errAbandoned)
				continue
			default:
			}
		}
		live = append(live, o)
	}
	if len(live) == 0 {
		return
	}
	pipe := n.pipeline()
	info := n.recheck(ctx, pipe)
	// The last script call of the round also checks the data marker
	// (birth.go); a round of PINGs, or one whose last script has no
	// marker-checking variant, sends the check on its own after it.
	last := pos{-1, -1}
	if !n.perShard {
		for i := len(live) - 1; i >= 0; i-- {
			if k := len(live[i].calls); k > 0 {
				if birthWrapped[live[i].calls[k-1].script] != nil {
					last = pos{i, k - 1}
				}
				break
			}
		}
	}
	clock := !n.perShard && n.needClock()
	cmds := make([][]*redis.Cmd, len(live))
	for i, o := range live {
		if len(o.calls) == 0 {
			pipe.Ping(ctx)
			continue
		}
		cmds[i] = make([]*redis.Cmd, len(o.calls))
		for j, c := range o.calls {
			if i == last.i && j == last.j {
				c = n.withBirth(c, clock)
			}
			cmds[i][j] = pipe.EvalSha(ctx, c.script.Hash(), c.keys, c.args...)
		}
	}
	var birth *redis.Cmd
	if !n.perShard && last.i < 0 {
		bc := n.birthCall()
		birth = pipe.EvalSha(ctx, bc.script.Hash(), bc.keys, bc.args...)
	}
	_, err := pipe.Exec(ctx)
	n.connUsed = time.Now()
	var wrapped []*redis.Cmd // marker-checking calls, in the order they ran
	standaloneNewer := false // a resend ended with birth on its own
	if last.i >= 0 {
		wrapped = append(wrapped, cmds[last.i][last.j])
	}
	if err != nil && isReplyError(err) && !n.noReload.Load() &&
		(anyNoScript(cmds) || birth != nil && isNoScript(birth.Err())) {
		var again *redis.Cmd
		before := birth
		birth, again = n.reloadAndRetry(ctx, live, cmds, birth, clock)
		standaloneNewer = birth != nil && birth != before
		if again != nil {
			if len(wrapped) > 0 && isNoScript(wrapped[0].Err()) {
				wrapped = wrapped[:0] // resent: again replaced it
			}
			wrapped = append(wrapped, again)
		}
		if !anyCmdErr(cmds) && (birth == nil || birth.Err() == nil) {
			err = nil
		}
	}
	// Whether some call failed as a whole (before the marker-checking
	// calls' replies are split: the error of a body inside one is that
	// call's own, not the round's).
	cmdErr := anyCmdErr(cmds)
	// Whether a marker check ran at all: a round whose connection could
	// not be set up (AUTH failed) leaves every call without a reply.
	birthRan := birth != nil && (birth.Err() != nil || birth.Val() != nil)
	for _, w := range wrapped {
		birthRan = birthRan || w.Err() != nil || w.Val() != nil
	}
	var birthVals []any
	var birthErr error
	checked := birth != nil || len(wrapped) > 0
	for _, w := range wrapped {
		birthVals, birthErr = unwrapBirth(w)
	}
	if birth != nil && (len(wrapped) == 0 || standaloneNewer) {
		birthVals, _ = birth.Val().([]any)
		birthErr = birth.Err()
	}
	if err != nil {
		// A failed round may leave the connection unusable (go-redis
		// then refuses it for good): the next round dials afresh.
		n.dropConn()
	}
	var nodeErr error
	if err != nil && (!isReplyError(err) || !cmdErr && !birthRan) {
		// Connection-level failure: every call failed. An error reply
		// that no command carries came from setting up the connection
		// (AUTH with a wrong password: WRONGPASS).
		nodeErr = err
	}
	if nodeErr == nil && checked {
		// A round whose data marker could not be checked counts as failed.
		nodeErr = n.noteBirth(birthVals, birthErr, n.connUsed)
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
	n.lastFail = nodeErr
	n.mu.Unlock()
	for i, o := range live {
		o.reply(cmds[i], nodeErr)
	}
}

// pipeline returns a pipeline for the lane's next round. A lane sends one
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
func (n *node) pipeline() redis.Pipeliner {
	c, ok := n.rdb.(*redis.Client)
	if !ok {
		return n.rdb.Pipeline()
	}
	if n.conn != nil && time.Since(n.connUsed) > connIdleRecheck {
		n.dropConn()
	}
	if n.conn == nil {
		n.conn = c.Conn()
	}
	return n.conn.Pipeline()
}

// connIdleRecheck is how long a lane keeps its connection without a round
// before handing it back to the pool (see pipeline).
const connIdleRecheck = 100 * time.Millisecond

// dropConn gives the lane's connection back to the pool (which closes it
// if a round failed on it), if it has one.
func (n *node) dropConn() {
	if n.conn != nil {
		_ = n.conn.Close()
		n.conn = nil
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
