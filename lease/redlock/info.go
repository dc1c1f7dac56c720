package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/lease"
)

// SetNote stores a note beside the lease key on every node, for example
// the last run of a job. A node keeps the note with the highest version;
// versions must be below 2^53 (unix milliseconds are a good choice). It
// returns nil once a quorum answered.
func (c *Client) SetNote(ctx context.Context, key string, version int64, note string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	k := c.hashKey(key)
	good, _, errs := c.simpleRound(ctx, "note",
		func(int) call {
			return call{script: noteScript, keys: []string{k}, args: []any{strconv.FormatInt(version, 10), note}}
		}, c.quorum, func(any) bool { return true }, false, false)
	if good < c.quorum {
		return fmt.Errorf("set note %s: %w%s", key, lease.ErrNoQuorum, nodeSuffix(errs))
	}
	return nil
}

// Inspect reads the state of key from all nodes (waiting up to the per-node
// timeout for each). It fails only when fewer than a quorum answered.
func (c *Client) Inspect(ctx context.Context, key string) (lease.Info, error) {
	if err := checkKey(key); err != nil {
		return lease.Info{}, err
	}
	k := c.hashKey(key)
	start := time.Now()
	abandon := make(chan struct{})
	defer close(abandon)
	ch, total := c.fanout(ctx, start, func(int) []call {
		return []call{{script: inspectScript, keys: []string{k}}}
	}, abandon, true)
	timer := time.NewTimer(c.opts.timeout)
	defer timer.Stop()
	info := lease.Info{NoteVersion: -1}
	holders := map[string]int{}
	var free []time.Duration
	answered := make([]bool, len(c.nodes))
	var errs []error
loop:
	for got := 0; got < total; got++ {
		select {
		case a := <-ch:
			answered[a.node] = true
			if err := a.callErr(0); err != nil {
				errs = append(errs, &lease.NodeError{Node: c.nodes[a.node].name, Err: err})
				continue
			}
			vals, _ := a.cmds[0].Val().([]any)
			if len(vals) < 6 {
				continue
			}
			info.Answered++
			if v := toString(vals[0]); v != "" {
				_, owner, _ := cutValue(v)
				holders[owner]++
				free = append(free, time.Duration(max(toInt64(vals[1]), 0))*time.Millisecond)
			} else {
				// Free here once the node votes: a node that restarted
				// (and lost the holder's lock) does not before its guard.
				free = append(free, c.votesIn(c.nodes[a.node]))
			}
			info.Fence = max(info.Fence, toInt64(vals[2]))
			info.DoneEpoch = max(info.DoneEpoch, toInt64(vals[3]))
			if v := toInt64(vals[4]); v > info.NoteVersion {
				info.NoteVersion, info.Note = v, toString(vals[5])
			}
		case <-timer.C:
			errs = append(errs, c.missing("inspect", answered, timeoutErr{d: c.opts.timeout})...)
			break loop
		case <-ctx.Done():
			errs = append(errs, c.missing("inspect", answered, ctx.Err())...)
			break loop
		}
	}
	for h, n := range holders {
		if n > info.HolderNodes || (n == info.HolderNodes && h < info.Holder) {
			info.Holder, info.HolderNodes = h, n
		}
	}
	slices.Sort(free)
	if len(free) >= c.quorum {
		info.TTL = free[c.quorum-1]
	}
	if len(errs) > 0 {
		info.NodeErrs = errors.Join(errs...)
	}
	if info.Answered < c.quorum {
		return info, fmt.Errorf("inspect %s: %w (%d answered)%s", key, lease.ErrNoQuorum, info.Answered, nodeSuffix(info.NodeErrs))
	}
	return info, nil
}

// Warm opens every node's connections before the first round: the dial,
// a TLS handshake, AUTH, the restart check and the script loading that a
// new connection costs would otherwise count against the first round's
// per-node timeout (a fresh process's first Acquire over TLS can miss it
// on every node). Each node is warmed through the ordered lanes its rounds
// and its store calls (entries, logs, heartbeats) use. Warm returns when
// every lane answered or failed, or when ctx ends, with the nodes' errors
// joined; they need no handling, since the next round reports them again.
func (c *Client) Warm(ctx context.Context) error {
	if c.closed.Load() {
		return lease.ErrClosed
	}
	lanes := append(slices.Clip(c.nodes), c.stores...)
	errs := make(chan error, len(lanes))
	abandon := make(chan struct{}) // a PING left unsent changes nothing
	defer close(abandon)
	for _, n := range lanes {
		o := &op{abandoned: abandon, reply: func(_ []*redis.Cmd, err error) {
			if err != nil {
				err = &lease.NodeError{Node: n.name, Err: err}
			}
			errs <- err
		}}
		if !n.submit(o) {
			return lease.ErrClosed
		}
	}
	var all []error
	// A node's two lanes (leases, store) mostly fail alike: the node is
	// named once, with the first of its errors.
	failed := map[string]bool{}
	for range lanes {
		select {
		case err := <-errs:
			var ne *lease.NodeError
			if errors.As(err, &ne) {
				if failed[ne.Node] {
					continue
				}
				failed[ne.Node] = true
			}
			all = append(all, err)
		case <-ctx.Done():
			return fmt.Errorf("warm: %w", errors.Join(append(all, ctx.Err())...))
		}
	}
	return errors.Join(all...)
}

// pingKey is the lease whose (absent) keys Health reads.
const pingKey = "lease.ping"

// Health checks every node in parallel, each bounded by the larger of the
// per-node timeout and 1 s (a health check may wait for a cold connection).
// The check is a round like the others, through the node's ordered lane: a
// read-only script call on an unused key (on a Cluster, on that key's
// shard), so a node that answers PING but cannot run the lease scripts is
// reported with the error its rounds get, and one refused on connection
// (a replica, a server that evicts keys, the same server as another node)
// with the reason.
func (c *Client) Health(ctx context.Context) []lease.ServerStatus {
	out := make([]lease.ServerStatus, len(c.nodes))
	done := make(chan struct{}, len(c.nodes))
	probe := []call{{script: inspectScript, keys: []string{leaseKey(pingKey)}}}
	for i, n := range c.nodes {
		go func(i int, n *node) {
			defer func() { done <- struct{}{} }()
			wait := max(c.opts.timeout, time.Second)
			timer := time.NewTimer(wait)
			defer timer.Stop()
			abandon := make(chan struct{})
			defer close(abandon)
			replies := make(chan error, 1)
			t0 := time.Now()
			var err error
			if !n.submit(&op{calls: probe, abandoned: abandon, reply: func(res []*redis.Cmd, err error) {
				if err == nil && len(res) > 0 {
					err = res[0].Err()
				}
				replies <- err
			}}) {
				err = lease.ErrClosed
			} else {
				select {
				case err = <-replies:
				case <-timer.C:
					err = n.unanswered(timeoutErr{d: wait})
				case <-ctx.Done():
					err = ctx.Err()
				}
			}
			st := lease.ServerStatus{Server: n.name, Err: err, Latency: time.Since(t0)}
			if err != nil {
				n.mu.Lock()
				if n.onConnectErr != nil {
					st.Err = n.onConnectErr
				}
				n.mu.Unlock()
			}
			votingAt, restartedAt := n.status(c.guard())
			st.RestartedAt = restartedAt
			st.Voting = st.Err == nil && (!c.opts.detect || !time.Now().Before(votingAt))
			if c.opts.detect && time.Now().Before(votingAt) {
				st.VotingAt = votingAt
			}
			out[i] = st
		}(i, n)
	}
	for range c.nodes {
		<-done
	}
	return out
}
