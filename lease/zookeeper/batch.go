package zookeeper

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasecron/leasecron/lease"
)

// groupSize bounds the keys one multi acquires at once (3 or 4 operations
// a key, a few hundred bytes each: far below ZooKeeper's 1 MB request
// limit, jute.maxbuffer).
const groupSize = 100

// TryAcquireBatch makes one attempt per request. Free keys are taken in
// groups of up to 100 per multi (one round trip and one transaction for
// the whole group: a tick's jobs on a quiet ensemble); a multi fails as a
// whole when any key of its group is held, completed or changed, and
// then each key of that group is tried on its own, those attempts
// pipelined on the session's connection.
func (b *Backend) TryAcquireBatch(ctx context.Context, reqs []lease.Request) []lease.Result {
	out := make([]lease.Result, len(reqs))
	if err := b.sessionErr(); err != nil { // a later session, on servers that grant less
		for i, r := range reqs {
			out[i].Err = refused(r.Key, lease.ErrNoQuorum, "", err)
		}
		return out
	}
	timeout := b.cfg.Timeout + time.Duration(len(reqs))*100*time.Microsecond
	var wg sync.WaitGroup
	single := func(i int) {
		defer wg.Done()
		l, err := b.attempt(ctx, reqs[i], lease.NewToken(), timeout)
		if err != nil {
			out[i].Err = err
			return
		}
		out[i].Lease = l
	}
	var group []int
	flush := func() {
		g := group
		group = nil
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b.attemptGroup(ctx, reqs, g, out, timeout) {
				return
			}
			// The multi failed as a whole: a key of the group is held,
			// completed or was changed. Try each key on its own.
			for _, i := range g {
				wg.Add(1)
				go single(i)
			}
		}()
	}
	for i, r := range reqs {
		if checkKey(r.Key) != nil || r.TTL <= 0 {
			wg.Add(1)
			go single(i) // reports the error
			continue
		}
		group = append(group, i)
		if len(group) == groupSize {
			flush()
		}
	}
	if len(group) > 0 {
		flush()
	}
	wg.Wait()
	return out
}

// member is one key of a group multi: its place in the request list, in
// the multi's operations, and what the client knew of its done node.
type member struct {
	i       int
	token   string
	p       paths
	fresh   bool
	done    doneState
	doneOp  int // operation whose reply carries the done node's version
	lockOp  int // operation whose reply carries the lock's czxid
	created bool
}

// attemptGroup tries to take every request of idx in one multi. It
// returns false, having changed nothing, when the server refused the multi
// (or when a key's state rules it out without asking: its epoch is known
// completed); the caller then tries each key on its own. A multi that got
// no answer (a timeout, a lost connection) is not tried key by key: it may
// still be applied (its late success is undone), so every key of the
// group is refused for want of an answer, and true is returned.
func (b *Backend) attemptGroup(ctx context.Context, reqs []lease.Request, idx []int, out []lease.Result, timeout time.Duration) bool {
	ms := make([]member, 0, len(idx))
	b.mu.Lock()
	for _, i := range idx {
		r := reqs[i]
		m := member{i: i, token: lease.NewToken(), p: b.paths(r.Key)}
		ds, known := b.doneVer[m.p.key]
		m.fresh, m.done = !b.ready[m.p.key], ds
		if !m.fresh && (!known || r.Epoch > 0 && ds.epoch >= r.Epoch) {
			b.mu.Unlock()
			return false
		}
		ms = append(ms, m)
	}
	for _, m := range ms {
		b.active[m.token] = true
	}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		for _, m := range ms {
			if !m.created {
				delete(b.active, m.token)
			}
		}
		b.mu.Unlock()
	}()
	ops := b.groupOps(reqs, ms)
	start := time.Now()
	var res []zk.MultiResponse
	err := b.call(ctx, timeout, func() error {
		var err error
		res, err = b.conn.Multi(ops...)
		return err
	}, func(err error) {
		if err != nil {
			return
		}
		for _, m := range ms { // taken after we gave up: undo it
			_ = b.dropLock(m.p, genOf(m, res), -1)
		}
	})
	if err != nil {
		if serverRefused(err) {
			return false
		}
		for _, m := range ms {
			out[m.i].Err = refused(reqs[m.i].Key, lease.ErrNoQuorum, "", b.nodeErr(err))
		}
		return true
	}
	b.mu.Lock()
	for k := range ms {
		m := &ms[k]
		m.created = true
		b.ready[m.p.key] = true
		b.doneVer[m.p.key] = doneState{epoch: m.done.epoch, version: genOf(*m, res)}
	}
	b.mu.Unlock()
	for _, m := range ms {
		r := reqs[m.i]
		l := &Lease{State: lease.NewState(r, m.token, res[m.lockOp].Stat.Czxid), b: b, p: m.p, gen: genOf(m, res)}
		if v := lease.Validity(start, b.span(r.TTL), b.cfg.Drift); v > 0 {
			l.hold(start.Add(v))
			out[m.i].Lease = l
			continue
		}
		_ = l.Release(context.Background())
		out[m.i].Err = refused(r.Key, lease.ErrNoQuorum, "answer came too late to leave any validity", nil)
	}
	return true
}

// groupOps returns the ops of the group multi for ms, and sets each
// member's doneOp and lockOp: per key, the creation of the key and its
// done node (a fresh key) or the rewrite of done with its own value under
// its version check (which bumps the version: the lease's generation), then
// the lock's creation and a SetData that reads back its czxid.
func (b *Backend) groupOps(reqs []lease.Request, ms []member) []any {
	var ops []any
	for k := range ms {
		m := &ms[k]
		data := []byte(m.token + " " + reqs[m.i].Owner)
		if m.fresh {
			m.doneOp = len(ops) + 1
			ops = append(ops, &zk.CreateRequest{Path: m.p.key, Acl: b.acl()},
				&zk.CreateRequest{Path: m.p.done, Data: []byte("0"), Acl: b.acl()})
		} else {
			m.doneOp = len(ops)
			ops = append(ops, &zk.SetDataRequest{Path: m.p.done, Data: []byte(strconv.FormatInt(m.done.epoch, 10)), Version: m.done.version})
		}
		ops = append(ops, &zk.CreateRequest{Path: m.p.lock, Data: data, Acl: b.acl(), Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: m.p.lock, Data: data, Version: 0})
		m.lockOp = len(ops) - 1
	}
	return ops
}

// genOf is the done node's version after the group multi: the lease's
// generation (0 for a done node the multi created).
func genOf(m member, res []zk.MultiResponse) int32 {
	if m.fresh {
		return 0
	}
	return res[m.doneOp].Stat.Version
}

// serverRefused reports whether err is a server's answer that a multi's
// condition failed (as opposed to no answer).
func serverRefused(err error) bool {
	return errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode)
}
