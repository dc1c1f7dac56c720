package redlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/lease"
)

// Entries and logs: small values and bounded logs the client keeps beside
// the leases, on the same nodes (lease.Entries and lease.Logs).
//
// A space of entries is the hash {KEY} (entry name -> value) and the
// sorted set {KEY}:exp (the names stored with a TTL, scored by their
// expiry instant); a value holds the version, the expiry instant on the
// server's clock (Redis TIME, read inside the script), the TTL and the
// data. The version guard and the expiry run inside entries.lua, so a
// Put is atomic on each node. Expired entries count as absent, are never
// returned, and are deleted by the next Put or List of the space (Get
// deletes the one it meets); when every entry of a space has a TTL, both
// keys expire with the last of them.
//
// A log is the sorted set {KEY} (record IDs scored by At in unix ms) and
// the hash {KEY}:data (ID -> data, and the limit of the last Append).
// log.lua adds a record unless its ID is there and drops the oldest
// records beyond the limit in the same script, so a log holds at most
// limit records on each node.
//
// A write goes to every node and succeeds once a quorum stored it (or, for
// a Put, already had an equal or higher live version); the nodes that did
// not answer by then still apply it, in their lane's order. A read asks
// every node and returns once a quorum answered: entries are merged per
// name by the highest version, logs are the union of the answers by record
// ID, newest first, at most the largest limit a node reports. Any write
// quorum and read quorum share a node, so a read sees every write that
// succeeded before it began, as long as the nodes keep their data. Writes
// count every node's answer; a read counts only the answers of nodes whose
// data birth is at least the restart guard before the answer (as for
// grants, see birth.go): a node that restarted empty, was flushed or had
// its dataset replaced would answer "absent" for what it lost, so without
// a quorum of nodes older than that the read fails (ErrNoQuorum, with
// ErrRestarted NodeErrors) instead of answering empty. Once the guard has
// passed such a node counts again: what it lost is then read back only
// from the nodes that kept it, so entries written before a quorum lost
// them are gone unless written again. Store
// calls wait for each node up to the larger of the per-node timeout and
// 1 s (storeTimeout), and for ctx. They travel on a lane of their own per
// node (storeLanes), never in the rounds of grants and renewals.

// Entry is a named value of a space of entries (see PutEntry).
type Entry = lease.Entry

// Record is a record of a bounded log (see AppendLog).
type Record = lease.Record

var (
	//go:embed entries.lua
	entriesSrc    string
	entriesScript = redis.NewScript(entriesSrc)
	//go:embed log.lua
	logSrc    string
	logScript = redis.NewScript(logSrc)
)

// storeLanes returns, for each node, the lane that carries its entries
// and logs calls: a second ordered lane on the node's go-redis client,
// with a connection of its own, so that a store round (a List of a
// large space, a long log) never holds up, or shares a round with, the
// grants and renewals of the node's lease lane. Its new connections run
// the node's onConnect like the lease lane's (restart detection, server
// checks, SCRIPT LOAD); it checks the data marker and the server's
// settings with its rounds too, but reports no restarts of its own.
func storeLanes(nodes []*node, guard func() time.Duration) []*node {
	out := make([]*node, len(nodes))
	for i, n := range nodes {
		s := newNode(n.name, n.rdb, nil, guard)
		s.perShard = n.perShard
		out[i] = s
	}
	return out
}

// storeFanout submits cl to every node's store lane and returns the
// channel on which the answers arrive (buffered: the lanes never block).
func (c *Client) storeFanout(start time.Time, cl call, abandoned <-chan struct{}) <-chan answer {
	ch := make(chan answer, len(c.stores))
	for i, n := range c.stores {
		ok := n.submit(&op{
			calls:     []call{cl},
			abandoned: abandoned,
			reply: func(res []*redis.Cmd, err error) {
				ch <- answer{node: i, cmds: res, err: err, at: time.Since(start)}
			},
		})
		if !ok {
			ch <- answer{node: i, err: lease.ErrClosed}
		}
	}
	return ch
}

// minStoreTimeout is the least a store call waits for a node: entries and
// logs are not timed like grants, and a heartbeat should not fail because
// a loaded node took 60 ms.
const minStoreTimeout = time.Second

// storeTimeout is how long a store call waits for each node.
func (c *Client) storeTimeout() time.Duration { return max(c.opts.timeout, minStoreTimeout) }

