package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/lease"
)

// laneReadTimeout bounds one pipelined round on a node's lane. It is long on
// purpose: per-request timeouts are enforced by the caller's decision timer,
// not by closing the connection, so that a cleanup queued behind a slow
// request travels on the same connection and is applied after it.
const laneReadTimeout = 10 * time.Second

// node is one independent Redis master (a plain server, a Sentinel-managed
// master or a whole Redis Cluster) with its ordered request lane.
type node struct {
	name string // redacted URL, safe to log
	rdb  redis.UniversalClient
	obs  *Observer

	mu            sync.Mutex
	runIDs        map[string]string // server (see perShard) -> run_id last seen
	perShard      bool              // a Redis Cluster: one server per shard address
	viaSentinel   bool              // a Sentinel-managed master: connections to the Sentinels run onConnect too
	votingFrom    time.Time         // data birth: the node's data may have begun then; it votes from votingFrom+guard
	restartedAt   time.Time         // last restart/failover detected (zero: none)
	onConnectErr  error
	lastFail      error // the last round's connection-level failure; nil after a round that went through
	queue         []*op
	closed        bool
	wake          chan struct{}
	laneDone      chan struct{}
	guardAtDetect func() time.Duration
	servers       *servers    // the client's run_id registry (duplicate servers)
	noReload      atomic.Bool // tests only: do not reload scripts on NOSCRIPT

	// liveErr is why the server failed checkServer on a connection the
	// lane kept using (nil: it passed); checkedAt is when the lane last
	// checked (lane goroutine only).
	liveErr   error
	checkedAt time.Time

	// The data marker (see birth.go): the value last seen, whether one
	// was seen, and the nonce this client writes into a new one.
	marker     string
	markerSeen bool
	nonce      string
	// gen is the lane's generation, genRaise whether the next round must
	// raise the node's generation key to it first (gen.go); executor
	// only. noGenRaise (tests only) keeps the generation as it is after a
	// failed round.
	gen        int64
	genRaise   bool
	noGenRaise atomic.Bool

	// replID is the server's master_replid as last seen (on a new
	// connection or by a marker check); noReplIDCheck (tests only) makes
	// marker checks ignore a change of it.
	replID        string
	noReplIDCheck bool

	// lane is the lane's own connection to a single-server node (none
	// until the first round, after a round that failed or an idle spell,
	// and for a Cluster); only the executor uses it.
	lane stickyConn

	// executing is set while a round runs, on the lane or inline (one
	// executor at a time, see runLane); inline is the single-node fast
	// path (nil: none; see inline.go).
	executing bool
	inline    *inlinePath
	// sent is the round the lane has in flight (nil: none, or an inline
	// round); see cutOffOK.
	sent []*op
}

// call is one script invocation inside an op.
type call struct {
	script *redis.Script
	keys   []string
	args   []any
}

// op is a group of calls sent together in one pipeline; an op without
// calls sends a PING (Client.Warm). reply is called exactly once, from the
// lane goroutine.
type op struct {
	calls []call
	// abandoned, when non-nil and closed before the op is sent, makes the
	// lane skip it; once closed, Close may also cut the op's round off in
	// flight (cutOffOK). Only for requests whose effect nobody waits for
	// any more and that are harmless sent, unsent or cut off: reads,
	// probes, and grants and extensions whose caller decided without
	// them (a lock they leave expires by its TTL). A release, a note, a
	// completion or a store write has none.
	abandoned <-chan struct{}
	reply     func(res []*redis.Cmd, err error)
}

var errAbandoned = errors.New("abandoned before send")

// gone reports whether the op's caller abandoned it.
func (o *op) gone() bool {
	if o.abandoned == nil {
		return false
	}
	select {
	case <-o.abandoned:
		return true
	default:
		return false
	}
}

// cutOffOK reports whether Close may close the node's connections
// without waiting for its lane: every request queued or in flight was
// abandoned by its caller (a read, a health check, a warm-up, an extend
// whose answer nobody waits for any more). A round in flight holds the
// lane until the node answers, and a node that swallows traffic would
// otherwise hold Close for closeWait with nothing to deliver. A request
// that must arrive (a release, a note, a completion) has no abandon
// channel and keeps Close waiting, as does an inline round, whose caller
// waits for it.
func (n *node) cutOffOK() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.executing && n.sent == nil {
		return false
	}
	for _, q := range [][]*op{n.queue, n.sent} {
		for _, o := range q {
			if !o.gone() {
				return false
			}
		}
	}
	return true
}

func newNode(name string, rdb redis.UniversalClient, obs *Observer, guard func() time.Duration) *node {
	n := &node{
		name:          name,
		rdb:           rdb,
		obs:           obs,
		runIDs:        map[string]string{},
		wake:          make(chan struct{}, 1),
		laneDone:      make(chan struct{}),
		guardAtDetect: guard,
		nonce:         lease.NewToken(),
	}
	return n
}

