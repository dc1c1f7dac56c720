package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Request names one lease to acquire.
type Request struct {
	// Key names the lease. All Redis keys of the lease share the hash tag
	// {Key}; Key must not contain braces.
	Key string
	// TTL is the validity of the acquisition (and of each renewal).
	TTL time.Duration
	// Epoch, when positive, makes the acquisition a run-once attempt: a node
	// refuses it when Key's completed epoch is >= Epoch (see Lease.Complete).
	Epoch int64
	// Owner is free text stored with the lease and reported to refused
	// callers, e.g. "host=web1 tick=1700000000".
	Owner string
}

// Result is the outcome of one Request of TryAcquireBatch.
type Result struct {
	Lease *Lease
	Err   error
}

// Acquire takes the lease described by req, retrying failed attempts as
// the client's RetryStrategy says until ctx ends. Each attempt asks all
// nodes in parallel and returns as soon as the outcome is decided: a quorum
// granted, or enough nodes refused or failed that a quorum is impossible.
//
// On failure the error is a *RefusedError (errors.Is ErrNotObtained and one
// of ErrHeld, ErrEpochDone, ErrNoQuorum); when ctx ends it is joined with
// ctx.Err(). ErrEpochDone is never retried.
func (c *Client) Acquire(ctx context.Context, req Request) (*Lease, error) {
	retry := freshRetry(c.opts.retry)
	token := newToken()
	for {
		res := c.tryBatch(ctx, []Request{req}, []string{token})[0]
		if res.Err == nil {
			return res.Lease, nil
		}
		if errors.Is(res.Err, ErrEpochDone) || !isRefusal(res.Err) {
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
	var r *RefusedError
	return errors.As(err, &r)
}

// TryAcquireBatch makes one attempt at each request, all together: every
// node gets one pipelined round for all keys (and, with fencing, a second
// one for the tokens of the winners), not one round per key. Results are in
// the order of reqs. Keys must be distinct.
func (c *Client) TryAcquireBatch(ctx context.Context, reqs []Request) []Result {
	tokens := make([]string, len(reqs))
	for i := range tokens {
		tokens[i] = newToken()
	}
	return c.tryBatch(ctx, reqs, tokens)
}

// tally is the per-key state of one attempt.
type tally struct {
	req      Request
	keys     keys
	value    string
	granted  int
	bad      int // refused, failed or not voting
	fence    int64
	done     int64
	epochHit bool
	holders  map[string]int
	freeIn   []time.Duration
	errs     []error
	fenceOK  int
	won      bool
	err      error
}

func (t *tally) decided(q, n int) bool { return t.granted >= q || t.bad > n-q }

func (c *Client) tryBatch(ctx context.Context, reqs []Request, tokens []string) []Result {
	out := make([]Result, len(reqs))
	if c.closed.Load() {
		for i := range out {
			out[i].Err = ErrClosed
		}
		return out
	}
	tallies := make([]*tally, 0, len(reqs))
	idx := make([]int, 0, len(reqs)) // tallies[k] answers reqs[idx[k]]
	for i, r := range reqs {
		if err := checkKey(r.Key); err != nil {
			out[i].Err = err
			continue
		}
		if r.TTL < time.Millisecond {
			out[i].Err = fmt.Errorf("lease: acquire %s: TTL %s too short", r.Key, r.TTL)
			continue
		}
		c.noteTTL(r.TTL)
		tallies = append(tallies, &tally{req: r, keys: keysOf(r.Key), value: tokens[i] + " " + r.Owner, holders: map[string]int{}})
		idx = append(idx, i)
	}
	if len(tallies) == 0 {
		return out
	}
	n, q := len(c.nodes), c.quorum
	start := time.Now()
	abandon := make(chan struct{})
	calls := make([]call, len(tallies))
	for k, t := range tallies {
		calls[k] = call{script: acquireScript, keys: []string{t.keys.lock, t.keys.fence, t.keys.epoch},
			args: []any{t.value, t.req.TTL.Milliseconds(), t.req.Epoch}}
	}
	ch, total := c.fanout(start, func(int) []call { return calls }, abandon)
	timer := time.NewTimer(c.opts.timeout)
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
			voting := c.voting(nd, time.Now())
			for k, t := range tallies {
				wasDecided := t.decided(q, n)
				c.countAcquire(t, nd, a, k, voting)
				if !wasDecided && t.decided(q, n) {
					undecided--
				}
			}
		case <-timer.C:
			stopErr = timeoutErr(c.opts.timeout)
			break collect
		case <-ctx.Done():
			stopErr = ctx.Err()
			break collect
		}
	}
	timer.Stop()
	close(abandon)
	if stopErr != nil {
		for i, ok := range answered {
			if !ok {
				for _, t := range tallies {
					t.bad++
					t.errs = append(t.errs, &NodeError{Node: c.nodes[i].name, Err: stopErr})
				}
				c.vote(c.nodes[i], "acquire", VoteFailed, time.Since(start))
			}
		}
	}
	var winners []*tally
	for _, t := range tallies {
		if t.granted >= q {
			winners = append(winners, t)
		}
	}
	if c.opts.fencing && len(winners) > 0 {
		c.fenceRound(ctx, start, winners)
	}
	var losers []*tally
	for k, t := range tallies {
		i := idx[k]
		switch {
		case t.granted >= q && (!c.opts.fencing || t.fenceOK >= q):
			v := c.validity(t.req.TTL, start)
			if v <= 0 {
				t.err = &RefusedError{Key: t.req.Key, Reason: ErrNoQuorum, NodeErrs: errors.Join(t.errs...),
					Detail: fmt.Sprintf("granted, but the round took %s and left no validity", time.Since(start).Round(time.Microsecond))}
				break
			}
			l := &Lease{c: c, req: t.req, value: t.value, token: tokens[i], validUntil: start.Add(v)}
			if c.opts.fencing {
				l.fence = t.fence
			}
			out[i].Lease = l
			continue
		case t.granted >= q:
			t.err = &RefusedError{Key: t.req.Key, Reason: ErrNoQuorum, NodeErrs: errors.Join(t.errs...),
				Detail: fmt.Sprintf("granted, but only %d of %d nodes stored the fencing token", t.fenceOK, q)}
		default:
			t.err = c.refusal(t)
		}
		out[i].Err = t.err
		losers = append(losers, t)
	}
	if len(losers) > 0 {
		// Clean up everywhere, also where no answer came: each release is
		// queued behind the acquire on the same node, so it is applied after
		// it and no key is left behind.
		rel := make([]call, len(losers))
		for k, t := range losers {
			rel[k] = call{script: releaseScript, keys: []string{t.keys.lock}, args: []any{t.value}}
		}
		c.fanout(time.Now(), func(int) []call { return rel }, nil)
	}
	return out
}