// storeRound sends cl to every node and waits until a quorum answered
// without error, or so many failed that a quorum is impossible, or the
// store timeout or ctx ended the wait. It returns the answers (one per
// node that answered) and the failures of the others, joined *NodeErrors.
// A read round is abandoned once decided (queued calls not yet sent are
// dropped); a write is sent to every node whatever happens.
func (c *Client) storeRound(ctx context.Context, cl call, read bool) ([]any, error) {
	if c.closed.Load() {
		return nil, lease.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err // nothing sent
	}
	start := time.Now()
	var abandon chan struct{}
	if read {
		abandon = make(chan struct{})
		defer close(abandon)
	}
	ch, total := c.storeFanout(start, cl, abandon), len(c.stores)
	timer := time.NewTimer(c.storeTimeout())
	defer timer.Stop()
	answered := make([]bool, len(c.stores))
	var vals []any
	var errs []error
	unanswered := func(err error) {
		for i, ok := range answered {
			if !ok {
				errs = append(errs, &lease.NodeError{Node: c.stores[i].name, Err: c.stores[i].unanswered(err)})
			}
		}
	}
	for len(vals)+len(errs) < total && len(vals) < c.quorum && len(errs) <= total-c.quorum {
		select {
		case a := <-ch:
			answered[a.node] = true
			if err := a.callErr(0); err != nil {
				errs = append(errs, &lease.NodeError{Node: c.stores[a.node].name, Err: err})
				continue
			}
			if read && !c.storeVoting(a.node, time.Now()) {
				errs = append(errs, &lease.NodeError{Node: c.stores[a.node].name, Err: errStoreYoung})
				continue
			}
			vals = append(vals, a.cmds[0].Val())
		case <-timer.C:
			unanswered(timeoutErr{d: c.storeTimeout()})
			return vals, errors.Join(errs...)
		case <-ctx.Done():
			unanswered(ctx.Err())
			return vals, errors.Join(errs...)
		}
	}
	return vals, errors.Join(errs...)
}

// errStoreYoung is the per-node error of a read answer that does not
// count: the node's data is younger than the restart guard.
var errStoreYoung = fmt.Errorf("data younger than the restart guard, its answer to a read does not count: %w", lease.ErrRestarted)

// storeVoting reports whether node i's answer to a read counts at now:
// its data birth, as both its lanes know it (the lease lane's connections
// see restarts, the store lane's marker checks see data replaced under
// its own rounds), is at least the restart guard before now. A node that
// came back empty would otherwise answer "absent" for what it lost, and a
// quorum of such nodes would read a written entry (a pause flag) as
// absent.
func (c *Client) storeVoting(i int, now time.Time) bool {
	if !c.opts.detect || c.test.noStoreGuard {
		return true
	}
	g := c.guard()
	return c.nodes[i].voting(now, g) && c.stores[i].voting(now, g)
}

// noQuorum is the error of a store call that got good answers from fewer
// than a quorum of nodes: it matches ErrNoQuorum and the *NodeErrors.
func (c *Client) noQuorum(what string, good int, errs error) error {
	if errs == nil {
		return fmt.Errorf("%s: %w (%d of %d needed)", what, lease.ErrNoQuorum, good, c.quorum)
	}
	return fmt.Errorf("%s: %w (%d of %d needed): %w", what, lease.ErrNoQuorum, good, c.quorum, errs)
}

// entryKeys are the keys of the space of entries key (see above).
func entryKeys(key string) []string {
	t := "{" + key + "}"
	return []string{t, t + ":exp"}
}

// logKeys are the keys of the log key (see above).
func logKeys(key string) []string {
	t := "{" + key + "}"
	return []string{t, t + ":data"}
}

// PutEntry stores e in the space of entries key on every node, unless a
// node has a live entry of the same name with a version >= e.Version
// (there it changes nothing). A TTL counts on each node's clock from when
// the node stored the entry, to the millisecond (rounded up). PutEntry
// returns once a quorum stored e or had a higher version; otherwise the
// error matches ErrNoQuorum and joins the nodes' *NodeErrors. The name
// must pass lease.CheckName.
func (c *Client) PutEntry(ctx context.Context, key string, e Entry) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := lease.CheckName("entry name", e.Name); err != nil {
		return err
	}
	if e.TTL < 0 {
		return fmt.Errorf("lease: put entry %s in %s: negative TTL %s", e.Name, key, e.TTL)
	}
	ttl := int64(e.TTL / time.Millisecond)
	if e.TTL%time.Millisecond != 0 {
		ttl++
	}
	vals, errs := c.storeRound(ctx, call{script: entriesScript, keys: entryKeys(key),
		args: []any{"put", e.Name, encodeVersion(e.Version), ttl, e.Data}}, false)
	if len(vals) < c.quorum {
		return c.noQuorum(fmt.Sprintf("put entry %s v%d in %s", e.Name, e.Version, key), len(vals), errs)
	}
	return nil
}

