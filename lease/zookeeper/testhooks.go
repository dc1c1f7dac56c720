package zookeeper

import "time"

// testHooks are the switches only tests set (through export_test.go), most
// of them to turn one protection off in a negative control and see the
// violation it prevents. The zero value is production behaviour.
type testHooks struct {
	// unboundedConnect (set before the connection is made) dials as
	// go-zookeeper does by default: the handshake may take 10 × two
	// thirds of the session timeout, and a server that stopped answering
	// is not left before two thirds of it.
	unboundedConnect bool
	// acceptShortSession lets Open and acquisitions go on with a session
	// shorter than asked for.
	acceptShortSession bool
	// span replaces the validity span: a client that trusts its lock
	// longer than its session is certainly alive.
	span time.Duration
	// heldBy runs in heldBy between reading a lock it found to be an
	// orphan and deleting it.
	heldBy func()
	// trustClientClock judges an entry's expiry against this client's
	// wall clock (clientNow) instead of the servers' clock, as a store
	// trusting its clients' clocks would; clientNow, when set, replaces
	// that clock.
	trustClientClock bool
	clientNow        func() time.Time
	// noSync reads entries and logs without syncing the server first.
	noSync bool
	// noSpaceVersion writes entry znodes without raising their space's
	// version, so that a Beat that kept what it read misses the change.
	noSpaceVersion bool
}
