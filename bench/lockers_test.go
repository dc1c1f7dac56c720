package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// The Redis libraries compared, as they appear in benchmark names
// (lib=NAME). lease comes first: benchstat's base column.
const (
	libLease        = "lease"
	libLeaseNoFence = "lease-nofence"
	libRedsync      = "redsync"
	libRedsyncFF    = "redsync-failfast"
	libRedislock    = "redislock"
	libFloor        = "floor"
)

// redisLibs are the libraries that can lock on k nodes.
func redisLibs(k int) []string {
	libs := []string{libLease, libLeaseNoFence, libRedsync, libRedsyncFF}
	if k == 1 {
		libs = append(libs, libRedislock)
	}
	return libs
}

// locker is the common face of the compared libraries: one attempt to
// take a lock (no retry inside the library), extend it, release it.
type locker interface {
	lock(ctx context.Context, key string) (held, error)
	close() error
}

type held interface {
	extend(ctx context.Context) error
	unlock(ctx context.Context) error
}

// newClient is the go-redis client every library gets, configured alike.
func newClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, MaxRetries: -1,
		DialTimeout: opTimeout, ReadTimeout: opTimeout, WriteTimeout: opTimeout})
}

func newLocker(lib string, addrs []string, ttl time.Duration) (locker, error) {
	switch lib {
	case libLease, libLeaseNoFence:
		urls := make([]string, len(addrs))
		for i, a := range addrs {
			urls[i] = "redis://" + a
		}
		// The per-node timeout is the peers' read timeout: on a loaded
		// machine the default 50 ms would fail rounds the peers wait for.
		opts := []redlock.Option{redlock.WithRestartGuard(time.Second), redlock.WithTimeout(opTimeout)}
		if lib == libLeaseNoFence {
			opts = append(opts, redlock.WithoutFencing())
		}
		c, err := redlock.New(urls, opts...)
		if err != nil {
			return nil, err
		}
		return &leaseLocker{c: c, ttl: ttl}, nil
	case libRedsync, libRedsyncFF:
		r := &redsyncLocker{opts: []redsync.Option{redsync.WithExpiry(ttl), redsync.WithTries(1)}}
		pools := make([]rsredis.Pool, 0, len(addrs))
		for _, a := range addrs {
			c := newClient(a)
			r.clients = append(r.clients, c)
			pools = append(pools, rsgoredis.NewPool(c))
		}
		if lib == libRedsyncFF {
			r.opts = append(r.opts, redsync.WithFailFast(true))
		}
		r.rs = redsync.New(pools...)
		return r, nil
	case libRedislock:
		if len(addrs) != 1 {
			return nil, fmt.Errorf("%s works on one node only", lib)
		}
		c := newClient(addrs[0])
		return &redislockLocker{c: c, rl: redislock.New(c), ttl: ttl}, nil
	}
	return nil, fmt.Errorf("unknown library %q", lib)
}

type leaseLocker struct {
	c   *redlock.Client
	ttl time.Duration
}

func (l *leaseLocker) lock(ctx context.Context, key string) (held, error) {
	ls, err := l.c.Acquire(ctx, lease.Request{Key: key, TTL: l.ttl, Owner: "bench"})
	if err != nil {
		return nil, err
	}
	return leaseHeld{ls}, nil
}

func (l *leaseLocker) close() error { return l.c.Close() }

type leaseHeld struct{ l lease.Lease }

func (h leaseHeld) extend(ctx context.Context) error { return h.l.Extend(ctx, 0) }
func (h leaseHeld) unlock(ctx context.Context) error { return h.l.Release(ctx) }

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

func (r *redsyncLocker) close() error {
	var errs []error
	for _, c := range r.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

type redsyncHeld struct{ m *redsync.Mutex }

func (h redsyncHeld) extend(ctx context.Context) error {
	if ok, err := h.m.ExtendContext(ctx); err != nil || !ok {
		return errors.Join(errors.New("redsync: not extended"), err)
	}
	return nil
}

func (h redsyncHeld) unlock(ctx context.Context) error {
	if ok, err := h.m.UnlockContext(ctx); err != nil || !ok {
		return errors.Join(errors.New("redsync: not unlocked"), err)
	}
	return nil
}

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

func (r *redislockLocker) close() error { return r.c.Close() }

type redislockHeld struct {
	l   *redislock.Lock
	ttl time.Duration
}

func (h redislockHeld) extend(ctx context.Context) error { return h.l.Refresh(ctx, h.ttl, nil) }
func (h redislockHeld) unlock(ctx context.Context) error { return h.l.Release(ctx) }
