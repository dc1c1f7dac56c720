package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/lease"
)

// Acquire takes the lease described by req, retrying failed attempts as
// the client's RetryStrategy says until ctx ends. Each attempt asks all
// nodes in parallel and returns as soon as the outcome is decided: a quorum
// granted, or enough nodes refused or failed that a quorum is impossible.
//
// On failure the error is a *RefusedError (errors.Is ErrNotObtained and one
// of ErrHeld, ErrEpochDone, ErrNoQuorum); when ctx ends it is joined with
// ctx.Err(). ErrEpochDone is never retried.
//
// After a lost attempt on a key, the next attempt on it from this Client
// (a retry, or the caller's next Acquire or TryAcquireBatch) first waits
// until the lost attempt's cleanup was answered by the nodes it went to
// (at most the per-node timeout) and until a random moment within 4× the
// lost attempt's duration after it ended (at most the per-node timeout), so
// that contending clients do not keep each other's nodes forever.
func (c *Client) Acquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	retry := freshRetry(c.opts.retry)
	token := lease.NewToken()
	for {
		res := c.tryBatch(ctx, []lease.Request{req}, []string{token})[0]
		if res.Err == nil {
			return res.Lease, nil
		}
		if errors.Is(res.Err, lease.ErrEpochDone) || !isRefusal(res.Err) {
			return nil, res.Err
		}
		wait := retry.NextBackoff()
		if wait <= 0 {
			return nil, res.Err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(res.Err, ctx.Err())
		case <-t.C:
		}
	}
}

func isRefusal(err error) bool {
	var r *lease.RefusedError
	return errors.As(err, &r)
}

// TryAcquireBatch makes one attempt at each request, all together: every
// node gets one pipelined round for all keys, not one round per key (with
// fencing, a second one only for keys whose nodes' counters disagreed; see
// the package documentation). Results are in the order of reqs. Keys must be
// distinct.
//
// The decision timeout of the round grows with the batch: the per-node
// timeout plus 100 µs for every key after the first (about 1 s for 10,000
// keys with the default 50 ms), as a node needs time to run every key's
// script, and several clients' batches of the same tick queue up on it. It
// only matters when fewer than a quorum of nodes has answered: the round is
// decided as soon as a quorum has.
func (c *Client) TryAcquireBatch(ctx context.Context, reqs []lease.Request) []lease.Result {
	return c.tryBatch(ctx, reqs, lease.NewTokens(len(reqs)))
}

// perKeyTimeout is what a batch adds to the per-node timeout for each key
// after the first.
//
// A node runs one acquire script in about 5 µs; 100 µs leaves room for a
// few clients firing the same batch and a machine that is busy with more
// than Redis (measured: 3 clients and 5 nodes sharing 2 cores decide
// 10,000 keys in about 700 ms).
const perKeyTimeout = 100 * time.Microsecond

// batchTimeout is the decision timeout of a round of n keys.
func (c *Client) batchTimeout(n int) time.Duration {
	return c.opts.timeout + time.Duration(max(n-1, 0))*perKeyTimeout
}

// holderCount counts the nodes held by one other owner.
type holderCount struct {
	owner string
	n     int
}

// tally is the per-key state of one attempt.
type tally struct {
	req      lease.Request
	value    string
	keys     []string // the lease's hash (one: leaseKey), shared with the batch's calls
	fenceExp any      // fence counter expiry ms (acquirebatch.lua's ARGV[2])
	granted  int
	bad      int // refused, failed or not voting
	done     int64
	fmin     int64 // fence counters returned by voting grants (raised by the script)
	fmax     int64
	seen     int64 // highest fence counter in the other answers
	fence    int64 // the token handed out
	epochHit bool
	young    int // grants that did not count: the node's data is younger than EpochTime
	answers  int // nodes that answered (or failed)
	holders  []holderCount
	freeIn   []time.Duration
	errs     []error
	refused  uint64 // bit i: node i refused, nothing to clean up there (nodes 0..63)
	fenceOK  int
}

// decided reports whether the attempt's outcome is known: a quorum
// granted, too many nodes refused or failed for one, or a node reported
// the epoch completed (a mark exists only if the epoch's work finished, so
// one node's mark refuses it whatever the others say). An attempt lost
// because nodes' data is younger than the epoch waits for every node's
// answer (up to the timeout): the others may hold the completion mark the
// young ones lost, and the refusal should then say the epoch is done.
func (t *tally) decided(q, n int) bool {
	return t.granted >= q || t.epochHit || (t.bad > n-q && (t.young == 0 || t.answers == n))
}

