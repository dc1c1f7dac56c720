package mysql

import (
	"context"
	"sync/atomic"
	"time"
)

// WithoutReconnect turns off the retry of a statement on a fresh
// connection (and of a deadlocked statement) and the driver's liveness
// check of idle connections: the negative control of the reconnection
// and deadlock tests.
func WithoutReconnect() Option { return func(o *options) { o.test.noReconnect = true } }

// WithUnsortedBatches sends a batch's keys in request order instead of
// sorted: the negative control of TestConcurrentBatchesNoDeadlock.
func WithUnsortedBatches() Option { return func(o *options) { o.test.unsorted = true } }

// WithWallClockTakeover makes acquisitions take a held row over once its
// expires_at passed on the server's clock: the negative control of
// TestServerClockStepForward.
func WithWallClockTakeover() Option { return func(o *options) { o.test.wallClockTakeover = true } }

// WithServerClockStep adds *step µs to the server's UTC_TIMESTAMP(6) in
// every lease statement of the client: a step of the server's clock as
// the client's statements see it.
func WithServerClockStep(step *atomic.Int64) Option {
	return func(o *options) { o.test.clockStep = step }
}

// OpenWith is Open of DSN dsn with opts applied over the
// defaults: the tests' way to reach the options.
func OpenWith(ctx context.Context, dsn string, opts ...Option) (*Backend, error) {
	return open(ctx, Config{DSN: dsn}, opts...)
}

// WithTable sets the lease table: NAME or DATABASE.NAME, each part made of
// letters, digits and underscores (not starting with a digit), at most 55
// bytes for NAME (64 for DATABASE). Default DefaultTable
// ("leasecron_leases") in the DSN's database. Entries and logs go to
// NAME_entries and NAME_log beside it.
func WithTable(name string) Option { return func(o *options) { o.Table = name } }

// WithTimeout sets the per-request timeout: every statement (and the
// connect it may need) is bounded by it, so a paused or unreachable server
// cannot hang a call. Default DefaultTimeout (2 s). It must be positive.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.Timeout = d } }

// WithDrift sets the clock drift factor subtracted from every validity:
// validity = ttl - elapsed - (ttl*drift + 2ms). Default DefaultDrift
// (0.01). It must be in [0, 1).
func WithDrift(f float64) Option { return func(o *options) { o.Drift = f } }
