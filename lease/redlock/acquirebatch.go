package redlock

// The phases of one TryAcquireBatch round (tryBatch in acquire.go).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// checkBatch refuses, in out, the requests no node may see (a bad key, a
// TTL under 1 ms) and returns a tally for each of the others; tallies[k]
// answers reqs[idx[k]].
func (c *Client) checkBatch(reqs []lease.Request, out []lease.Result) (tallies []tally, idx []int) {
	tallies = make([]tally, 0, len(reqs))
	idx = make([]int, 0, len(reqs))
	for i, r := range reqs {
		if err := checkKey(r.Key); err != nil {
			out[i].Err = err
			continue
		}
		if r.TTL < time.Millisecond {
			out[i].Err = fmt.Errorf("redlock: acquire %s: TTL %s too short", r.Key, r.TTL)
			continue
		}
		c.noteTTL(r.TTL)
		tallies = append(tallies, tally{req: r})
		idx = append(idx, i)
	}
	return tallies, idx
}

// acquireArgs are the arguments of a batch's acquire scripts.
type acquireArgs struct {
	keyArr          []string
	ttls, epochs    []any
	floor, fenceExp any
}

// batchArgs fills each tally's value, keys and refusal times and returns
// the scripts' arguments. One backing array each for the keys, arguments
// and refusal times of all tallies: a batch of 10,000 keys costs a few
// allocations per key (its value and key name), not a dozen.
func (c *Client) batchArgs(tallies []tally, idx []int, tokens []string) acquireArgs {
	n := len(c.nodes)
	a := acquireArgs{keyArr: make([]string, len(tallies)), ttls: make([]any, len(tallies)),
		epochs: make([]any, len(tallies)), floor: any("0"), fenceExp: any(c.fenceExpiry().Milliseconds())}
	freeArr := make([]time.Duration, n*len(tallies))
	if c.opts.fencing {
		a.floor = strconv.FormatInt(time.Now().UnixMicro(), 10)
	}
	var lastTTL, lastEpoch int64 = -1, -1
	var ttlArg, epochArg any
	for k := range tallies {
		t := &tallies[k]
		r := &t.req
		t.value = tokens[idx[k]] + " " + r.Owner
		t.keys = a.keyArr[k : k+1 : k+1]
		t.keys[0] = c.hashKey(r.Key)
		if ms := r.TTL.Milliseconds(); ms != lastTTL {
			lastTTL, ttlArg = ms, ms
		}
		if r.Epoch != lastEpoch {
			lastEpoch, epochArg = r.Epoch, r.Epoch
		}
		a.ttls[k], a.epochs[k] = ttlArg, epochArg
		t.fenceExp = a.fenceExp
		t.freeIn = freeArr[n*k : n*k : n*k+n]
	}
	return a
}

// acquireRound sends the batch's acquire scripts to every node, started
// at start, and counts the answers into the tallies until every key is
// decided, every node answered, the batch's timeout passed or ctx ended;
// a node that did not answer by then counts as failed for every key.
func (c *Client) acquireRound(ctx context.Context, start time.Time, tallies []tally, args acquireArgs) {
	n, q := len(c.nodes), c.quorum
	abandon := make(chan struct{})
	calls := c.buildAcquireCalls(tallies, args.keyArr, args.ttls, args.epochs, args.floor, args.fenceExp)
	ch, total := c.fanout(ctx, start, func(i int) []call { return calls.forNode(c.nodes[i]) }, abandon, len(tallies) == 1)
	timeout := c.batchTimeout(len(tallies))
	timer := time.NewTimer(timeout)
	answered := make([]bool, n)
	got := 0
	undecided := len(tallies)
	var stopErr error
collect:
	for got < total && undecided > 0 {
		select {
		case a := <-ch:
			got++
			answered[a.node] = true
			nd := c.nodes[a.node]
			now, birth, guard := time.Now(), nd.dataBirth(), c.guard()
			for k := range tallies {
				t := &tallies[k]
				wasDecided := t.decided(q, n)
				var notVoting error
				if c.opts.detect {
					_, notVoting = votesFor(birth, now, t.req.EpochTime, guard)
				}
				c.countAcquire(t, nd, a, k, notVoting, birth.Add(guard).Sub(now))
				if !wasDecided && t.decided(q, n) {
					undecided--
				}
			}
		case <-timer.C:
			stopErr = timeoutErr{d: timeout}
			break collect
		case <-ctx.Done():
			stopErr = ctx.Err()
			break collect
		}
	}
	timer.Stop()
	close(abandon)
	if stopErr == nil {
		return
	}
	for i, ok := range answered {
		if ok {
			continue
		}
		err := c.nodes[i].unanswered(stopErr)
		for k := range tallies {
			t := &tallies[k]
			t.bad++
			t.errs = append(t.errs, &lease.NodeError{Node: c.nodes[i].name, Err: err})
		}
		c.vote(c.nodes[i], "acquire", VoteFailed, time.Since(start))
	}
}

// settleFences sets the fencing token of every key a quorum granted.
// Usually the quorum's counters agree (each node raised its counter to the
// same time floor) and the token is known; otherwise a second round stores
// the highest one on a quorum.
func (c *Client) settleFences(ctx context.Context, tallies []tally) {
	var fence []*tally
	for k := range tallies {
		t := &tallies[k]
		if t.granted < c.quorum {
			continue
		}
		if t.fmin == t.fmax && t.fmax > t.seen {
			t.fence, t.fenceOK = t.fmax, t.granted
			continue
		}
		fence = append(fence, t)
	}
	if len(fence) > 0 {
		c.fenceRound(ctx, fence)
	}
}

// decideBatch fills out[idx[k]] from tallies[k], the round having started
// at start: a Lease for each key a quorum granted (with its fencing token
// stored on a quorum) with validity left, a refusal for the others. It
// returns the tallies of the lost attempts, for cleanUp.
func (c *Client) decideBatch(out []lease.Result, tallies []tally, idx []int, tokens []string, start time.Time) (losers []*tally) {
	q := c.quorum
	for k := range tallies {
		t := &tallies[k]
		i := idx[k]
		var err *lease.RefusedError
		switch {
		case t.epochHit:
			err = c.refusal(t)
		case t.granted >= q && (!c.opts.fencing || t.fenceOK >= q):
			v := lease.Validity(start, t.req.TTL, c.opts.drift)
			if v <= 0 {
				err = &lease.RefusedError{Key: t.req.Key, Reason: lease.ErrNoQuorum, NodeErrs: errors.Join(t.errs...),
					Detail: fmt.Sprintf("granted, but the round took %s and left no validity", time.Since(start).Round(time.Microsecond))}
				break
			}
			var fence int64
			if c.opts.fencing {
				fence = t.fence
			}
			l := &Lease{State: lease.NewState(t.req, strings.Clone(tokens[i]), fence), c: c, value: t.value}
			l.SetValidUntil(start.Add(v))
			out[i].Lease = l
			continue
		case t.granted >= q:
			err = &lease.RefusedError{Key: t.req.Key, Reason: lease.ErrNoQuorum, NodeErrs: errors.Join(t.errs...),
				Detail: fmt.Sprintf("granted, but only %d of %d nodes stored the fencing token", t.fenceOK, q)}
		default:
			err = c.refusal(t)
		}
		out[i].Err = err
		losers = append(losers, t)
	}
	return losers
}
