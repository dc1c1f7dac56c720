package redlock

import (
	"context"
	_ "embed"
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

var (
	//go:embed extend.lua
	extendSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed complete.lua
	completeSrc string
	//go:embed note.lua
	noteSrc string
	//go:embed inspect.lua
	inspectSrc string

	// The scripts are immutable after init; each is loaded on every new
	// connection and called by EVALSHA.
	extendScript   = redis.NewScript(extendSrc)
	releaseScript  = redis.NewScript(releaseSrc)
	completeScript = redis.NewScript(completeSrc)
	noteScript     = redis.NewScript(noteSrc)
	inspectScript  = redis.NewScript(inspectSrc)

	// roundScripts are the scripts sent in rounds; each also has a
	// variant that checks the data marker (birth.go). A script sent in a
	// round but not listed here works too: when it is a round's last
	// call, the marker check follows it as a call of its own.
	roundScripts = []struct {
		script *redis.Script
		src    string
	}{
		{extendScript, extendSrc}, {releaseScript, releaseSrc},
		{completeScript, completeSrc}, {noteScript, noteSrc}, {inspectScript, inspectSrc},
		{acquireBatchScript, acquireBatchSrc}, {releaseBatchScript, releaseBatchSrc}, {fenceBatchScript, fenceBatchSrc},
	}

	allScriptSources = append([]string{extendSrc, releaseSrc, completeSrc, noteSrc, inspectSrc, birthSrc,
		acquireBatchSrc, releaseBatchSrc, fenceBatchSrc, entriesSrc, logSrc},
		append(wrappedSources(), genSources()...)...)
)

// Client takes leases on N independent Redis nodes with the Redlock
// algorithm. It is safe for concurrent use. Create it with New and Close it
// when done.
type Client struct {
	opts   options
	nodes  []*node
	stores []*node // per node, the lane of entries and logs (see storeLanes)
	quorum int
	maxTTL atomic.Int64 // longest TTL requested, for the default restart guard
	lost   lostKeys     // lost attempts the next attempt on their key waits for
	// prefix is "PREFIX:" for a client opened with one (Open), else "":
	// the Redis keys of the lease named K are those of PREFIX:K.
	prefix string

	// test holds the switches only tests set (testhooks.go).
	test testHooks

	closeOnce sync.Once
	closed    atomic.Bool
}

// New connects to the nodes given as URLs (see the package documentation
// for the forms). The quorum is len(urls)/2+1. New does not contact the
// nodes; it fails only on malformed URLs or options, naming the node.
func New(urls []string, opts ...Option) (*Client, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if len(urls) == 0 {
		return nil, errors.New("redlock: no nodes")
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("redlock: timeout must be positive, got %s", o.timeout)
	}
	if err := lease.CheckDrift(o.drift); err != nil {
		return nil, fmt.Errorf("redlock: %w", err)
	}
	if o.retry == nil {
		o.retry = NoRetry()
	}
	c := &Client{opts: o, quorum: len(urls)/2 + 1}
	seen := map[string]bool{}
	srv := newServers()
	for i, raw := range urls {
		n := newNode(Redact(raw), nil, &c.opts.observer, c.guard)
		n.servers = srv
		scheme := strings.SplitN(raw, "://", 2)[0]
		n.perShard = strings.Contains(scheme, "+cluster")
		n.viaSentinel = strings.Contains(scheme, "+sentinel")
		name, rdb, err := parseNode(raw, o.tls, o.connTimeout, n.onConnect)
		if err == nil && seen[raw] {
			err = errors.New("listed twice")
		}
		if err != nil {
			err = fmt.Errorf("node %s: %w", name, err)
			for _, prev := range c.nodes {
				_ = prev.rdb.Close()
			}
			return nil, fmt.Errorf("redlock: node %d: %w", i+1, err)
		}
		seen[raw] = true
		n.rdb = rdb
		c.nodes = append(c.nodes, n)
	}
	if len(c.nodes) == 1 {
		// The single-node fast path (inline.go).
		in, err := newInline(c.nodes[0], urls[0], o.tls, o.connTimeout, o.timeout)
		if err != nil {
			_ = c.nodes[0].rdb.Close()
			return nil, fmt.Errorf("redlock: node 1: node %s: %w", c.nodes[0].name, err)
		}
		c.nodes[0].inline = in
	}
	c.stores = storeLanes(c.nodes, c.guard)
	for i, n := range c.nodes {
		go n.runLane()
		go c.stores[i].runLane()
	}
	return c, nil
}

// closeWait bounds how long Close waits for requests still queued: a node
// that swallows traffic would otherwise hold each round for the lanes'
// long read timeout.
const closeWait = 2 * time.Second

// Close stops the client. Requests already queued (such as releases) are
// still sent; Close waits for them, up to 2 s, and closes the connections
// (requests still unanswered then fail; their keys expire by their TTL).
// It does not wait for a node whose requests were all given up by their
// callers (reads, health checks and warm-ups past their timeout, and
// grants or extensions their caller decided without). Leases still held
// are not released.
func (c *Client) Close() error {
	var errs []error
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		for i, n := range c.nodes {
			n.close()
			c.stores[i].close()
		}
		timer := time.NewTimer(closeWait)
		defer timer.Stop()
		expired := false
		for i, n := range c.nodes {
			for _, l := range []*node{n, c.stores[i]} {
				if !expired && !l.cutOffOK() {
					select {
					case <-l.laneDone:
					case <-timer.C:
						expired = true
					}
				}
			}
			// Past the deadline, closing the connections makes the lanes'
			// rounds in flight fail at once and the rest of their queues
			// with them.
			if err := n.rdb.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", n.name, err))
			}
			<-n.laneDone
			<-c.stores[i].laneDone
			if n.inline != nil {
				// The lane has ended, so no inline round runs any more.
				if err := n.inline.rdb.Close(); err != nil {
					errs = append(errs, fmt.Errorf("close %s (inline): %w", n.name, err))
				}
			}
		}
	})
	return errors.Join(errs...)
}

