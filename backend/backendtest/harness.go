// Package backendtest is the conformance suite every leasecron backend
// passes, on a real server: the same behavioural tests, run by each
// backend's own test package with a Harness that starts its servers and
// injects faults into them — like Go CDK's drivertest.RunConformanceTests
// or ShedLock's AbstractStorageBasedLockProviderIntegrationTest.
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, backendtest.Harness{Name: "postgres", Open: ..., Kill: ..., ...})
//	}
//
// Every subtest asserts an invariant of package backend (mutual exclusion,
// epochs, fencing, refusal detail, loss before validity, ...), not merely
// the absence of errors, and uses keys of its own. The subtests that kill
// or pause servers run one after the other; Run leaves every server up and
// Ready when it returns.
package backendtest

import (
	"testing"
	"time"

	"github.com/leasecron/leasecron/backend"
)

// Harness is what a backend's test package gives Run: how to open clients
// of the backend on servers the harness started (real processes on
// loopback), and how to inject faults into those servers.
//
// Server i (0 <= i < Servers) of Kill, Restart, Pause and Resume is the
// server a Backend names in Servers()[i]; its *backend.NodeError values
// and its Health()[i] carry that same name.
type Harness struct {
	// Name names the backend in messages ("redis", "postgres", ...).
	Name string
	// Servers is how many server processes back the backend (the Redlock
	// nodes; 1 for a single PostgreSQL server; the members of an etcd or
	// ZooKeeper ensemble).
	Servers int
	// TTL is the lease TTL the suite uses; short (a second or two) so the
	// fault tests are quick, and at least 10 × the client's Timeout.
	TTL time.Duration
	// Open returns a new client on the harness's servers; t.Cleanup closes
	// it. Clients opened by one Harness share the servers and must see one
	// another's leases.
	Open func(t testing.TB) backend.Backend
	// Kill SIGKILLs server i; Restart starts it again on the same address
	// (with or without its data, as the backend's store keeps it); Pause
	// and Resume send SIGSTOP and SIGCONT.
	Kill, Restart, Pause, Resume func(t testing.TB, i int)
	// Ready blocks until a client opened now, or one of those already
	// open, can take leases again after Restart (a Redlock node that
	// restarted empty does not vote for one restart guard, say). Nil: no
	// wait needed.
	Ready func(t testing.TB)
	// BadInputs returns the errors of opening (or of the first call on) the
	// backend with bad URLs and bad credentials, each with what its message
	// must name and the secret it must not contain.
	BadInputs func(t testing.TB) []BadInput

	// LostCompleteMarksEpoch says that Complete on a lease that was lost
	// (its TTL ran out and another holder took the key) still records the
	// lease's epoch as completed, because Complete is only called once the
	// epoch's work has finished (package lease: complete.lua writes the
	// mark whether or not the lock is still ours). False (the default):
	// such a Complete must leave the epoch open, like an UPDATE or a txn
	// guarded by the lease's token. Either way it must not release the new
	// holder's lease; the suite checks whichever behaviour is declared.
	LostCompleteMarksEpoch bool
}

// BadInput is one bad configuration and what using it returned.
type BadInput struct {
	Name string // e.g. "wrong password", "no such host", "bad port"
	Err  error  // must be non-nil
	// MustName is text the error must contain so an operator can find
	// the culprit (the server's address, the field, ...).
	MustName string
	// Secret, if set, must not appear anywhere in the error.
	Secret string
}

// check fails t when a required field of h is missing or out of range.
func (h Harness) check(t *testing.T) {
	t.Helper()
	if h.Name == "" || h.Servers < 1 || h.TTL <= 0 || h.Open == nil || h.Kill == nil ||
		h.Restart == nil || h.Pause == nil || h.Resume == nil || h.BadInputs == nil {
		t.Fatalf("backendtest: incomplete Harness %+v: Name, Servers >= 1, TTL > 0, Open, Kill, Restart, Pause, Resume and BadInputs are required", h)
	}
}

// ready waits for h.Ready, if any.
func (h Harness) ready(t testing.TB) {
	t.Helper()
	if h.Ready != nil {
		h.Ready(t)
	}
}
