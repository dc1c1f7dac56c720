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
		return fmt.Errorf("zookeeper: bad key %q: the name of the znode of entries, logs, the clock or the layout", key)
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
