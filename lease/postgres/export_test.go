package postgres

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// WithTracer passes every statement and its arguments to tr.
func WithTracer(tr pgx.QueryTracer) Option { return func(o *options) { o.test.tracer = tr } }

// WithUnloggedTable creates the table UNLOGGED: a crash of the server
// empties it. Tests use it as the negative control of durability.
func WithUnloggedTable() Option { return func(o *options) { o.test.unlogged = true } }

// WithoutReconnect turns off the retry of a statement on a fresh
// connection, the negative control of TestTerminateReconnects.
func WithoutReconnect() Option { return func(o *options) { o.test.noReconnect = true } }

// WithoutSkipLocked makes Put's cleanup of expired entries wait for rows
// other statements locked, the negative control of
// TestPutCleanupNoDeadlock.
func WithoutSkipLocked() Option { return func(o *options) { o.test.noSkipLocked = true } }

// Options returns the options Open would use, for pinning the defaults.
func Options(opts ...Option) (table string, timeout float64, drift float64) {
	o := Config{}.options()
	for _, opt := range opts {
		opt(&o)
	}
	return o.Table, o.Timeout.Seconds(), o.Drift
}

// WithWallClockTakeover makes acquisitions take a held row over once its
// expires_at passed on the server's clock, the rule before takeover was
// counted on the contender's clock: the negative control of
// TestServerClockStepForward.
func WithWallClockTakeover() Option { return func(o *options) { o.test.wallClockTakeover = true } }

// WithServerClockStep adds *step µs to the server's clock_timestamp() in
// every lease statement of the client: a step of the server's clock as
// the client's statements see it. Clients given the same step see the
// same server clock.
func WithServerClockStep(step *atomic.Int64) Option {
	return func(o *options) { o.test.clockStep = step }
}

// OpenWith is Open of URL connString with opts applied over the
// defaults: the tests' way to reach the options.
func OpenWith(ctx context.Context, connString string, opts ...Option) (*Backend, error) {
	return open(ctx, Config{URL: connString}, opts...)
}

// WithTable sets the lease table: NAME or SCHEMA.NAME, each part made of
// letters, digits and underscores (not starting with a digit), at most 63
// bytes. The name is quoted as written, so it is case-sensitive; use lower
// case. Default DefaultTable ("leasecron_leases") in the role's
// search_path (normally the public schema). Entries and logs go to
// NAME_entries and NAME_log in the same schema (NAME cut to 55 bytes if
// longer).
func WithTable(name string) Option { return func(o *options) { o.Table = name } }

// WithTimeout sets the per-request timeout: every statement (and the
// connect it may need) is bounded by it, so a paused or unreachable server
// cannot hang a call. Default DefaultTimeout (2 s). It must be positive.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.Timeout = d } }

// WithDrift sets the clock drift factor subtracted from every validity:
// validity = ttl - elapsed - (ttl*drift + 2ms). Default DefaultDrift
// (0.01). It must be in [0, 1).
func WithDrift(f float64) Option { return func(o *options) { o.Drift = f } }
