package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasecron/leasecron/lease"
)

// paths of one key's znodes.
type paths struct{ key, lock, done, note string }

func (b *Backend) paths(key string) paths {
	k := b.cfg.Root + "/" + key
	return paths{key: k, lock: k + "/lock", done: k + "/done", note: k + "/note"}
}

func checkKey(key string) error {
	if key == "" || strings.ContainsAny(key, "/\x00") || key == "." || key == ".." {
		return fmt.Errorf("zookeeper: bad key %q: must be a single znode name", key)
	}
	if reservedKey(key) {
		return fmt.Errorf("zookeeper: bad key %q: the name of the znode of entries, logs or the clock", key)
	}
	return nil
}

func (b *Backend) acl() []zk.ACL {
	if b.cfg.Auth != "" {
		return zk.AuthACL(zk.PermAll)
	}
	return zk.WorldACL(zk.PermAll)
}

// Lease is a held ZooKeeper lock.
type Lease struct {
	lease.State // its fence is the lock znode's czxid
	b           *Backend
	p           paths
	// gen is the done znode's version after this acquisition bumped it.
	// Only an acquisition or a completion changes it, so while it stays
	// gen nobody took the key after us: every later operation of the
	// lease checks it (a lock znode's own version restarts at each
	// creation, so it cannot tell our lock from a successor's).
	gen int32

	mu     sync.Mutex
	expiry *time.Timer // gives the lock up when the validity passes unextended
}

var _ lease.Lease = (*Lease)(nil)