// Quorum returns how many nodes must agree: N/2+1.
func (c *Client) Quorum() int { return c.quorum }

// Timeout returns the per-node request timeout (WithTimeout).
func (c *Client) Timeout() time.Duration { return c.opts.timeout }

// Servers returns the nodes' URLs with passwords redacted, in the order
// given.
func (c *Client) Servers() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.name
	}
	return out
}

// guard is the current restart guard.
func (c *Client) guard() time.Duration {
	if c.opts.restartGuard > 0 {
		return c.opts.restartGuard
	}
	return time.Duration(c.maxTTL.Load())
}

// fenceExpiry is how long a fencing counter is kept after it was raised:
// the WithFenceExpiry setting, but never less than the restart guard (so
// the time floor that covers a counter lost with a node's data covers an
// expired one too, under the same clock precondition) nor the longest TTL
// requested.
func (c *Client) fenceExpiry() time.Duration {
	return max(c.opts.fenceExpiry, c.guard(), time.Duration(c.maxTTL.Load()), time.Millisecond)
}

// votesIn is how long until node n votes again (0 if it votes now).
func (c *Client) votesIn(n *node) time.Duration {
	if !c.opts.detect {
		return 0
	}
	votingAt, _ := n.status(c.guard())
	return max(time.Until(votingAt), 0)
}

func (c *Client) voting(n *node, now time.Time) bool {
	return !c.opts.detect || n.voting(now, c.guard())
}

func (c *Client) noteTTL(ttl time.Duration) {
	for {
		cur := c.maxTTL.Load()
		if int64(ttl) <= cur || c.maxTTL.CompareAndSwap(cur, int64(ttl)) {
			return
		}
	}
}

func (c *Client) vote(n *node, op string, v Vote, lat time.Duration) {
	if f := c.opts.observer.OnVote; f != nil {
		f(VoteEvent{Node: n.name, Op: op, Vote: v, Latency: lat})
	}
}

// leaseKey is the Redis key of a lease: one hash holding its lock, fence
// counter, completed epoch and note (the layout is in acquirebatch.lua and
// the package documentation). The braces make it a hash tag, so a lease's
// key and a Cluster slot go together.
func leaseKey(key string) string { return "{" + key + "}:lease" }

// hashKey is the Redis key of the lease named key: that of PREFIX:key
// when the client was opened with a prefix (Open).
func (c *Client) hashKey(key string) string { return leaseKey(c.prefix + key) }

func checkKey(key string) error {
	if key == "" {
		return errors.New("redlock: empty key")
	}
	if strings.ContainsAny(key, "{}") {
		return fmt.Errorf("redlock: key %q must not contain braces (they form the hash tag)", key)
	}
	return nil
}

// answer is one node's reply to one op.
type answer struct {
	node int
	cmds []*redis.Cmd
	err  error
	at   time.Duration // since the round started
}

