package zookeeper

import (
	"os"
	"testing"

	"github.com/leasecron/leasecron/internal/testkit/waitbound"
)

// The package's tests each start ZooKeeper servers (JVMs) and most time
// their faults against them, so few run at once: the conformance suite
// (the longest, about half the package, one test) beside one other test
// at a time. More ensembles at once load a 2-core machine running other
// packages' tests enough to stretch the timings the tests bound
// (docs/development.md: where the time goes).

// lane admits one test at a time besides the conformance suite.
var lane = make(chan struct{}, 1)

// besideConformance makes t a parallel test that runs its servers once no
// other test but the conformance suite runs its own.
func besideConformance(t *testing.T) {
	t.Helper()
	t.Parallel()
	lane <- struct{}{}
	t.Cleanup(func() { <-lane })
}

// TestMain gives every test a slot of -parallel (those waiting for the
// lane hold one while they wait), so that the conformance suite and its
// parallel subtests, which do not wait for it, never wait for a slot:
// 64 is more than the package's tests (28) and the suite's light
// subtests (16, three at a time: Harness.SteadyAtOnce) together.
func TestMain(m *testing.M) {
	waitbound.AtLeast(64)
	os.Exit(m.Run())
}