// hold sets the lease valid until v and (re)arms its expiry: a lease that
// is not extended before its validity ends is given up (the lock znode is
// deleted), as a Redis or PostgreSQL lease would run out, although
// ZooKeeper itself would keep it for as long as the session lives.
// It returns false, changing nothing, once the lease was given up.
func (l *Lease) hold(v time.Time) bool {
	if !l.SetValidUntil(v) {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.expiry == nil {
		l.expiry = time.AfterFunc(time.Until(v), l.expire)
		return true
	}
	l.expiry.Reset(time.Until(v))
	return true
}

// expire runs when the validity ended without an extend. The check and
// the giving up are one step (lease.State.Lapse): an extend that lands at the same moment
// either moved the validity first (then nothing expires) or finds the
// lease gone (and reports ErrNotHeld).
func (l *Lease) expire() {
	// Given up, but not released by its holder: ValidUntil keeps its
	// (past) value.
	if !l.Lapse(time.Now()) {
		return
	}
	l.b.mu.Lock()
	delete(l.b.active, l.Token())
	l.b.mu.Unlock()
	l.deleteLockEventually()
}

// deleteLockEventually deletes the lock in the background, retrying until
// it is gone (or not ours any more), the Backend is closed, or 10 session
// timeouts passed: a lock left behind would stay as long as the session
// lives. While the ensemble cannot be reached, the session expires and
// takes the lock with it anyway.
func (l *Lease) deleteLockEventually() {
	b := l.b
	b.mu.Lock()
	if b.closed.Load() {
		b.mu.Unlock()
		return // the session's close takes the lock with it
	}
	b.bgWG.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.bgWG.Done()
		ctx, cancel := context.WithTimeout(b.bg, 10*b.SessionTimeout())
		defer cancel()
		wait := max(b.cfg.Timeout, 100*time.Millisecond)
		for l.deleteLock(ctx) != nil {
			t := time.NewTimer(lease.Jitter(wait))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
}

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
	held := false
	defer func() {
		if !held {
			b.mu.Lock()
			delete(b.active, token)
			b.mu.Unlock()
		}
	}()
	data := []byte(token + " " + req.Owner)
	if fresh {
		// A key this client has not seen: create it, its done node and
		// the lock in one multi (one round trip for a new key); if the key
		// exists, go the usual way.
		l, err := b.attemptNew(ctx, req, p, token, data, timeout)
		switch {
		case err == nil:
			held = true
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
		b.mu.Lock()
		ds, known := b.doneVer[p.key]
		b.mu.Unlock()
		if !known {
			done, v, err := b.readDone(ctx, p, timeout)
			if err != nil {
				return nil, refused(req.Key, lease.ErrNoQuorum, "", b.nodeErr(err))
			}
			ds = doneState{epoch: done, version: v}
			b.mu.Lock()
			b.doneVer[p.key] = ds
			b.mu.Unlock()
		}
		if req.Epoch > 0 && ds.epoch >= req.Epoch {
			e := refused(req.Key, lease.ErrEpochDone, "", nil)
			e.DoneEpoch = ds.epoch
			return nil, e
		}
		// Rewriting done with its own value bumps its version: the
		// lease's generation (see Lease.gen); done's version check makes
		// a completion since we read it fail the create.
		ops := []any{
			&zk.SetDataRequest{Path: p.done, Data: []byte(strconv.FormatInt(ds.epoch, 10)), Version: ds.version},
			&zk.CreateRequest{Path: p.lock, Data: data, Acl: b.acl(), Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: p.lock, Data: data, Version: 0},
		}
		start := time.Now()
		var res []zk.MultiResponse
		err := b.call(ctx, timeout, func() error {
			var err error
			res, err = b.conn.Multi(ops...)
			return err
		}, func(err error) {
			if err == nil { // created after we gave up: undo it
				_ = b.dropLock(p, res[0].Stat.Version, -1)
			}
		})
		if err == nil {
			gen := res[0].Stat.Version
			b.mu.Lock()
			b.doneVer[p.key] = doneState{epoch: ds.epoch, version: gen}
			b.mu.Unlock()
			l := &Lease{State: lease.NewState(req, token, res[2].Stat.Czxid), b: b, p: p, gen: gen}
			v := lease.Validity(start, b.span(req.TTL), b.cfg.Drift)
			if v <= 0 {
				_ = l.Release(context.Background())
				return nil, refused(req.Key, lease.ErrNoQuorum, "answer came too late to leave any validity", nil)
			}
			l.hold(start.Add(v))
			held = true
			return l, nil
		}
		switch {
		case errors.Is(err, zk.ErrBadVersion):
			// done changed since we read it: read it again.
			b.mu.Lock()
			delete(b.doneVer, p.key)
			b.mu.Unlock()
			continue
		case errors.Is(err, zk.ErrNodeExists):
			err := b.heldBy(ctx, req, p, token, timeout)
			if errors.Is(err, errNotHeldNow) || errors.Is(err, errOrphanRemoved) {
				continue // the key is free now: try again
			}
			return nil, err
		case errors.Is(err, zk.ErrNoNode):
			// The key's nodes were removed (by an operator): make them again.
			b.mu.Lock()
			delete(b.ready, p.key)
			delete(b.doneVer, p.key)
			b.mu.Unlock()
			if err := b.prepare(ctx, p, timeout); err != nil {
				return nil, refused(req.Key, lease.ErrNoQuorum, "", b.nodeErr(err))
			}
			continue
		default:
			return nil, refused(req.Key, lease.ErrNoQuorum, "", b.nodeErr(err))
		}
	}
	return nil, refused(req.Key, lease.ErrNoQuorum, "the key's done node kept changing", nil)
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

// Extend proves the lock is still ours with a write through the leader,
// which also touches the session: a multi of Check(done, generation) —
// nobody took the key after us — and SetData(lock) — our lock still
// exists (it vanishes with our session). Validity is counted from before
// the request.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = l.TTL()
	}
	start := time.Now()
	err := l.b.call(ctx, l.b.cfg.Timeout, func() error {
		_, err := l.b.conn.Multi(&zk.CheckVersionRequest{Path: l.p.done, Version: l.gen},
			&zk.SetDataRequest{Path: l.p.lock, Data: []byte(l.Token() + " " + l.Owner()), Version: -1})
		return err
	}, nil)
	switch {
	case errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrSessionExpired):
		return fmt.Errorf("extend %s: %w: %v", l.Key(), lease.ErrNotHeld, err)
	case err != nil:
		return fmt.Errorf("extend %s: %w: %w", l.Key(), lease.ErrNoQuorum, l.b.nodeErr(err))
	}
	v := lease.Validity(start, l.b.span(ttl), l.b.cfg.Drift)
	if v <= 0 {
		return fmt.Errorf("extend %s: %w: the answer came too late to leave any validity", l.Key(), lease.ErrNoQuorum)
	}
	if !l.hold(start.Add(v)) {
		return fmt.Errorf("extend %s: %w: given up when its validity ended", l.Key(), lease.ErrNotHeld)
	}
	return nil
}

