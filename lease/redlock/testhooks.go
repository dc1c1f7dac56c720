package redlock

// testHooks are the Client's switches that only tests set (through
// export_test.go), to turn one protection off in a negative control. The
// zero value is production behaviour.
type testHooks struct {
	// noExtendTTL leaves an Extend's TTL out of maxTTL.
	noExtendTTL bool
	// noStoreGuard counts every node's answer to a store read, whatever
	// its data birth.
	noStoreGuard bool
}
