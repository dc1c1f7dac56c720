// Package lease is the one interface the leasecron scheduler and CLI use
// to take leases, whatever store holds them: a Redlock over N Redis masters
// (package lease/redlock, whose Client is a Backend), a PostgreSQL or MySQL row
// (lease/postgres, lease/mysql), an etcd key (lease/etcd) or a
// ZooKeeper znode (lease/zookeeper).
//
// It follows the shape of Go CDK's blob and blob/driver, or database/sql and
// its drivers: Backend and Lease are the small interfaces each store
// implements; what is not store-specific lives here once — the renew loop
// that keeps a lease alive and reports its loss before its validity ends
// (Hold, like an etcd concurrency.Session), and the error values callers
// test with errors.Is (ErrHeld, ErrEpochDone, ErrNoQuorum, ...). Package
// leasetest runs one conformance suite against every implementation on a
// real server.
//
// # Written once, used by every driver
//
// The safety arithmetic and the bookkeeping that do not talk to a store
// are here, and a driver implements only what does:
//
//   - validity: Validity (ttl − elapsed − (ttl × drift + 2 ms), counted
//     from before the request left), DefaultDrift, CheckDrift (timing.go);
//   - renewal timing: KillMargin, RenewalNeed, RenewalFits — the rule
//     ttl·(1−drift) ≥ renew + kill grace + kill margin + 2 × timeout that
//     a configuration must meet (timing.go) — and Hold's renew and loss
//     timers (hold.go);
//   - tokens: NewToken, NewTokens, 128 random bits (token.go);
//   - completion retry: RetryComplete, CompleteBackoff (complete.go);
//   - lease state: State, embedded by every driver's Lease — holder,
//     token, fence, validity, Invalidate — and the fencing-token rule
//     (state.go).
//
// # What every backend promises
//
// The contract each implementation keeps (the conformance suite checks
// it); what it gives a leasecron user, and under which preconditions, is
// written once in leasecron's docs/guarantees.md.
//
//   - Mutual exclusion: while a Lease's ValidUntil has not passed, no other
//     Acquire of the same key succeeds (under the backend's documented
//     preconditions). Validity is counted on the caller's monotonic clock
//     from the moment before the first request left, minus a drift margin.
//   - Epochs: an acquisition naming Epoch e is refused (ErrEpochDone) once e
//     or a later epoch of the key was completed with Lease.Complete.
//   - Fencing: Lease.Fence is strictly greater than the Fence of every
//     earlier holder of the key (the backend documents when this holds).
//   - Refusal detail: a failed acquisition is a *RefusedError saying who
//     holds the key and for how long, which epoch is done, or which servers
//     failed.
//   - Loss before validity: Hold's Done closes before ValidUntil when
//     renewals keep failing.
//   - Completion without a newer holder: Lease.Complete marks the epoch
//     when no other acquisition of the key happened since the lease's own
//     (its fence is still the newest), also when the lease ran out
//     meanwhile; when a newer holder took the key it returns ErrNotHeld and
//     leaves the epoch open for that holder.
//   - Close and held leases: Backend.Close leaves the leases its client
//     holds to expire at their validity (Redis, PostgreSQL, etcd), except
//     ZooKeeper, whose session's end deletes its ephemeral locks at once. A
//     caller that stopped renewing a lease whose work may still run must
//     wait for its ValidUntil before Close (the scheduler's Close does).
package lease