// tryBatch makes one attempt at every request with its token, in one
// round per node: it checks the requests, builds the scripts' arguments,
// counts the nodes' answers until every key is decided, settles the
// fencing tokens, and turns each tally into a lease or a refusal,
// releasing the lost attempts.
func (c *Client) tryBatch(ctx context.Context, reqs []lease.Request, tokens []string) []lease.Result {
	out := make([]lease.Result, len(reqs))
	if c.closed.Load() {
		for i := range out {
			out[i].Err = lease.ErrClosed
		}
		return out
	}
	tallies, idx := c.checkBatch(reqs, out)
	if len(tallies) == 0 {
		return out
	}
	c.lost.wait(ctx, func(yield func(string) bool) {
		for k := range tallies {
			if !yield(tallies[k].req.Key) {
				return
			}
		}
	})
	args := c.batchArgs(tallies, idx, tokens)
	start := time.Now()
	c.acquireRound(ctx, start, tallies, args)
	if c.opts.fencing {
		c.settleFences(ctx, tallies)
	}
	losers := c.decideBatch(out, tallies, idx, tokens, start)
	if len(losers) > 0 {
		c.cleanUp(start, losers)
	}
	return out
}

// cleanUp releases the lost attempts on every node that did not refuse
// them, also where no answer came: each release is queued behind the
// acquire on the same node, so it is applied after it and no key is left
// behind. The next attempt on these keys from this client waits for it
// (see lostKeys).
func (c *Client) cleanUp(start time.Time, losers []*tally) {
	perNode := make([][]call, len(c.nodes))
	sendTo := 0
	for i, nd := range c.nodes {
		var mine []*tally
		for _, t := range losers {
			if i < 64 && t.refused&(1<<i) != 0 {
				continue
			}
			mine = append(mine, t)
		}
		if len(mine) > 0 {
			perNode[i] = releaseCalls(nd, mine)
			sendTo++
		}
	}
	end := time.Now()
	cl := newCleanup(sendTo, c.batchTimeout(len(losers)))
	for i, nd := range c.nodes {
		if len(perNode[i]) == 0 {
			continue
		}
		ok := nd.submit(&op{calls: perNode[i], reply: func([]*redis.Cmd, error) { cl.answered() }})
		if !ok {
			cl.answered()
		}
	}
	keys := make([]string, len(losers))
	for k, t := range losers {
		keys[k] = t.req.Key
	}
	c.lost.remember(keys, cl, end, end.Sub(start), c.opts.timeout)
}

// countAcquire folds node nd's answer for tally k into t. notVoting, when
// not nil, is why a grant of the node does not count (ErrRestarted,
// ErrDataYounger); votesIn is how long until the node votes again after a
// restart.
func (c *Client) countAcquire(t *tally, nd *node, a answer, k int, notVoting error, votesIn time.Duration) {
	t.answers++
	ka, err := c.keyAnswer(a, k)
	if err != nil {
		t.bad++
		t.errs = append(t.errs, &lease.NodeError{Node: nd.name, Err: err})
		if k == 0 {
			c.vote(nd, "acquire", VoteFailed, a.at)
		}
		return
	}
	status := ka.status
	t.done = max(t.done, ka.done)
	fence := ka.fence
	v := VoteRefused
	switch status {
	case 1:
		// The key is free on this node for this request: now if the node
		// votes, once its restart guard passed if it restarted, never if
		// its data is younger than the epoch. A holder's refusal must not
		// say "free in 0s" because nodes that lost its lock do not vote.
		switch {
		case notVoting == nil:
			t.freeIn = append(t.freeIn, 0)
		case errors.Is(notVoting, lease.ErrRestarted):
			t.freeIn = append(t.freeIn, max(votesIn, 0))
		}
		if notVoting == nil {
			t.granted++
			if t.granted == 1 {
				t.fmin, t.fmax = fence, fence
			} else {
				t.fmin, t.fmax = min(t.fmin, fence), max(t.fmax, fence)
			}
			v = VoteGranted
		} else {
			t.seen = max(t.seen, fence)
			t.bad++
			t.errs = append(t.errs, &lease.NodeError{Node: nd.name, Err: notVoting})
			if errors.Is(notVoting, lease.ErrDataYounger) {
				t.young++
			}
			v = VoteNotVoting
		}
	case 2:
		t.seen = max(t.seen, fence)
		t.bad++
		t.epochHit = true
		t.markRefused(a.node)
	default:
		t.seen = max(t.seen, fence)
		t.bad++
		t.markRefused(a.node)
		holder := ka.holder
		if _, owner, ok := cutValue(holder); ok {
			holder = owner
		}
		found := false
		for j := range t.holders {
			if t.holders[j].owner == holder {
				t.holders[j].n++
				found = true
				break
			}
		}
		if !found {
			t.holders = append(t.holders, holderCount{owner: holder, n: 1})
		}
		t.freeIn = append(t.freeIn, time.Duration(max(ka.pttl, 0))*time.Millisecond)
	}
	if k == 0 {
		c.vote(nd, "acquire", v, a.at)
	}
}

