// Package sqlleasetest is the fault tests the two SQL lease drivers,
// lease/postgres and lease/mysql, share: one test body each, run by each
// driver's own test package against its real server (started by pgtest or
// mysqltest) through a Harness, as package leasetest runs the conformance
// suite against every backend. Each function injects its fault for real
// (SIGKILL, SIGSTOP, a cut link, the server ending the client's
// connections, a step of the server's clock) and asserts the invariant
// (no overlap with the last holder's validity, fences that only rise, a
// completed epoch still refused, loss reported before the validity ends),
// and each protection has its negative control. Every test runs in
// parallel with the others (t.Parallel) on a server of its own.
//
//	func TestKillDuringHold(t *testing.T) { sqlleasetest.KillDuringHold(t, harness) }
package sqlleasetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/lease"
)

// Harness is what a SQL driver's test package gives the shared tests.
type Harness struct {
	// Start starts a fresh server for t (stopped at t's cleanup).
	Start func(t testing.TB) Server
	// Drop names how Server.DropConnections ends the client's
	// connections, for messages ("pg_terminate_backend").
	Drop string
}

// Server is a running server of the store under test.
type Server interface {
	// Open opens a client on the server as c says; t's cleanup closes it.
	Open(t testing.TB, c Client) lease.Backend
	// Kill SIGKILLs the server, Restart starts it again on the same
	// address with its data, Pause and Resume send SIGSTOP and SIGCONT.
	Kill()
	Restart()
	Pause()
	Resume()
	// Proxy is the proxy that clients opened with Client.Proxied go
	// through.
	Proxy() *netproxy.Proxy
	// DropConnections makes the server end every client connection
	// (pg_terminate_backend, KILL CONNECTION) and returns how many it
	// ended.
	DropConnections(t testing.TB) int
}

// Client says how to open a client; the zero value is the driver's test
// client (its short test timeout, direct to the server).
type Client struct {
	// Proxied opens the client through the server's Proxy.
	Proxied bool
	// Timeout, when positive, is the per-request timeout.
	Timeout time.Duration
	// ClockStep, when set, is added (in µs) to the server's clock in
	// every lease statement of the client (the drivers'
	// WithServerClockStep): a step of the server's clock as the client's
	// statements see it. Clients given the same step see the same clock.
	ClockStep *atomic.Int64
	// WallClockTakeover takes a held row over once its expiry passed on
	// the server's clock (WithWallClockTakeover): the negative control of
	// the clock step tests.
	WallClockTakeover bool
	// NoReconnect turns off the retry of a statement on a fresh
	// connection (WithoutReconnect): the negative control of Reconnects.
	NoReconnect bool
}

// Ctx returns a context that ends after 30 s or at t's cleanup.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Try makes one attempt at req (a batch of one).
func Try(t testing.TB, b lease.Backend, req lease.Request) (lease.Lease, error) {
	t.Helper()
	r := b.TryAcquireBatch(Ctx(t), []lease.Request{req})[0]
	return r.Lease, r.Err
}

// FirstErr is the error a client opened with open meets first: Open's,
// else (when Open cannot tell yet) Warm's, else that of its first
// acquisition. It is the Err of a leasetest.BadInput.
func FirstErr(open func(context.Context) (lease.Backend, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := open(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Warm(ctx); err != nil {
		return err
	}
	return b.TryAcquireBatch(ctx, []lease.Request{{Key: "bad-input", TTL: time.Second}})[0].Err
}

// WaitReady blocks until a client opened with open can Warm, for up to
// 60 s, and fails t after that: a leasetest.Harness's Ready.
func WaitReady(t testing.TB, open func(context.Context) (lease.Backend, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		b, err := open(ctx)
		if err == nil {
			err = b.Warm(ctx)
			_ = b.Close()
		}
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("ready: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// With maps the settings of a Client to a driver's options (O is the
// driver's Option): each field is the driver's option of that name
// (WithTimeout, WithServerClockStep, ...).
type With[O any] struct {
	Timeout           func(time.Duration) O
	ServerClockStep   func(*atomic.Int64) O
	WallClockTakeover func() O
	NoReconnect       func() O
}

// Options returns the driver's options for c.
func (w With[O]) Options(c Client) []O {
	var opts []O
	if c.Timeout > 0 {
		opts = append(opts, w.Timeout(c.Timeout))
	}
	if c.ClockStep != nil {
		opts = append(opts, w.ServerClockStep(c.ClockStep))
	}
	if c.WallClockTakeover {
		opts = append(opts, w.WallClockTakeover())
	}
	if c.NoReconnect {
		opts = append(opts, w.NoReconnect())
	}
	return opts
}

// TestTimeout is the per-request timeout of the drivers' test clients:
// short, so fault tests are quick, but far above a loaded machine's
// commit latency.
const TestTimeout = 500 * time.Millisecond

// Open opens a client on addr (a URL or DSN) with openWith (the driver's
// OpenWith), the per-request timeout TestTimeout (set with timeout, the
// driver's WithTimeout) and then opts, failing t if it cannot; t's
// cleanup closes it.
func Open[B lease.Backend, O any](t testing.TB, openWith func(context.Context, string, ...O) (B, error), timeout func(time.Duration) O, addr string, opts ...O) B {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := openWith(ctx, addr, append([]O{timeout(TestTimeout)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
