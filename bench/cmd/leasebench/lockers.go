package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasecron/leasecron/bench/internal/probe"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/leasecron/leasecron/lease"
	"github.com/redis/go-redis/v9"
)

// Library names, as they appear in the tables.
const (
	libLease        = "leasecron lease"
	libLeaseNoFence = "leasecron lease WithoutFencing"
	libRedsync      = "redsync"
	libRedsyncFF    = "redsync WithFailFast"
	libRedislock    = "bsm/redislock"
)

// locker is the common face of the compared libraries: take a lock on a
// key (one attempt, no retry inside the library), extend it, release it.
type locker interface {
	lock(ctx context.Context, key string) (held, error)
	// refused reports whether err means "held by someone else" (as opposed
	// to a failure).
	refused(err error) bool
	close() error
}

type held interface {
	extend(ctx context.Context) error
	unlock(ctx context.Context) error
}

func newLocker(lib string, addrs []string, ttl time.Duration) (locker, error) {
	switch lib {
	case libLease, libLeaseNoFence:
		urls := make([]string, len(addrs))
		for i, a := range addrs {
			urls[i] = "redis://" + a
		}
		// The nodes were started seconds ago; a restart guard of 1 s lets
		// them vote once their uptime passed it (see waitVoting). It only
		// decides eligibility, not the request path.
		opts := []lease.Option{lease.WithRestartGuard(time.Second)}
		if lib == libLeaseNoFence {
			opts = append(opts, lease.WithoutFencing())
		}
		c, err := lease.New(urls, opts...)
		if err != nil {
			return nil, err
		}
		return &leaseLocker{c: c, ttl: ttl}, nil
	case libRedsync, libRedsyncFF:
		pools := make([]rsredis.Pool, 0, len(addrs))
		clients := make([]*redis.Client, 0, len(addrs))
		for _, a := range addrs {
			c := probe.NewClient(a)
			clients = append(clients, c)
			pools = append(pools, rsgoredis.NewPool(c))
		}
		opts := []redsync.Option{redsync.WithExpiry(ttl), redsync.WithTries(1)}
		if lib == libRedsyncFF {
			opts = append(opts, redsync.WithFailFast(true))
		}
		return &redsyncLocker{rs: redsync.New(pools...), clients: clients, opts: opts}, nil
	case libRedislock:
		if len(addrs) != 1 {
			return nil, fmt.Errorf("%s works on one node only", lib)
		}
		c := probe.NewClient(addrs[0])
		return &redislockLocker{c: c, rl: redislock.New(c), ttl: ttl}, nil
	}
	return nil, fmt.Errorf("unknown library %q", lib)
}

// --- leasecron lease ---

type leaseLocker struct {
	c   *lease.Client
	ttl time.Duration
}

func (l *leaseLocker) lock(ctx context.Context, key string) (held, error) {
	ls, err := l.c.Acquire(ctx, lease.Request{Key: key, TTL: l.ttl, Owner: "bench"})
	if err != nil {
		return nil, err
	}
	return leaseHeld{ls}, nil
}

func (l *leaseLocker) refused(err error) bool { return errors.Is(err, lease.ErrHeld) }
func (l *leaseLocker) close() error           { return l.c.Close() }

type leaseHeld struct{ l *lease.Lease }

func (h leaseHeld) extend(ctx context.Context) error { return h.l.Extend(ctx, 0) }
func (h leaseHeld) unlock(ctx context.Context) error { return h.l.Release(ctx) }

// --- go-redsync ---

type redsyncLocker struct {
	rs      *redsync.Redsync
	clients []*redis.Client
	opts    []redsync.Option
}

func (r *redsyncLocker) lock(ctx context.Context, key string) (held, error) {
	m := r.rs.NewMutex(key, r.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return redsyncHeld{m}, nil
}

// refused: with one try, a lock held elsewhere yields ErrFailed or a
// "taken" error; *RedisError means a node failed.
func (r *redsyncLocker) refused(err error) bool {
	var taken *redsync.ErrTaken
	var nodeTaken *redsync.ErrNodeTaken
	var rerr *redsync.RedisError
	if errors.As(err, &rerr) {
		return false
	}
	return errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || errors.As(err, &nodeTaken)
}

func (r *redsyncLocker) close() error {
	var errs []error
	for _, c := range r.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

type redsyncHeld struct{ m *redsync.Mutex }

func (h redsyncHeld) extend(ctx context.Context) error {
	ok, err := h.m.ExtendContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: not extended")
	}
	return err
}

func (h redsyncHeld) unlock(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: not unlocked")
	}
	return err
}

// --- bsm/redislock ---

type redislockLocker struct {
	c   *redis.Client
	rl  *redislock.Client
	ttl time.Duration
}

func (r *redislockLocker) lock(ctx context.Context, key string) (held, error) {
	l, err := r.rl.Obtain(ctx, key, r.ttl, nil) // default: no retry
	if err != nil {
		return nil, err
	}
	return redislockHeld{l: l, ttl: r.ttl}, nil
}

func (r *redislockLocker) refused(err error) bool { return errors.Is(err, redislock.ErrNotObtained) }
func (r *redislockLocker) close() error           { return r.c.Close() }

type redislockHeld struct {
	l   *redislock.Lock
	ttl time.Duration
}

func (h redislockHeld) extend(ctx context.Context) error { return h.l.Refresh(ctx, h.ttl, nil) }
func (h redislockHeld) unlock(ctx context.Context) error { return h.l.Release(ctx) }
