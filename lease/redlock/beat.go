package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/lease"
)

// Beat writes bt.Entry and reads the spaces of bt.Read in one call per
// node (see beatKeys), with each node's health from its answer.
func (c *Client) Beat(ctx context.Context, bt lease.Beat) lease.BeatResult {
	reads := make([]string, len(bt.Read))
	for i, s := range bt.Read {
		reads[i] = c.entriesKey(s)
	}
	return c.beatKeys(ctx, c.entriesKey(bt.Space), bt.Entry, reads)
}

// beatKeys stores e in the space of entries key (as PutEntry) and then reads
// the spaces of reads (as ListEntries), in one call per node (entries.lua
// "beat", checking the data marker in the same script; on a Cluster, one
// pipelined call per space, as the spaces' keys live on different
// shards): a host's heartbeat round costs each node one round trip. It
// waits for every node's answer (at most the store timeout, and ctx), so
// that each node's status is known (as Ping reports it, from the store
// lane). The write needs a quorum of nodes that stored e or had a higher
// version; the reads a quorum of answers that count (see storeVoting).
func (c *Client) beatKeys(ctx context.Context, key string, e Entry, reads []string) lease.BeatResult {
	if err := c.checkBeat(key, e, reads); err != nil {
		return lease.BeatResult{PutErr: err, ReadErr: err}
	}
	if c.closed.Load() {
		return lease.BeatResult{PutErr: lease.ErrClosed, ReadErr: lease.ErrClosed}
	}
	ttl := int64(e.TTL / time.Millisecond)
	if e.TTL%time.Millisecond != 0 {
		ttl++
	}
	put := []any{encodeVersion(e.Version), ttl, e.Data}
	start := time.Now()
	ch := make(chan answer, len(c.stores))
	for i, n := range c.stores {
		if !n.submit(&op{calls: beatCalls(n.perShard, key, e.Name, put, reads), reply: func(res []*redis.Cmd, err error) {
			ch <- answer{node: i, cmds: res, err: err, at: time.Since(start)}
		}}) {
			ch <- answer{node: i, err: lease.ErrClosed}
		}
	}
	answers := make([]*answer, len(c.stores))
	timer := time.NewTimer(c.storeTimeout())
	defer timer.Stop()
	var stop error
	for got := 0; got < len(c.stores) && stop == nil; {
		select {
		case a := <-ch:
			answers[a.node] = &a
			got++
		case <-timer.C:
			stop = timeoutErr{d: c.storeTimeout()}
		case <-ctx.Done():
			stop = ctx.Err()
		}
	}
	return c.beatReply(key, reads, answers, stop)
}

// checkBeat checks Beat's arguments as PutEntry and ListEntries do.
func (c *Client) checkBeat(key string, e Entry, reads []string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	for _, k := range reads {
		if err := checkKey(k); err != nil {
			return err
		}
	}
	if err := lease.CheckName("entry name", e.Name); err != nil {
		return err
	}
	if e.TTL < 0 {
		return fmt.Errorf("lease: put entry %s in %s: negative TTL %s", e.Name, key, e.TTL)
	}
	return nil
}

// beatCalls are the calls of a node's Beat: one entries.lua "beat" over
// every space's keys, or on a Cluster a put and one list per space.
func beatCalls(perShard bool, key, name string, put []any, reads []string) []call {
	if !perShard {
		keys := entryKeys(key)
		for _, k := range reads {
			keys = append(keys, entryKeys(k)...)
		}
		return []call{{script: entriesScript, keys: keys, args: append([]any{"beat", name}, put...)}}
	}
	calls := []call{{script: entriesScript, keys: entryKeys(key), args: append([]any{"put", name}, put...)}}
	for _, k := range reads {
		calls = append(calls, call{script: entriesScript, keys: entryKeys(k), args: []any{"list"}})
	}
	return calls
}

