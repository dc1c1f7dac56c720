// Package etcd is the etcd backend of leasecron: leases live in an etcd
// cluster (v3 API, go.etcd.io/etcd/client/v3), behind the
// lease.Backend interface.
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
// An acquisition grants an etcd lease, then runs one transaction (txn.go)
// that puts the lock with that lease only if the lock does not exist and
// the done key is below the requested epoch; its Else branch reads the
// lock and the done key, so a refusal names the holder and the completed
// epoch without another round trip. The holder's time left (HolderTTL,
// Info.TTL) is then estimated from one LeaseTimeToLive call by Acquire and
// Inspect (whole seconds, so the estimate is rounded up), and is the
// holder's TTL, stored in the lock's value, in TryAcquireBatch's
// refusals (no extra round trip).
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
// with drift 0.01 by default (Config.Drift), on the monotonic clock. The etcd
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
// lost lease only on a coarse timer (etcd#5571; the local deadline
// of PR #5603 is checked once a second) and its responses do not say
// when their request left (#6127), so validity cannot be counted from
// them. A KeepAliveOnce answering TTL <= 0 (lease not found) is
// lease.ErrNotHeld; any other failure is lease.ErrNoQuorum and the
// validity is left unchanged, so lease.Hold reports the loss before the
// validity ends.
//
// Precondition: an etcd release with the fix of etcd PR #16822 (late
// 2023, backported to 3.4 and 3.5). Before it, an old leader stuck on a
// slow disk or CPU could still revoke leases after a new leader was
// elected (etcd#15247), deleting a lock before its holder's
// validity ended. Renewals that reach a deposed leader are covered by
// etcd itself: a new leader extends every lease by an election timeout
// (etcd PR #4778).
//
// # Complete, release, batches
//
// Complete is a transaction guarded by the fence key's ModRevision: while
// it is still the lease's Fence, no acquisition happened since ours (each
// rewrites the fence key), so the lock is ours or gone with our expired
// etcd lease; the transaction writes the done key and deletes the lock,
// then revokes the etcd lease. A lock that merely expired with nobody after
// it does not leave the epoch open: its work finished. Release deletes the
// lock under the lock's CreateRevision (the Fence) and revokes. A guard
// that fails means the key was taken (or, for Release, had expired): for
// Release that is harmless; Complete reports ErrNotHeld and leaves the
// epoch open for the newer holder (unless the done key already shows it,
// from an earlier attempt whose answer was lost).
//
// TryAcquireBatch (a tick's jobs) grants one etcd lease per distinct
// GrantSeconds among its requests, not one per request: 10,000 Grant
// calls, each a raft write, took 5-15 s on a loaded test machine, past
// the tick's validity. The locks of one batch are then put by
// transactions of nested per-key transactions, split so that no level
// exceeds etcd's --max-txn-ops (default 128, Config.MaxTxnOps; 124 keys per
// transaction), two transactions at a time. A single Acquire is a batch of
// one and has its lease to itself.
//
// Sharing the lease ties the jobs of a batch together, which is safe but
// costs liveness in two cases: each job's Hold renews the shared lease,
// so a sibling's renewal also keeps this job's lock alive (each Lease
// still counts its validity from its own Extend calls only, so no client
// believes in more time than the server grants); and the lease is revoked
// only when the last Lease of the batch is released or completed, so a
// job whose Release failed (the cluster was unreachable) stays locked
// until its siblings are done and the lease runs out. If the answer to a
// batch transaction is lost, its locks are deleted in the background only
// where they still hold the value that transaction wrote.
//
// # Entries and logs
//
// Entries (lease.Entries: pause flags, heartbeats, retry state) and
// logs (lease.Logs: run history) live under the same prefix, in keys of
// three and four segments, so they never meet a lease key's two (K/lock;
// job names hold no '/'):
//
//	PREFIX entries/SPACE/NAME   "VERSION TTLNS\n" then the data
//	PREFIX log/LOG/AT/ID        the record's data; AT is its Unix
//	                            milliseconds, 20 zero-padded digits
//	                            ("-" and 20 digits of ms+2^63 before 1970)
//	PREFIX logid/LOG/ID         AT: marks ID as present in the log
//
// Put is an optimistic compare-and-swap: it reads the entry, returns if
// the stored version is >= its own, and otherwise puts its value in a
// transaction guarded by the ModRevision it read (0 for an absent key);
// when another client wrote first, the Else branch returns the new value
// and the loop decides again (at most 16 rounds, each lost to a newer
// write). A lower version therefore never overwrites a higher one. An
// entry with a TTL is attached to an etcd lease of its own, granted for
// GrantSeconds(TTL) (whole seconds, rounded up, at least the server's
// minimum TTL); the value keeps the TTL as given, which Get and List
// report. Expiry is etcd's: when the lease runs out the leader deletes
// the key (within about half a second), so an expired entry is simply
// absent, also for Put. An entry lives at least its TTL from the Grant,
// slightly less from the Put, and longer after a leader change, which
// restarts every lease's TTL. The lease
// is not leaked: a Put that keeps the same whole-second TTL renews the
// stored lease with one KeepAliveOnce and puts with it; one that changes
// the TTL, or drops it, grants a new lease (or none) and revokes the old
// one in the background once its put succeeded (no other key uses that
// lease); a lease granted but not used is revoked too. If the answer to a
// put is lost, its lease is left to expire by its TTL.
//
// Append is one transaction: if the ID key does not exist, put the record
// and the ID key; in both branches count the log's records. So a repeated
// ID (even with another At) is not added, and a retried Append is
// harmless. When the count exceeds the limit, the oldest count-limit
// record keys are read at that transaction's revision (keys only, key
// order = At then ID) and deleted with their ID keys, 32 records per
// transaction; an ID key is deleted only if it still names the deleted
// record. A record beyond the newest limit at some revision stays beyond
// them (records are only added, or removed when beyond the limit), so
// concurrent trimmers never delete a record to keep, and a log holds
// limit records (two keys each, at most 16 KiB of data each) plus what
// concurrent appenders added since the last trim. Log is one range read,
// sorted by key descending, limited to n: newest first, ties by ID (the
// greater ID counts as newer).
//
// Every read is linearizable and every write goes through etcd's Raft
// quorum, so a read after a successful write sees it, from any client and
// member, while a quorum is up. A request that gets no answer in time
// (Config.Timeout each) is sent again, at least three times and for up
// to 10 × Timeout (a leader election), while ctx lasts; all of them are
// safe to repeat. Errors name the endpoints.
//
// # Quorum and health
//
// etcd replicates through its own Raft quorum; the client talks to one
// member at a time, and a linearizable answer stands for a majority of
// the members. Quorum is therefore a majority of the configured endpoints
// (list every member): a refusal read in a transaction reports
// HolderNodes = Quorum. Inspect asks every endpoint for its Status beside
// the read: Answered counts the members that answered, NodeErrs names the
// others. When an acquisition fails for lack of a quorum (no leader,
// members down, timeout), its NodeErrs name every endpoint whose Status
// fails (one probe per batch, at most one more timeout), and the keys are
// read once more from one member without a quorum (serializable): a key
// it shows held is refused as ErrHeld with HolderNodes 1, a completed
// epoch as ErrEpochDone — refusing on a stale copy is safe. Health asks
// each endpoint for its Status: a member is Voting when it answers, knows
// a leader and reports no alarm.
//
// # Frozen members
//
// A member that stops without closing its connections (SIGSTOP, a hung
// process) keeps its gRPC connection ready until keepalive gives up, 10 s
// of silence and then DialKeepAliveTimeout, and the client's round-robin
// balancer would send it every third request meanwhile. So every Health
// (the failure probe above included) takes the members whose Status
// failed out of the client's endpoints — never all of them — and a
// background loop probes them every second and puts each back once it
// answers and knows a leader. A frozen member thus costs the requests
// sent to it before the first failure probe, one timeout.
package etcd
