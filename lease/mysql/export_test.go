package mysql

import "sync/atomic"

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
