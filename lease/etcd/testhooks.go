package etcd

import "time"

// testHooks are the switches only the tests' negative controls set
// (export_test.go), to turn one protection off and see the violation it
// prevents. The zero value is production behaviour.
type testHooks struct {
	// validityBonus is added to every validity: a client that trusts more
	// time than the server grants.
	validityBonus time.Duration
	// noLeaseRecycle makes Put grant a new etcd lease for every entry
	// with a TTL and never revoke the one it replaces.
	noLeaseRecycle bool
	// keepFrozen keeps members that fail a probe among the client's
	// endpoints.
	keepFrozen bool
	// unorderedDial lets SetEndpoints run during a Status probe.
	unorderedDial bool
}
