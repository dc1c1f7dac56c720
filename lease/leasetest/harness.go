// Package leasetest is the conformance suite every leasecron backend
// passes, on a real server: the same behavioural tests, run by each
// backend's own test package with a Harness that starts its servers and
// injects faults into them — like Go CDK's drivertest.RunConformanceTests
// or ShedLock's AbstractStorageBasedLockProviderIntegrationTest.
//
//	func TestConformance(t *testing.T) {
//		leasetest.Run(t, leasetest.Harness{Name: "postgres", Open: ..., Kill: ..., ...})
//	}
//
// Every subtest asserts an invariant of package lease, not merely the
// absence of errors, and uses keys of its own (letters, digits, '.', '_'
// and '-' only). The light ones run in parallel under "Steady":
//
//   - MutualExclusion: 32 goroutines on 4 clients take one key 64 times;
//     the tenures, recorded on one monotonic clock and cut at ValidUntil,
//     never overlap, and fences rise in tenure order.
//   - ExclusionCheckerCatchesOverlap: negative control; the same run
//     through a backend that grants every refused Acquire is caught.
//   - Epochs: Release leaves an epoch open; after Complete that epoch and
//     older ones are refused (ErrEpochDone, DoneEpoch) without retrying;
//     a newer epoch is granted.
//   - RefusalDetail: Holder is the Owner text, HolderNodes >= Quorum,
//     HolderTTL between the holder's remaining validity and that plus the
//     acquisition's margin; after a renewal, Acquire's refusal, one
//     attempt's and Inspect's TTL within [remaining validity, TTL].
//   - InspectAndNotes: holder, TTL, fence, done epoch; SetNote keeps the
//     highest version.
//   - ReleaseOfLostLease: Release and Complete of a lease that ran out do
//     not free the new holder's; that Complete fails with ErrNotHeld and
//     leaves the epoch open for the newer holder.
//   - CompleteAfterExpiry: Complete of a lease that ran out with nobody
//     after it (fence unchanged) succeeds, and the epoch is done.
//   - CloseAfterLapse: a lease neither released nor renewed, then its
//     client Closed: nobody else gets the key before its ValidUntil
//     (unless the harness declares CloseFreesLeases, which is then
//     checked).
//   - BadInputs: every Harness.BadInputs error names its culprit and hides
//     its secret.
//   - Entries: Put keeps the highest version (equal or lower: no change),
//     spaces are apart, List is sorted, Data comes back byte for byte.
//   - EntryExpiry: an entry with a TTL is found until shortly before it
//     ends and gone soon after; an expired entry is absent for Put too.
//   - Logs: Append keeps the newest limit records by At, a repeated ID is
//     not added twice, Log is newest first; 200 concurrent appends from 4
//     clients end as exactly the newest limit.
//   - StoreBadInputs: bad names, sizes and limits are refused, naming the
//     culprit, and nothing is stored.
//   - LostAnswer: an attempt whose answers were lost (OpenLossy) may
//     have granted the key to a token no lease carries; the client takes
//     it back, getting the key within 25 s, not the grant's 2 min TTL, and
//     another client is refused meanwhile.
//
// Then, one at a time: Batch10000 (one TryAcquireBatch of 10,000 free keys
// is granted in order; a second is refused with ErrHeld per key), Health,
// RefusalNamesDownServers, FencingAcrossRestarts (1,000 holders, servers
// killed and restarted three times) and HoldLossOnKill / HoldLossOnPause
// (Done closes before the validity of the last renewal ends; a Hold with a
// negative safety margin is the negative control), FrozenMinority (each
// server of three or more SIGSTOPped in turn for two TTLs or more: every
// client still takes a key at least once per TTL and no hold is lost
// while the store serves, see Serving), StoreServersDown
// (entries and logs with one server down, errors naming a dead server
// without a quorum), StoreReadsAfterDataLoss (a quorum of servers
// restarted with whatever data they keep: until one TTL after, reads are
// the written value or an error, never a silent absence; a rewrite is
// read back after Ready). Run leaves every server
// up and Ready when it returns; on a loaded 2-core machine the Redis runs
// take about 40 s each.
package leasetest