// giveUp marks the lease invalid locally and forgets its token.
func (l *Lease) giveUp() {
	l.Invalidate()
	l.mu.Lock()
	if l.expiry != nil {
		l.expiry.Stop()
	}
	l.mu.Unlock()
	l.b.mu.Lock()
	delete(l.b.active, l.Token())
	l.b.mu.Unlock()
}

// Release deletes the lock if nobody took the key after us (guarded by
// the generation); a lock lost meanwhile is left alone.
func (l *Lease) Release(ctx context.Context) error {
	l.giveUp()
	err := l.deleteLock(ctx)
	if err != nil {
		l.deleteLockEventually()
	}
	return err
}

// dropLock deletes the key's lock (of lockVersion, -1: any) if done's
// version is still gen: nobody took the key since the lock of that
// generation was made. Every deletion of a lock goes through it.
func (b *Backend) dropLock(p paths, gen, lockVersion int32) error {
	_, err := b.conn.Multi(&zk.CheckVersionRequest{Path: p.done, Version: gen},
		&zk.DeleteRequest{Path: p.lock, Version: lockVersion})
	return err
}

// deleteLock deletes the lock if nobody took the key after this lease.
func (l *Lease) deleteLock(ctx context.Context) error {
	err := l.b.call(ctx, l.b.cfg.Timeout, func() error { return l.b.dropLock(l.p, l.gen, -1) }, nil)
	if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
		return fmt.Errorf("release %s: %w", l.Key(), l.b.nodeErr(err))
	}
	return nil
}

// Complete marks the epoch completed and deletes the lock in one multi
// checked against the lease's generation (done's version: nobody acquired
// the key since us), retrying until it is done or ctx ends. A lock that is
// already gone — given up when its validity passed unextended, or taken
// by the end of its session — does not stop the completion while the
// generation is unchanged: the mark is then written alone. A changed
// generation means a newer holder took the key: ErrNotHeld, the epoch is
// left open for it (unless done shows it: an earlier try whose answer was
// lost).
func (l *Lease) Complete(ctx context.Context) error {
	if l.Epoch() <= 0 {
		return l.Release(ctx)
	}
	l.giveUp()
	err := lease.RetryComplete(ctx, func(ctx context.Context) (bool, error) {
		err := l.b.call(ctx, l.b.cfg.Timeout, l.markDone, nil)
		if err == nil {
			return true, nil
		}
		if errors.Is(err, zk.ErrBadVersion) {
			// Taken by a newer holder, or completed by an earlier try
			// whose answer was lost.
			done, _, rerr := l.b.readDone(ctx, l.p, l.b.cfg.Timeout)
			if rerr == nil && done >= l.Epoch() {
				return true, nil
			}
			if rerr == nil {
				return true, fmt.Errorf("complete %s epoch %d: %w: a newer holder took the key before completion", l.Key(), l.Epoch(), lease.ErrNotHeld)
			}
			err = rerr
		}
		return false, fmt.Errorf("complete %s epoch %d: %w", l.Key(), l.Epoch(), l.b.nodeErr(err))
	})
	if err != nil && !errors.Is(err, lease.ErrNotHeld) && !errors.Is(err, lease.ErrClosed) {
		// Not completed: at least do not leave the lock behind for as
		// long as the session lives.
		l.deleteLockEventually()
	}
	return err
}

// markDone is one try of Complete: the mark and the lock's deletion in one
// multi checked against the generation; if the lock is gone, the mark
// alone, under the same check.
func (l *Lease) markDone() error {
	epoch := []byte(strconv.FormatInt(l.Epoch(), 10))
	setDone := &zk.SetDataRequest{Path: l.p.done, Data: epoch, Version: l.gen}
	res, err := l.b.conn.Multi(setDone, &zk.DeleteRequest{Path: l.p.lock, Version: -1})
	if errors.Is(err, zk.ErrNoNode) {
		res, err = l.b.conn.Multi(setDone)
	}
	if err != nil {
		return err
	}
	l.b.mu.Lock()
	l.b.doneVer[l.p.key] = doneState{epoch: l.Epoch(), version: res[0].Stat.Version}
	l.b.mu.Unlock()
	return nil
}