// GetEntry returns the live entry name of the space key with the highest
// version among the answers of a quorum of nodes; ok is false when none
// of them has it.
func (c *Client) GetEntry(ctx context.Context, key, name string) (e Entry, ok bool, err error) {
	if err := checkKey(key); err != nil {
		return Entry{}, false, err
	}
	if err := lease.CheckName("entry name", name); err != nil {
		return Entry{}, false, err
	}
	vals, errs := c.storeRound(ctx, call{script: entriesScript, keys: entryKeys(key), args: []any{"get", name}}, true)
	if len(vals) < c.quorum {
		return Entry{}, false, c.noQuorum(fmt.Sprintf("get entry %s in %s", name, key), len(vals), errs)
	}
	m := entryMerge{}
	for _, v := range vals {
		f, _ := v.([]any)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return Entry{}, false, fmt.Errorf("get entry %s in %s: unexpected reply %v", name, key, v)
		}
		if err := m.add(name, f[0], f[1], f[2]); err != nil {
			return Entry{}, false, fmt.Errorf("get entry %s in %s: %w", name, key, err)
		}
	}
	e, ok = m[name]
	return e, ok, nil
}

// ListEntries returns the live entries of the space key, sorted by name:
// per name, the highest version among the answers of a quorum of nodes.
func (c *Client) ListEntries(ctx context.Context, key string) ([]Entry, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	vals, errs := c.storeRound(ctx, call{script: entriesScript, keys: entryKeys(key), args: []any{"list"}}, true)
	if len(vals) < c.quorum {
		return nil, c.noQuorum("list entries of "+key, len(vals), errs)
	}
	m := entryMerge{}
	for _, v := range vals {
		f, _ := v.([]any)
		if len(f)%4 != 0 {
			return nil, fmt.Errorf("list entries of %s: unexpected reply of %d fields", key, len(f))
		}
		for i := 0; i < len(f); i += 4 {
			if err := m.add(toString(f[i]), f[i+1], f[i+2], f[i+3]); err != nil {
				return nil, fmt.Errorf("list entries of %s: %w", key, err)
			}
		}
	}
	return m.sorted(), nil
}

// AppendLog adds rec to the log key on every node (a node that has its ID
// already changes nothing) and drops the oldest records beyond limit (by
// At to the millisecond, then ID) there, in the same script. It returns
// once a quorum did; otherwise the error matches ErrNoQuorum and joins
// the nodes' *NodeErrors. The ID must pass lease.CheckName.
func (c *Client) AppendLog(ctx context.Context, key string, rec Record, limit int) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := lease.CheckName("record id", rec.ID); err != nil {
		return err
	}
	if rec.At.IsZero() {
		return fmt.Errorf("lease: append %s to log %s: zero At", rec.ID, key)
	}
	if err := lease.CheckLimit(limit); err != nil {
		return err
	}
	vals, errs := c.storeRound(ctx, call{script: logScript, keys: logKeys(key),
		args: []any{"append", rec.ID, rec.At.UnixMilli(), rec.Data, limit}}, false)
	if len(vals) < c.quorum {
		return c.noQuorum(fmt.Sprintf("append %s to log %s", rec.ID, key), len(vals), errs)
	}
	return nil
}

// ReadLog returns up to n of the newest records of the log key, newest
// first: the union of the answers of a quorum of nodes, cut to the
// largest limit of an Append they report. An unknown log is empty.
func (c *Client) ReadLog(ctx context.Context, key string, n int) ([]Record, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := lease.CheckLimit(n); err != nil {
		return nil, err
	}
	vals, errs := c.storeRound(ctx, call{script: logScript, keys: logKeys(key), args: []any{"read", n}}, true)
	if len(vals) < c.quorum {
		return nil, c.noQuorum("read log "+key, len(vals), errs)
	}
	var m logMerge
	for _, v := range vals {
		f, _ := v.([]any)
		if len(f) == 0 || len(f)%3 != 1 {
			return nil, fmt.Errorf("read log %s: unexpected reply of %d fields", key, len(f))
		}
		if err := m.add(f); err != nil {
			return nil, fmt.Errorf("read log %s: %w", key, err)
		}
	}
	return m.newest(n), nil
}