// countAcquire folds node nd's answer for tally k into t.
func (c *Client) countAcquire(t *tally, nd *node, a answer, k int, voting bool) {
	if err := a.callErr(k); err != nil {
		t.bad++
		t.errs = append(t.errs, &NodeError{Node: nd.name, Err: err})
		if k == 0 {
			c.vote(nd, "acquire", VoteFailed, a.at)
		}
		return
	}
	vals, _ := a.cmds[k].Val().([]any)
	if len(vals) < 5 {
		t.bad++
		t.errs = append(t.errs, &NodeError{Node: nd.name, Err: fmt.Errorf("unexpected reply %v", a.cmds[k].Val())})
		return
	}
	status := toInt64(vals[0])
	t.done = max(t.done, toInt64(vals[1]))
	t.fence = max(t.fence, toInt64(vals[2]))
	v := VoteRefused
	switch status {
	case 1:
		t.freeIn = append(t.freeIn, 0)
		if voting {
			t.granted++
			v = VoteGranted
		} else {
			t.bad++
			t.errs = append(t.errs, &NodeError{Node: nd.name, Err: ErrRestarted})
			v = VoteNotVoting
		}
	case 2:
		t.bad++
		t.epochHit = true
	default:
		t.bad++
		holder := toString(vals[3])
		if _, owner, ok := cutValue(holder); ok {
			holder = owner
		}
		t.holders[holder]++
		t.freeIn = append(t.freeIn, time.Duration(max(toInt64(vals[4]), 0))*time.Millisecond)
	}
	if k == 0 {
		c.vote(nd, "acquire", v, a.at)
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
func (c *Client) refusal(t *tally) *RefusedError {
	e := &RefusedError{Key: t.req.Key, DoneEpoch: t.done, NodeErrs: errors.Join(t.errs...)}
	switch {
	case t.epochHit:
		e.Reason = ErrEpochDone
	case len(t.holders) > 0:
		e.Reason = ErrHeld
		best := 0
		for h, cnt := range t.holders {
			if cnt > best || (cnt == best && h < e.Holder) {
				e.Holder, best = h, cnt
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
		e.Reason = ErrNoQuorum
	}
	return e
}

// fenceRound picks each winner's token, max(seen+1, unix µs), and writes it
// to the nodes while the lease is held there; a quorum must store it before
// the lease is handed out.
func (c *Client) fenceRound(ctx context.Context, start time.Time, winners []*tally) {
	floor := time.Now().UnixMicro()
	calls := make([]call, len(winners))
	for k, t := range winners {
		t.fence = max(t.fence+1, floor)
		calls[k] = call{script: fenceScript, keys: []string{t.keys.lock, t.keys.fence}, args: []any{t.value, strconv.FormatInt(t.fence, 10)}}
	}
	abandon := make(chan struct{})
	defer close(abandon)
	fstart := time.Now()
	ch, total := c.fanout(fstart, func(int) []call { return calls }, abandon)
	timer := time.NewTimer(c.opts.timeout)
	defer timer.Stop()
	q := c.quorum
	pending := len(winners)
	for got := 0; got < total && pending > 0; got++ {
		select {
		case a := <-ch:
			nd := c.nodes[a.node]
			voting := c.voting(nd, time.Now())
			for k, t := range winners {
				if err := a.callErr(k); err != nil {
					t.errs = append(t.errs, &NodeError{Node: nd.name, Err: fmt.Errorf("fence: %w", err)})
					continue
				}
				if voting && isOne(a.cmds[k].Val()) {
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
