package mysql

import "sync/atomic"

// testHooks are Open's switches that only tests set (through the options
// of export_test.go), most of them to turn one protection off in a
// negative control. The zero value is production behaviour.
type testHooks struct {
	// noReconnect turns off the retry of a statement on a fresh
	// connection after a connection failure.
	noReconnect bool
	// unsorted sends a batch's keys in request order instead of sorted:
	// the negative control of the deadlock test.
	unsorted bool
	// wallClockTakeover lets acquire.sql take over a row once expires_at
	// passed on the server's clock: the negative control of the clock
	// step test.
	wallClockTakeover bool
	// clockStep, if set, is added to the server's UTC_TIMESTAMP(6) in the
	// lease statements, in µs: an injected clock step.
	clockStep *atomic.Int64
}
