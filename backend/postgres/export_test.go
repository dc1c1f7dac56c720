package postgres

import "github.com/jackc/pgx/v5"

// WithTracer passes every statement and its arguments to tr.
func WithTracer(tr pgx.QueryTracer) Option { return func(o *options) { o.tracer = tr } }

// WithUnloggedTable creates the table UNLOGGED: a crash of the server
// empties it. Tests use it as the negative control of durability.
func WithUnloggedTable() Option { return func(o *options) { o.unlogged = true } }

// WithoutReconnect turns off the retry of a statement on a fresh
// connection, the negative control of TestTerminateReconnects.
func WithoutReconnect() Option { return func(o *options) { o.noReconnect = true } }

// WithoutSkipLocked makes Put's cleanup of expired entries wait for rows
// other statements locked, the negative control of
// TestPutCleanupNoDeadlock.
func WithoutSkipLocked() Option { return func(o *options) { o.noSkipLocked = true } }

// Options returns the options Open would use, for pinning the defaults.
func Options(opts ...Option) (table string, timeout float64, drift float64) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	return o.table, o.timeout.Seconds(), o.drift
}