// beatReply folds the nodes' answers (nil: none came before stop) into a
// lease.BeatResult.
func (c *Client) beatReply(key string, reads []string, answers []*answer, stop error) lease.BeatResult {
	var r lease.BeatResult
	stored, counted := 0, 0
	merged := make([]entryMerge, len(reads))
	for i := range merged {
		merged[i] = entryMerge{}
	}
	var putErrs, readErrs []error
	now := time.Now()
	for i, a := range answers {
		n := c.stores[i]
		st := lease.ServerStatus{Server: n.name}
		var putRep any
		var lists []any
		var err error
		switch {
		case a == nil:
			err = n.unanswered(stop)
		default:
			st.Latency = a.at
			putRep, lists, err = splitBeat(a, len(reads))
		}
		if err != nil {
			putErrs = append(putErrs, &lease.NodeError{Node: n.name, Err: err})
			readErrs = append(readErrs, &lease.NodeError{Node: n.name, Err: err})
		} else {
			_ = putRep // 1 stored, 0 a higher version kept: both count
			stored++
			if !c.storeVoting(i, now) {
				readErrs = append(readErrs, &lease.NodeError{Node: n.name, Err: errStoreYoung})
			} else if ferr := foldLists(merged, lists); ferr != nil {
				readErrs = append(readErrs, &lease.NodeError{Node: n.name, Err: ferr})
			} else {
				counted++
			}
		}
		c.nodeStatus(i, &st, err)
		r.Health = append(r.Health, st)
	}
	if stored < c.quorum {
		r.PutErr = c.noQuorum(fmt.Sprintf("put entry in %s", key), stored, errors.Join(putErrs...))
	}
	if counted < c.quorum {
		r.ReadErr = c.noQuorum(fmt.Sprintf("list entries of %v", reads), counted, errors.Join(readErrs...))
		return r
	}
	for _, m := range merged {
		r.Lists = append(r.Lists, m.sorted())
	}
	return r
}

// splitBeat returns the put's reply and each space's list from a node's
// answer to beatCalls.
func splitBeat(a *answer, reads int) (any, []any, error) {
	if err := a.callErr(0); err != nil {
		return nil, nil, err
	}
	for j := range a.cmds {
		if err := a.callErr(j); err != nil {
			return nil, nil, err
		}
	}
	if len(a.cmds) == 1 { // entries.lua "beat"
		f, _ := a.cmds[0].Val().([]any)
		if len(f) != 1+reads {
			return nil, nil, fmt.Errorf("beat: unexpected reply of %d fields", len(f))
		}
		return f[0], f[1:], nil
	}
	if len(a.cmds) != 1+reads {
		return nil, nil, fmt.Errorf("beat: %d replies, want %d", len(a.cmds), 1+reads)
	}
	lists := make([]any, reads)
	for j := range lists {
		lists[j] = a.cmds[1+j].Val()
	}
	return a.cmds[0].Val(), lists, nil
}

// foldLists folds one node's lists (entries.lua "list" replies) into
// merged, one per space.
func foldLists(merged []entryMerge, lists []any) error {
	for j, v := range lists {
		f, _ := v.([]any)
		if len(f)%4 != 0 {
			return fmt.Errorf("unexpected list reply of %d fields", len(f))
		}
		for k := 0; k < len(f); k += 4 {
			if err := merged[j].add(toString(f[k]), f[k+1], f[k+2], f[k+3]); err != nil {
				return err
			}
		}
	}
	return nil
}

// nodeStatus fills the restart bookkeeping of node i into st, as Ping
// does, with err the node's answer's error.
func (c *Client) nodeStatus(i int, st *lease.ServerStatus, err error) {
	st.Err = err
	n := c.nodes[i]
	if err != nil {
		n.mu.Lock()
		if n.onConnectErr != nil {
			st.Err = n.onConnectErr
		}
		n.mu.Unlock()
	}
	votingAt, restartedAt := n.status(c.guard())
	if sv, sr := c.stores[i].status(c.guard()); sv.After(votingAt) {
		votingAt = sv
		if sr.After(restartedAt) {
			restartedAt = sr
		}
	}
	st.RestartedAt = restartedAt
	now := time.Now()
	st.Voting = st.Err == nil && (!c.opts.detect || !now.Before(votingAt))
	if c.opts.detect && now.Before(votingAt) {
		st.VotingAt = votingAt
	}
}
