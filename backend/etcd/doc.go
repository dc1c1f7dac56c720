// Package etcd is the etcd backend of leasecron: leases live in an etcd
// cluster (v3 API, go.etcd.io/etcd/client/v3), behind the
// backend.Backend interface.
//
// # Key layout
//
// Every key of the backend starts with Config.Prefix (default
// "/leasecron/", always ending in '/'). For a lease key K:
//
//	PREFIX K/lock   "TOKEN TTLMS OWNER", attached to the acquisition's etcd lease
//	PREFIX K/fence  "" — rewritten by every winning acquisition; its
//	                ModRevision is the newest fencing token handed out
//	PREFIX K/done   the highest completed epoch, 20 zero-padded digits
//	PREFIX K/note   "VERSION NOTE", VERSION 20 zero-padded digits
//
// Numbers are zero-padded so that etcd's byte-wise Compare on values
// orders them like integers: the epoch and note-version checks are
// compares inside transactions, never read-modify-write on the client.
//
// # Acquisition, validity and fencing
//
// Each acquisition gets its own etcd lease: Grant, then one transaction
// (txn.go) that puts the lock with that lease only if the lock does not
// exist and the done key is below the requested epoch; its Else branch
// reads the lock and the done key, so a refusal names the holder and the
// completed epoch without another round trip. (Acquire then asks for the
// holder's lease's remaining time with one LeaseTimeToLive call;
// TryAcquireBatch reports the holder's TTL stored in the lock's value, an
// upper bound, instead.)
//
// etcd leases have whole-second TTLs: a lease.ttl of d is granted as
// ceil(d) seconds (GrantSeconds), or the server's minimum TTL if larger
// (1.5 × the election timeout, rounded up: 2 s with the default 1 s). The
// lease is therefore kept by the server at least as long as the client
// believes it holds it; after a crash, other hosts wait up to the granted
// TTL, not lease.ttl. The client never trusts the rounded-up TTL: the
// validity of an acquisition is
//
//	validity = ttl - (time since before the Grant request) - (ttl × drift + 2 ms)
//
// with drift 0.01 by default (WithDrift), on the monotonic clock. The etcd
// leader starts the lease's TTL when it applies the Grant, after the
// client's start; a leader change restarts every lease's TTL (the new
// leader cannot know the old one's timers), which only lengthens it.
//
// The fencing token is the revision of the transaction that put the lock.
// etcd revisions increase strictly across the whole cluster, so each
// holder's Fence is greater than every earlier holder's.
//
// # Renewal
//
// Lease.Extend sends one KeepAliveOnce and counts the new validity from
// before it was sent: ttl (at most the granted TTL) - elapsed - drift.
// The client's background KeepAlive channel is not used: it learns of a
// lost lease only on a coarse timer (etcd issue #5571; the local deadline
// of PR #5603 is checked once a second) and its responses do not say
// when their request left (#6127), so validity cannot be counted from
// them. A KeepAliveOnce answering TTL <= 0 (lease not found) is
// backend.ErrNotHeld; any other failure is backend.ErrNoQuorum and the
// validity is left unchanged, so backend.Hold reports the loss before the
// validity ends.
//
// Precondition: an etcd release with the fix of etcd PR #16822 (late
// 2023, backported to 3.4 and 3.5). Before it, an old leader stuck on a
// slow disk or CPU could still revoke leases after a new leader was
// elected (etcd issue #15247), deleting a lock before its holder's
// validity ended. Renewals that reach a deposed leader are covered by
// etcd itself: a new leader extends every lease by an election timeout
// (etcd PR #4778).
//
// # Complete, release, batches
//
// Complete is a transaction guarded by the lock's CreateRevision (the
// Fence): it writes the done key and deletes the lock, then revokes the
// lease. Release deletes the lock under the same guard and revokes the
// lease. A guard that fails means the lock had expired or was taken: for
// Release that is harmless, Complete reports ErrNotHeld (unless the done
// key already shows the epoch, from an earlier attempt whose answer was
// lost).
//
// TryAcquireBatch grants one lease per request (in parallel, at most 32
// Grant calls at once) and then puts all locks in one transaction of
// nested per-key transactions, split in chunks so that no level exceeds
// etcd's --max-txn-ops (default 128; WithMaxTxnOps): a tick of up to 124
// jobs costs two round trips. A lease shared by the whole batch would be
// cheaper but would tie the jobs' lifetimes together: one job's Hold would
// renew every job's lock, and revoking it would free them all.
//
// # Quorum and health
//
// etcd replicates through its own Raft quorum; the client talks to one
// member at a time, which answers only what a majority agreed. Quorum is
// therefore 1: HolderNodes is 1 for a held lease and Info.Answered 1. A
// request that fails (no leader, no member reachable, timeout) is
// ErrNoQuorum with a *backend.NodeError naming the endpoints. Health asks
// each endpoint for its Status: a member is Voting when it answers and
// knows a leader.
package etcd
