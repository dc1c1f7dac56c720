package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasecron/leasecron/lease"
)

// clockMaxAge is how old this client's estimate of the servers' clock may
// be before judging an expiry: older, a small write to ROOT/@clock renews
// it first.
const clockMaxAge = 5 * time.Second

// serverClock estimates the ZooKeeper servers' clock (the leader's, which
// stamps each write's mtime) on this client's monotonic clock: a write's
// reply carries the mtime the leader gave it before replying, so at any
// later moment the leader's clock reads at least mtime + time since the
// reply came. That lower bound is the estimate: it is behind by at most
// the round trip of the write it came from (plus the two clocks' rate
// difference since, and the skew between the old and new leader's clocks
// after an election). The zero value has no estimate.
type serverClock struct {
	mu sync.Mutex
	ms int64     // a write's mtime, ms since the Unix epoch on the leader's clock
	at time.Time // when its reply came, on this client's monotonic clock
}

// observe takes the mtime of a write whose reply came at at, keeping the
// most recent reply (the current leader's clock).
func (c *serverClock) observe(mtime int64, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || !at.Before(c.at) {
		c.ms, c.at = mtime, at
	}
}

// now returns the estimate of the servers' clock in ms since the Unix
// epoch at local (this client's clock, read now); ok is false when there is none younger than clockMaxAge.
func (c *serverClock) now(local time.Time) (ms int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	age := local.Sub(c.at)
	if c.at.IsZero() || age > clockMaxAge {
		return 0, false
	}
	return c.ms + age.Milliseconds(), true
}

// serverNow returns the estimate of the servers' clock, renewing it first
// with a write to ROOT/@clock when it is missing or too old.
func (b *Backend) serverNow(ctx context.Context) (int64, error) {
	if ms, ok := b.clock.now(b.clientNow()); ok {
		return ms, nil
	}
	p := b.cfg.Root + "/" + clockNode
	err := b.call(ctx, b.cfg.Timeout, func() error {
		st, err := b.conn.Set(p, nil, -1)
		if errors.Is(err, zk.ErrNoNode) {
			if _, err = b.conn.Create(p, nil, 0, b.acl()); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return err
			}
			st, err = b.conn.Set(p, nil, -1)
		}
		if err == nil {
			b.clock.observe(st.Mtime, b.clientNow())
		}
		return err
	}, nil)
	if err != nil {
		return 0, fmt.Errorf("read the servers' clock (write %s): %w", p, b.nodeErr(err))
	}
	ms, _ := b.clock.now(b.clientNow())
	return ms, nil
}

// expired reports whether e, whose znode has stat st, has expired: its
// TTL counts from the znode's mtime (the leader's clock when the Put that
// stored it was applied) and is judged against this client's estimate of
// the servers' clock, never against the client's own wall clock. The
// estimate lags by at most a round trip, so an entry is never judged
// expired before its TTL ended on the servers' clock (same leader), and
// at most a round trip after.
func (b *Backend) expired(ctx context.Context, e lease.Entry, st *zk.Stat) (bool, error) {
	if e.TTL <= 0 {
		return false, nil
	}
	ttl := e.TTL.Milliseconds()
	if e.TTL%time.Millisecond != 0 {
		ttl++ // round up: never early
	}
	end := st.Mtime + ttl
	if b.test.trustClientClock {
		return b.clientNow().UnixMilli() >= end, nil
	}
	now, err := b.serverNow(ctx)
	if err != nil {
		return false, err
	}
	return now >= end, nil
}

// clientNow is this client's clock: only the time elapsed between two of
// its readings is used (its monotonic part), except by the
// trustClientClock negative control. Tests replace it to skew it.
func (b *Backend) clientNow() time.Time {
	if b.test.clientNow != nil {
		return b.test.clientNow()
	}
	return time.Now()
}
