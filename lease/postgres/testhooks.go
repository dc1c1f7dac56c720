package postgres

import (
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// testHooks are Open's switches that only tests set (through the options
// of export_test.go), most of them to turn one protection off in a
// negative control. The zero value is production behaviour.
type testHooks struct {
	// unlogged creates the table UNLOGGED: the negative control of the
	// durability tests.
	unlogged bool
	// noReconnect turns off the retry of a statement on a fresh
	// connection after a connection failure.
	noReconnect bool
	// noSkipLocked makes Put's cleanup of expired entries wait for rows
	// locked by other statements: the negative control of
	// TestPutCleanupNoDeadlock.
	noSkipLocked bool
	// tracer sees every statement and its arguments.
	tracer pgx.QueryTracer
	// wallClockTakeover lets acquire.sql take over a row once expires_at
	// passed on the server's clock: the negative control of
	// TestServerClockStepForward.
	wallClockTakeover bool
	// clockStep, if set, is added to the server's clock_timestamp() in
	// the lease statements, in µs, read at every statement: the injected
	// step of the server's clock.
	clockStep *atomic.Int64
}