// onConnect runs on every new connection before it is used: it learns the
// server's run_id and uptime (restart detection), refuses replicas, servers
// that can evict keys or hide their run_id (checkServer) and a server
// another node already reached (servers.claim), and loads the scripts so
// that EVALSHA works inside pipelines.
func (n *node) onConnect(ctx context.Context, cn *redis.Conn) error {
	info, err := cn.Info(ctx, "server", "replication", "memory").Result()
	if err != nil {
		return fmt.Errorf("INFO: %w", err)
	}
	fields := parseInfo(info)
	if fields["redis_mode"] == "sentinel" {
		if n.viaSentinel {
			// go-redis runs OnConnect on its connections to the
			// Sentinels too; they only say where the master is.
			return nil
		}
		return n.refuse(errors.New("node is a Sentinel (redis_mode:sentinel); list it as redis+sentinel://host:port?master_name=NAME"))
	}
	if fields["role"] == "slave" {
		return n.refuse(errors.New("node is a replica (role:slave); leasecron needs masters"))
	}
	if err := checkServer(fields); err != nil {
		return n.refuse(err)
	}
	// The run_id changes on a restart, the master_replid on a restart
	// and on every promotion: a master that was demoted and promoted again
	// keeps its run_id, but its dataset may have been replaced.
	runID := fields["run_id"] + " " + fields["master_replid"]
	uptime, _ := strconv.ParseInt(fields["uptime_in_seconds"], 10, 64)
	// A master that was promoted from a replica keeps the old replication
	// ID's end offset (second_repl_offset) until it restarts; Redis does
	// not say when the promotion happened.
	promoted := fields["second_repl_offset"] != "" && fields["second_repl_offset"] != "-1"
	addr := ""
	if n.perShard {
		addr = cn.String()
	}
	if err := n.noteServer(addr, runID, fields["master_replid"], time.Duration(uptime)*time.Second, promoted); err != nil {
		return err
	}
	pipe := cn.Pipeline()
	for _, src := range allScriptSources {
		pipe.ScriptLoad(ctx, src)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("SCRIPT LOAD: %w", err)
	}
	return n.checkBirth(ctx, cn)
}

// noteServer records the server a new connection of the node reached at
// addr ("" but for a Cluster's shard): its identity runID, replication ID
// replID, uptime and whether it was promoted from a replica. A new
// identity behind the address is a restart (or failover): the node votes
// again only after the restart guard (votingFrom), and OnRestart is told.
// It fails when another node of the set already reached that server.
func (n *node) noteServer(addr, runID, replID string, uptime time.Duration, promoted bool) error {
	now := time.Now()
	n.mu.Lock()
	// A plain or Sentinel node is one server at a time: a new run_id behind
	// it is a restart or a failover, even at a new address (a promoted
	// replica may lack the latest writes). A Cluster has one per shard.
	prev, seen := n.runIDs[addr]
	if err := n.servers.claim(n, runID, prev); err != nil {
		n.onConnectErr = err
		n.mu.Unlock()
		return err
	}
	n.onConnectErr = nil
	n.runIDs[addr] = runID
	if !n.perShard {
		n.replID = replID
	}
	var base time.Time
	restarted := false
	switch {
	case !seen && promoted:
		// First sight of a promoted replica: it may have been promoted
		// a moment ago, without leases its old master granted.
		base, restarted = now, true
	case !seen:
		// First sight: the process started about uptime ago (rounded
		// down to the second by Redis, hence the extra second).
		base = now.Add(-uptime + time.Second)
	case prev != runID:
		// A new process (restart or failover) behind the same address.
		base, restarted = now, true
	}
	if restarted {
		n.restartedAt = now
	}
	if base.After(n.votingFrom) {
		n.votingFrom = base
	}
	votingAt := n.votingFrom.Add(n.guardAtDetect())
	n.mu.Unlock()
	if restarted && n.obs != nil && n.obs.OnRestart != nil {
		n.obs.OnRestart(n.name, votingAt)
	}
	return nil
}

// unanswered is the error for a round that got no answer from the node
// and stopped waiting with err: a timeoutErr names how the node's previous
// round failed, if it did.
func (n *node) unanswered(err error) error {
	te, ok := err.(timeoutErr)
	if !ok {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	te.last = n.lastFail
	return te
}

// refuse records err as the reason the node cannot be used (shown by Health)
// and returns it, so that go-redis drops the connection.
func (n *node) refuse(err error) error {
	n.mu.Lock()
	n.onConnectErr = err
	n.mu.Unlock()
	return err
}

func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

// voting reports whether the node's grants count at time now.
func (n *node) voting(now time.Time, guard time.Duration) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !now.Before(n.votingFrom.Add(guard))
}

// status returns the restart bookkeeping for Health.
func (n *node) status(guard time.Duration) (votingAt, restartedAt time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.votingFrom.Add(guard), n.restartedAt
}

// anyCmdErr reports whether some command of a pipeline has an error.
func anyCmdErr(cmds [][]*redis.Cmd) bool {
	for _, cs := range cmds {
		for _, c := range cs {
			if c.Err() != nil {
				return true
			}
		}
	}
	return false
}

// isReplyError reports whether err is a Redis error reply (one command
// failed) rather than a connection failure.
func isReplyError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