import (
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// Harness is what a backend's test package gives Run: how to open clients
// of the backend on servers the harness started (real processes on
// loopback), and how to inject faults into those servers.
//
// Server i (0 <= i < Servers) of Kill, Restart, Pause and Resume is the
// server a Backend names in Servers()[i]; its *lease.NodeError values
// (Node) and its Health()[i] (Server) carry that same name. The suite
// kills only running servers, restarts only killed ones and resumes only
// paused ones.
type Harness struct {
	// Name names the backend in messages ("redis", "postgres", ...).
	Name string
	// Servers is how many server processes back the backend (the Redlock
	// nodes; 1 for a single PostgreSQL server; the members of an etcd or
	// ZooKeeper ensemble).
	Servers int
	// TTL is the lease TTL the suite uses; short (a second or two) so the
	// fault tests are quick, and at least 10 × the client's Timeout (Run
	// checks). The batch test's leases live max(TTL, 1 min), on keys that
	// are never taken again.
	TTL time.Duration
	// Open returns a new client on the harness's servers; t.Cleanup closes
	// it. Clients opened by one Harness share the servers and must see one
	// another's leases.
	Open func(t testing.TB) lease.Backend
	// OpenBatch, if set, opens the two clients of Batch10000 instead of
	// Open: a backend whose batch round is bounded by its per-request
	// timeout may need a longer one for 10,000 keys on a loaded machine
	// (the race detector slows a Go client several times). Nil: Open.
	OpenBatch func(t testing.TB) lease.Backend
	// OpenLossy returns a new client whose connections to every server go
	// through proxies of its own (netproxy), and a switch that makes
	// those proxies drop what the servers send (netproxy.DropReplies):
	// requests still reach the servers and take effect, their answers are
	// lost. t.Cleanup closes the client and the proxies.
	OpenLossy func(t testing.TB) (b lease.Backend, dropReplies func(on bool))
	// Kill SIGKILLs server i; Restart starts it again on the same address
	// (with or without its data, as the backend's store keeps it); Pause
	// and Resume send SIGSTOP and SIGCONT.
	Kill, Restart, Pause, Resume func(t testing.TB, i int)
	// Serving, if set, reports whether the store takes writes now, by a
	// write or what only a serving quorum does (zktest's: a leader that
	// has synchronised a quorum, and a session opened through the servers
	// not paused; paused servers are not asked).
	// FrozenMinority asks it through each freeze for the stretches in
	// which the store served (elections, whose length depends on the
	// machine's load, fall between them): a hold given up outside them is
	// the store's outage, and in each the clients must take a key at
	// least once per TTL. Nil: the store serves throughout.
	Serving func() bool
	// Ready blocks until a client opened now, or one of those already
	// open, can take leases again after Restart (a Redlock node that
	// restarted empty does not vote for one restart guard, say): every
	// server answers and counts (Health: Err nil, Voting) for each of
	// them. Run calls it first, and after every fault it undoes. Nil: no
	// wait needed.
	Ready func(t testing.TB)
	// BadInputs returns the errors of opening (or of the first call on) the
	// backend with bad URLs and bad credentials, each with what its message
	// must name and the secret it must not contain. It may start servers
	// of its own for t (one with a password, say).
	BadInputs func(t testing.TB) []BadInput

	// CloseFreesLeases says that Backend.Close frees the leases its client
	// still holds at once, before their validity ends (ZooKeeper: closing
	// the session deletes its ephemeral locks). False (the default): Close
	// leaves them to expire by their TTL. The suite checks whichever is
	// declared; a caller whose work may outlive a lease it stopped renewing
	// must wait for its validity before Close (the daemon does).
	CloseFreesLeases bool

	// SteadyAtOnce, if above 0, is how many of the light subtests (those
	// of "Steady") run at once, whatever -parallel allows: for a package
	// that raises -parallel for reasons of its own. 0: as -parallel lets.
	SteadyAtOnce int
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
	if h.Name == "" || h.Servers < 1 || h.TTL <= 0 || h.Open == nil || h.OpenLossy == nil || h.Kill == nil ||
		h.Restart == nil || h.Pause == nil || h.Resume == nil || h.BadInputs == nil {
		t.Fatalf("leasetest: incomplete Harness %+v: Name, Servers >= 1, TTL > 0, Open, OpenLossy, Kill, Restart, Pause, Resume and BadInputs are required", h)
	}
}

// ready waits for h.Ready, if any.
func (h Harness) ready(t testing.TB) {
	t.Helper()
	if h.Ready != nil {
		h.Ready(t)
	}
}