// fanout submits one op per node, built by calls, and returns the channel
// on which the answers arrive (buffered: the lanes never block on it).
// inline says that the caller's decision timeout is the per-node timeout:
// a single node's fast path may then run the op on the caller's goroutine
// (see inline.go), its answer already on the channel when fanout returns.
func (c *Client) fanout(ctx context.Context, start time.Time, calls func(i int) []call, abandoned <-chan struct{}, inline bool) (<-chan answer, int) {
	ch := make(chan answer, len(c.nodes))
	sent := 0
	for i, n := range c.nodes {
		i := i
		o := &op{
			calls:     calls(i),
			abandoned: abandoned,
			reply: func(res []*redis.Cmd, err error) {
				ch <- answer{node: i, cmds: res, err: err, at: time.Since(start)}
			},
		}
		if inline && n.tryInline(ctx, o) {
			sent++
			continue
		}
		if n.submit(o) {
			sent++
		} else {
			ch <- answer{node: i, err: lease.ErrClosed, at: 0}
			sent++
		}
	}
	return ch, sent
}

// callErr returns the error of one call of an answer.
func (a answer) callErr(j int) error {
	if a.err != nil {
		return a.err
	}
	if j >= len(a.cmds) {
		return errors.New("no reply")
	}
	return a.cmds[j].Err()
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	case []byte:
		n, _ := strconv.ParseInt(string(x), 10, 64)
		return n
	}
	return 0
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// timeoutErr is the per-node error for a node that did not answer in time.
// last is how the node's previous round failed, if it did: a connection
// that cannot be set up (a TLS certificate that is not trusted, say) often
// fails only after the next round gave up waiting, and would otherwise be
// reported as a bare timeout.
type timeoutErr struct {
	d    time.Duration
	last error
}

func (t timeoutErr) Error() string {
	if t.last != nil {
		return fmt.Sprintf("no answer within %s (the previous round failed: %v)", t.d, t.last)
	}
	return fmt.Sprintf("no answer within %s", t.d)
}
func (t timeoutErr) Timeout() bool { return true }
func (t timeoutErr) Unwrap() error { return t.last }

// simpleRound sends one call to every node and waits until `need` nodes
// answered with ok(result) == true, or that became impossible, or the
// per-node timeout (or ctx) ended the wait. When waitAll is set it keeps
// waiting for the remaining nodes until the timeout even after success.
// It returns the number of ok answers and the joined node errors.
func (c *Client) simpleRound(ctx context.Context, opName string, mk func(i int) call, need int, ok func(any) bool, abandonable, waitAll bool) (int, time.Time, error) {
	start := time.Now()
	var abandon chan struct{}
	if abandonable {
		abandon = make(chan struct{})
		defer close(abandon)
	}
	ch, total := c.fanout(ctx, start, func(i int) []call { return []call{mk(i)} }, abandon, true)
	timer := time.NewTimer(c.opts.timeout)
	defer timer.Stop()
	good, bad := 0, 0
	answered := make([]bool, len(c.nodes))
	var errs []error
	for good+bad < total {
		if !waitAll && (good >= need || bad > total-need) {
			break
		}
		select {
		case a := <-ch:
			answered[a.node] = true
			n := c.nodes[a.node]
			if err := a.callErr(0); err != nil {
				bad++
				errs = append(errs, &lease.NodeError{Node: n.name, Err: err})
				c.vote(n, opName, VoteFailed, a.at)
				continue
			}
			if !ok(a.cmds[0].Val()) {
				bad++
				c.vote(n, opName, VoteRefused, a.at)
				continue
			}
			if !c.voting(n, time.Now()) {
				bad++
				errs = append(errs, &lease.NodeError{Node: n.name, Err: lease.ErrRestarted})
				c.vote(n, opName, VoteNotVoting, a.at)
				continue
			}
			good++
			c.vote(n, opName, VoteGranted, a.at)
		case <-timer.C:
			return good, start, errors.Join(append(errs, c.missing(opName, answered, timeoutErr{d: c.opts.timeout})...)...)
		case <-ctx.Done():
			return good, start, errors.Join(append(errs, c.missing(opName, answered, ctx.Err())...)...)
		}
	}
	return good, start, errors.Join(errs...)
}

// missing reports the nodes that did not answer.
func (c *Client) missing(opName string, answered []bool, err error) []error {
	var errs []error
	for i, ok := range answered {
		if !ok {
			errs = append(errs, &lease.NodeError{Node: c.nodes[i].name, Err: c.nodes[i].unanswered(err)})
			c.vote(c.nodes[i], opName, VoteFailed, c.opts.timeout)
		}
	}
	return errs
}

func isOne(v any) bool { return toInt64(v) == 1 }

// isHeld accepts an extend's answer: extended (1) or taken where the lock
// was missing (2).
func isHeld(v any) bool { n := toInt64(v); return n == 1 || n == 2 }
