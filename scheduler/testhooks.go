package scheduler

import "time"

// testHooks are what tests change in a Scheduler: a clock they step, and
// the switches that turn a protection off for a negative control (the
// same test with the protection off must see the violation). The zero
// value is production behaviour; only export_test.go sets them.
type testHooks struct {
	// clock, when set, replaces the host's clock, and recheck, when set,
	// replaces clockRecheck.
	clock   func() time.Time
	recheck time.Duration
	// noStandby switches the standby hosts off (TestStandby's negative
	// control).
	noStandby bool
	// standbyWithoutView restores the ranking of a standby time without a
	// fresh view of the hosts: every host tries every job it stood back
	// from (TestStandbyWithoutView's negative control).
	standbyWithoutView bool
	// rankIgnoresSlots and standbyFixedReach restore the ranking that
	// ignored the hosts' run slots and the standby looks that let only
	// ranks below 2×candidates try (the max_parallel negative controls).
	rankIgnoresSlots  bool
	standbyFixedReach bool
	// dropWhenFull leaves a tick this host has no run slot for to other
	// hosts instead of following it (the negative control of the test
	// where a slot frees up before the deadline).
	dropWhenFull bool
	// keepUnvotable keeps retrying ticks no quorum will vote for instead
	// of giving them up (the fresh-servers negative control).
	keepUnvotable bool
	// unpaced lets the ticks that found no quorum retry on their own
	// instead of sharing one pacer.
	unpaced bool
	// noLapseWait makes Close skip the wait for leases left to run out
	// (the close-after-lapse negative control).
	noLapseWait bool
	// hookIgnoresDrain delivers a tick's hook on its guard's context
	// alone, not cancelled with the hook workers' (the drain negative
	// control).
	hookIgnoresDrain bool
	// noCannotLimitMiss drops a job this host cannot limit without noting
	// its tick missed (the cannot_limit negative control).
	noCannotLimitMiss bool
	// freshViewOnly notes a tick of a job no host may run only when the
	// heartbeats were read in the last three heartbeats (the negative
	// control of the store-outage missed tick).
	freshViewOnly bool
	// probeAtBackoff has the host whose attempt failed look at the lease
	// when the backoff ends, before its turn (the negative control of the
	// failing host leaving the lease alone until then).
	probeAtBackoff bool
	// skipStops has overlap skip give the tick up at once, without
	// watching for another host that starts it (the negative control of
	// the takeover of a skipped tick).
	skipStops bool
}
