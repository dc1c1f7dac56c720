package sqllease

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// Core is the state a SQL driver's Backend shares with this package: its
// settings, the server it names in errors, the takeover observations and
// whether it was closed. Safe for concurrent use.
type Core struct {
	Options
	// Server names the server in errors and Health: the URL or DSN with
	// the password redacted.
	Server string
	// Obs holds the held rows seen, for takeover (see lease.Observations).
	Obs *lease.Observations

	lost   lostGrants
	closed atomic.Bool
}

// NewCore returns the Core of a Backend with options o on server.
func NewCore(o Options, server string) *Core {
	return &Core{Options: o, Server: server, Obs: lease.NewObservations()}
}

// Closed reports whether Close was called.
func (c *Core) Closed() bool { return c.closed.Load() }

// Close marks the backend closed and, the first time only, runs release
// (closing the pool); later calls return nil.
func (c *Core) Close(release func() error) error {
	if c.closed.Swap(true) {
		return nil
	}
	return release()
}

// NodeErr returns err as a *lease.NodeError naming the server.
func (c *Core) NodeErr(err error) error { return NodeErr(c.Server, err) }

// Call bounds ctx by d, makes sure the lease table exists (ensure) and
// runs run, the driver's statement with its retries. Its error names the
// server; on a closed backend it is lease.ErrClosed.
func (c *Core) Call(ctx context.Context, d time.Duration, ensure, run func(context.Context) error) error {
	if c.Closed() {
		return c.NodeErr(lease.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := ensure(ctx); err != nil {
		return err
	}
	if err := run(ctx); err != nil {
		return c.NodeErr(err)
	}
	return nil
}

// Health runs ping (SELECT 1) within the timeout and reports the server:
// it votes whenever it answers. Err is the bare error: Server names the
// server.
func (c *Core) Health(ctx context.Context, ping func(context.Context) error) []lease.ServerStatus {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	start := time.Now()
	err := ping(ctx)
	return []lease.ServerStatus{{Server: c.Server, Err: err, Latency: time.Since(start), Voting: err == nil}}
}

// OpenCheck is Open's first creation of the lease table (ensure), within
// the timeout. It returns the error Open must fail with: when ctx ended,
// or when permanent says no retry cures it (bad credentials, a missing
// privilege, a foreign table). A server that cannot be reached is not
// Open's failure: every call retries the creation first.
func (c *Core) OpenCheck(ctx context.Context, ensure func(context.Context) error, permanent func(error) bool) error {
	tctx, cancel := context.WithTimeout(ctx, c.Timeout)
	err := ensure(tctx)
	cancel()
	if err != nil && (ctx.Err() != nil || permanent(err)) {
		return err
	}
	return nil
}

// Ready remembers that tables were created and checked, so that it is
// done once: Do runs its function until it succeeds once, one caller at a
// time. The zero value is ready to use.
type Ready struct {
	mu   sync.Mutex
	done atomic.Bool
}

// Do runs f unless an earlier f succeeded, holding the lock so that
// concurrent callers wait for one f instead of each running one.
func (r *Ready) Do(f func() error) error {
	if r.done.Load() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done.Load() {
		return nil
	}
	if err := f(); err != nil {
		return err
	}
	r.done.Store(true)
	return nil
}
