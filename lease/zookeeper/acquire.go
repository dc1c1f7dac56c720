package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasecron/leasecron/lease"
)

// Acquire takes the lease, retrying with a backoff until it is held, the
// epoch is found completed, or ctx ends.
func (b *Backend) Acquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	wait := 10 * time.Millisecond
	for {
		// A fresh token each attempt: a create of an earlier attempt whose
		// reply was lost is then an orphan, which the next attempt removes,
		// not a lock this attempt would take for someone else's.
		l, err := b.attempt(ctx, req, lease.NewToken(), b.cfg.Timeout)
		if err == nil {
			return l, nil
		}
		if errors.Is(err, lease.ErrEpochDone) {
			return nil, err
		}
		t := time.NewTimer(lease.Jitter(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// refused builds the error of a refused attempt.
func refused(key string, reason error, detail string, nodeErrs error) *lease.RefusedError {
	return &lease.RefusedError{Key: key, Reason: reason, Detail: detail, NodeErrs: nodeErrs}
}

// attempt makes one try at req with token.
func (b *Backend) attempt(ctx context.Context, req lease.Request, token string, timeout time.Duration) (*Lease, error) {
	if err := checkKey(req.Key); err != nil {
		return nil, err
	}
	if req.TTL <= 0 {
		return nil, fmt.Errorf("zookeeper: acquire %s: TTL must be positive", req.Key)
	}
	if err := b.sessionErr(); err != nil { // a later session, on servers that grant less
		return nil, refused(req.Key, lease.ErrNoQuorum, "", err)
	}
	p := b.paths(req.Key)
	b.mu.Lock()
	b.active[token] = true
	fresh := !b.ready[p.key]
	b.mu.Unlock()
	l, err := b.lockKey(ctx, req, p, token, fresh, timeout)
	if err != nil {
		b.mu.Lock()
		delete(b.active, token)
		b.mu.Unlock()
	}
	return l, err
}

// lockKey takes the lock of the key at p for req with token: first, for a
// key this client has not seen (fresh), with one multi that also creates
// the key; then with up to three tries of lockOnce.
func (b *Backend) lockKey(ctx context.Context, req lease.Request, p paths, token string, fresh bool, timeout time.Duration) (*Lease, error) {
	data := []byte(token + " " + req.Owner)
	if fresh {
		// A key this client has not seen: create it, its done node and
		// the lock in one multi (one round trip for a new key); if the key
		// exists, go the usual way.
		l, err := b.attemptNew(ctx, req, p, token, data, timeout)
		switch {
		case err == nil:
			return l, nil
		case !errors.Is(err, zk.ErrNodeExists):
			return nil, refused(req.Key, lease.ErrNoQuorum, "", b.nodeErr(err))
		}
		b.mu.Lock()
		b.ready[p.key] = true
		b.mu.Unlock()
		// The key exists, and may well be held (several hosts fire the
		// same tick): look at its lock before reading its done node.
		if err := b.heldBy(ctx, req, p, token, timeout); !errors.Is(err, errNotHeldNow) && !errors.Is(err, errOrphanRemoved) {
			return nil, err
		}
	}
	for try := 0; try < 3; try++ {
		l, again, err := b.lockOnce(ctx, req, p, token, data, timeout)
		if !again {
			return l, err
		}
	}
	return nil, refused(req.Key, lease.ErrNoQuorum, "the key's done node kept changing", nil)
}

// doneOf returns the key's done node as this client last read it, reading
// it when unknown.
func (b *Backend) doneOf(ctx context.Context, req lease.Request, p paths, timeout time.Duration) (doneState, error) {
	b.mu.Lock()
	ds, known := b.doneVer[p.key]
	b.mu.Unlock()
	if known {
		return ds, nil
	}
	done, v, err := b.readDone(ctx, p, timeout)
	if err != nil {
		return ds, refused(req.Key, lease.ErrNoQuorum, "", b.nodeErr(err))
	}
	ds = doneState{epoch: done, version: v}
	b.mu.Lock()
	b.doneVer[p.key] = ds
	b.mu.Unlock()
	return ds, nil
}

// lockOnce makes one try at the lock of an existing key: a multi that
// bumps the done node's version (checked against the version read) and
// creates the lock. again reports that the key changed under the try
// (done rewritten, the lock freed, the key's nodes removed) and another
// try may succeed.
func (b *Backend) lockOnce(ctx context.Context, req lease.Request, p paths, token string, data []byte, timeout time.Duration) (l *Lease, again bool, err error) {
	ds, err := b.doneOf(ctx, req, p, timeout)
	if err != nil {
		return nil, false, err
	}
	if req.Epoch > 0 && ds.epoch >= req.Epoch {
		e := refused(req.Key, lease.ErrEpochDone, "", nil)
		e.DoneEpoch = ds.epoch
		return nil, false, e
	}
	// Rewriting done with its own value bumps its version: the lease's
	// generation (see Lease.gen); done's version check makes a completion
	// since we read it fail the create.
	ops := []any{
		&zk.SetDataRequest{Path: p.done, Data: []byte(strconv.FormatInt(ds.epoch, 10)), Version: ds.version},
		&zk.CreateRequest{Path: p.lock, Data: data, Acl: b.acl(), Flags: zk.FlagEphemeral},
		&zk.SetDataRequest{Path: p.lock, Data: data, Version: 0},
	}
	start := time.Now()
	var res []zk.MultiResponse
	err = b.call(ctx, timeout, func() error {
		var err error
		res, err = b.conn.Multi(ops...)
		return err
	}, func(err error) {
		if err == nil { // created after we gave up: undo it
			_ = b.dropLock(p, res[0].Stat.Version, -1)
		}
	})
	switch {
	case err == nil:
		gen := res[0].Stat.Version
		b.mu.Lock()
		b.doneVer[p.key] = doneState{epoch: ds.epoch, version: gen}
		b.mu.Unlock()
		l := &Lease{State: lease.NewState(req, token, res[2].Stat.Czxid), b: b, p: p, gen: gen}
		v := lease.Validity(start, b.span(req.TTL), b.cfg.Drift)
		if v <= 0 {
			_ = l.Release(context.Background())
			return nil, false, refused(req.Key, lease.ErrNoQuorum, "answer came too late to leave any validity", nil)
		}
		l.hold(start.Add(v))
		return l, false, nil
	case errors.Is(err, zk.ErrBadVersion):
		// done changed since we read it: read it again.
		b.mu.Lock()
		delete(b.doneVer, p.key)
		b.mu.Unlock()
		return nil, true, nil
	case errors.Is(err, zk.ErrNodeExists):
		err := b.heldBy(ctx, req, p, token, timeout)
		if errors.Is(err, errNotHeldNow) || errors.Is(err, errOrphanRemoved) {
			return nil, true, nil // the key is free now: try again
		}
		return nil, false, err
	case errors.Is(err, zk.ErrNoNode):
		// The key's nodes were removed (by an operator): make them again.
		b.mu.Lock()
		delete(b.ready, p.key)
		delete(b.doneVer, p.key)
		b.mu.Unlock()
		if err := b.prepare(ctx, p, timeout); err != nil {
			return nil, false, refused(req.Key, lease.ErrNoQuorum, "", b.nodeErr(err))
		}
		return nil, true, nil
	default:
		return nil, false, refused(req.Key, lease.ErrNoQuorum, "", b.nodeErr(err))
	}
}

// attemptNew acquires a key whose nodes may not exist yet: one multi
// creates the key, its done node (epoch 0, version 0: the lease's
// generation) and the lock. It fails with zk.ErrNodeExists when the key
// exists.
func (b *Backend) attemptNew(ctx context.Context, req lease.Request, p paths, token string, data []byte, timeout time.Duration) (*Lease, error) {
	start := time.Now()
	var res []zk.MultiResponse
	err := b.call(ctx, timeout, func() error {
		var err error
		res, err = b.conn.Multi(
			&zk.CreateRequest{Path: p.key, Acl: b.acl()},
			&zk.CreateRequest{Path: p.done, Data: []byte("0"), Acl: b.acl()},
			&zk.CreateRequest{Path: p.lock, Data: data, Acl: b.acl(), Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: p.lock, Data: data, Version: 0})
		return err
	}, func(err error) {
		if err == nil {
			_ = b.dropLock(p, 0, -1)
		}
	})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.ready[p.key] = true
	b.doneVer[p.key] = doneState{epoch: 0, version: 0}
	b.mu.Unlock()
	l := &Lease{State: lease.NewState(req, token, res[3].Stat.Czxid), b: b, p: p, gen: 0}
	v := lease.Validity(start, b.span(req.TTL), b.cfg.Drift)
	if v <= 0 {
		_ = l.Release(context.Background())
		return nil, refused(req.Key, lease.ErrNoQuorum, "answer came too late to leave any validity", nil)
	}
	l.hold(start.Add(v))
	return l, nil
}

// prepare creates the key's persistent nodes once per Backend.
func (b *Backend) prepare(ctx context.Context, p paths, timeout time.Duration) error {
	b.mu.Lock()
	ok := b.ready[p.key]
	b.mu.Unlock()
	if ok {
		return nil
	}
	for _, n := range []struct {
		path string
		data []byte
	}{{p.key, nil}, {p.done, []byte("0")}} {
		err := b.call(ctx, timeout, func() error {
			_, err := b.conn.Create(n.path, n.data, 0, b.acl())
			return err
		}, nil)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", n.path, err)
		}
	}
	b.mu.Lock()
	b.ready[p.key] = true
	b.mu.Unlock()
	return nil
}

// readDone reads the key's completed epoch and the done node's version.
func (b *Backend) readDone(ctx context.Context, p paths, timeout time.Duration) (int64, int32, error) {
	var data []byte
	var st *zk.Stat
	err := b.call(ctx, timeout, func() error {
		var err error
		data, st, err = b.conn.Get(p.done)
		return err
	}, nil)
	if err != nil {
		return 0, 0, err
	}
	done, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return done, st.Version, nil
}

// heldBy's answers when there is no holder to report: the key has no
// lock, or had only an orphan of this session, now deleted.
var (
	errNotHeldNow    = errors.New("no lock")
	errOrphanRemoved = errors.New("removed an orphaned lock of this session")
)

// heldBy explains a refusal by an existing lock, after deleting it when it
// is an orphan of this session (a create whose reply was lost). It returns
// errNotHeldNow when the key has no lock.

func (b *Backend) heldBy(ctx context.Context, req lease.Request, p paths, token string, timeout time.Duration) error {
	var data []byte
	var st, dst *zk.Stat
	err := b.call(ctx, timeout, func() error {
		// done first: its version, read before the lock, is the lock's
		// generation or older (done changes only when a lock is taken or
		// completed), so a delete checked against it can never remove a
		// lock taken after the one read here.
		var err error
		if _, dst, err = b.conn.Get(p.done); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		data, st, err = b.conn.Get(p.lock)
		return err
	}, nil)
	if errors.Is(err, zk.ErrNoNode) {
		return errNotHeldNow
	}
	if err != nil {
		return refused(req.Key, lease.ErrNoQuorum, "", b.nodeErr(err))
	}
	tok, owner, _ := strings.Cut(string(data), " ")
	if st.EphemeralOwner == b.conn.SessionID() && tok != token && dst != nil {
		b.mu.Lock()
		orphan := !b.active[tok]
		b.mu.Unlock()
		if orphan {
			if b.test.heldBy != nil {
				b.test.heldBy()
			}
			_ = b.call(ctx, timeout, func() error { return b.dropLock(p, dst.Version, st.Version) }, nil)
			return errOrphanRemoved
		}
	}
	e := refused(req.Key, lease.ErrHeld, "", nil)
	e.Holder, e.HolderNodes = owner, 1
	// A holder that died keeps its lock until its session expires.
	e.HolderTTL = b.SessionTimeout()
	return e
}
