package postgres

import (
	"sync/atomic"

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
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	return o.table, o.timeout.Seconds(), o.drift
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