func (t *tally) markRefused(node int) {
	if node < 64 {
		t.refused |= 1 << node
	}
}

// cutValue splits a stored value into token and owner.
func cutValue(v string) (token, owner string, ok bool) {
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' {
			return v[:i], v[i+1:], true
		}
	}
	return v, "", false
}

// refusal builds the error of a lost attempt.
func (c *Client) refusal(t *tally) *lease.RefusedError {
	e := &lease.RefusedError{Key: t.req.Key, DoneEpoch: t.done, NodeErrs: errors.Join(t.errs...)}
	switch {
	case t.epochHit:
		e.Reason = lease.ErrEpochDone
	case len(t.holders) > 0:
		e.Reason = lease.ErrHeld
		for _, h := range t.holders {
			if h.n > e.HolderNodes || (h.n == e.HolderNodes && h.owner < e.Holder) {
				e.Holder, e.HolderNodes = h.owner, h.n
			}
		}
		// Free on a quorum when the quorum-th smallest remaining TTL ends.
		free := slices.Clone(t.freeIn)
		slices.Sort(free)
		if len(free) >= c.quorum {
			e.HolderTTL = free[c.quorum-1]
		} else if len(free) > 0 {
			e.HolderTTL = free[len(free)-1]
		}
	default:
		e.Reason = lease.ErrNoQuorum
	}
	if t.young > 0 {
		e.Detail = fmt.Sprintf("%d node(s) did not vote for the epoch: their data is younger than its EpochTime (a restart, failover or flush since); an old epoch is not taken over once a quorum lost its data after it", t.young)
	}
	return e
}

// fenceRound is the second round for winners whose nodes returned
// different fence counters: the token is max(highest counter, highest
// other counter + 1, unix µs), written to the nodes while the lease is held
// there; a quorum must store it before the lease is handed out.
func (c *Client) fenceRound(ctx context.Context, winners []*tally) {
	floor := time.Now().UnixMicro()
	for _, t := range winners {
		t.fence = max(t.fmax, t.seen+1, floor)
		t.fenceOK = 0
	}
	calls := c.fenceCalls(winners)
	abandon := make(chan struct{})
	defer close(abandon)
	fstart := time.Now()
	ch, total := c.fanout(ctx, fstart, func(i int) []call { return calls.forNode(c.nodes[i]) }, abandon, len(winners) == 1)
	timeout := c.batchTimeout(len(winners))
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	q := c.quorum
	pending := len(winners)
	for got := 0; got < total && pending > 0; got++ {
		select {
		case a := <-ch:
			nd := c.nodes[a.node]
			voting := c.voting(nd, time.Now())
			for k, t := range winners {
				ok, err := c.fenceAnswer(a, k)
				if err != nil {
					t.errs = append(t.errs, &lease.NodeError{Node: nd.name, Err: fmt.Errorf("fence: %w", err)})
					continue
				}
				if voting && ok {
					t.fenceOK++
					if t.fenceOK == q {
						pending--
					}
				}
			}
			if f := c.opts.observer.OnVote; f != nil {
				v := VoteGranted
				if a.err != nil {
					v = VoteFailed
				}
				f(VoteEvent{Node: nd.name, Op: "fence", Vote: v, Latency: a.at})
			}
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
