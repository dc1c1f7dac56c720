// Package redlock is a Redlock client: it takes a lease (a lock with a
// time limit) on N independent Redis masters, as described on redis.io
// ("Distributed Locks with Redis"), and adds what a job scheduler needs on
// top: renewal (Client.Hold, a lease.Hold), fencing tokens, run-once
// epochs, refusal detail, restart detection and batching. It is like github.com/go-redsync/redsync
// except that every round is decided at quorum instead of waiting for the
// slowest node, and a release can never be overtaken by the request it
// cleans up after.
//
// A Client is a lease.Backend, leasecron's Redis backend: it takes
// package lease's Request and returns its Lease, Result, Info and
// ServerStatus, and its errors are lease's (ErrHeld, ErrNoQuorum, a
// *lease.RefusedError, ...). Open gives it a key prefix ("PREFIX:", so
// that several schedules can share the nodes; errors and Lease.Key name
// keys without it); New has none.
//
// # The algorithm
//
// Acquire records the start time, sends one Lua script (EVALSHA) to all N
// nodes in parallel (TryAcquireBatch: one per node for every 128 keys) and
// counts answers as they arrive. The lease is held
// when at least N/2+1 nodes granted it and
//
//	validity = ttl - elapsed - (ttl*drift + 2ms)
//
// is positive; it returns the moment that is decided (a quorum granted, or
// so many refused or failed that a quorum is impossible, or the per-node
// timeout, default 50 ms, ran out). On failure it releases on every node
// that did not refuse, and this client's next attempt on the key waits for
// that release and a random delay (see Client.Acquire).
//
// Requests to one node travel through one ordered lane: a pipelined round
// at a time, in submission order. Answers that come too late are ignored,
// but the request itself is still applied before anything queued after it,
// so the release that follows a failed or late acquisition is applied after
// it and no key is left behind (go-redsync's fail-fast mode leaves keys
// behind in that case). Concurrent callers share rounds (auto-pipelining).
// A round that fails on its connection (the lane's 10 s read timeout, a
// reset) leaves its requests possibly still in the network, and the next
// round goes on a new connection; so every script call a lane sends to a
// plain or Sentinel node carries the lane's generation, checked first
// against a key on the node (leasecron:lease:gen:<nonce>, one per lane
// that ever failed, expiring a day after its last raise), and the round
// after such a failure raises that key in front of its calls: a late
// request of the failed round is refused, never applied after what
// followed it (a cleanup release, say). It costs a GET per call (about
// 1 µs of server time). A Redis Cluster node has no such key (a key of
// fixed name lives on one shard): there a late request may still land
// after the next round.
//
// A client of one plain node (redis:// or rediss://) runs a one-key round
// (Acquire, Extend, Release, Complete, SetNote, Inspect) on the caller's
// goroutine instead, when nothing else is queued or running on the node,
// on a connection of its own whose reads and writes end at the per-node
// timeout; its calls carry the lane generation too, so the order of a
// node's requests holds as on the lane. How it is set up and what it
// saves: leasecron's docs/library.md, "One node: the fast path". Batches
// of several keys, entries and logs, and clients of several nodes always
// use the lanes.
//
// # Node URLs
//
//	redis://[user:password@]host:port[/db]
//	rediss://...                                       TLS (see WithTLSConfig)
//	redis+sentinel://[user:password@]host:port[/db]?master_name=NAME[&addr=host2:port]
//	redis+cluster://[user:password@]host:port[?addr=host2:port&addr=host3:port]
//
// A Sentinel or Cluster URL is one Redlock node: one vote. All keys of a
// lease share the hash tag {key}, so the scripts work on a Cluster. The user
// info of a Sentinel URL logs in to the Sentinels and the master;
// ?username= and ?password= set the master's own. Other query options are
// go-redis's URL options, except replica_only, which would send the rounds
// to replicas; CheckURL tells whether New accepts a URL without connecting.
//
// Every new connection checks the server (INFO server, replication and
// memory) and refuses it, with an error naming the node and the reason
// (Health reports it), when it
//
//   - is a replica (role:slave), or a Sentinel listed with redis://
//     instead of redis+sentinel://;
//   - can evict keys: maxmemory > 0 with any maxmemory-policy but
//     noeviction (volatile-* evicts lock keys and fencing counters, which
//     have a TTL; allkeys-* completion marks too). ErrUnsafeNode;
//   - has no run_id in INFO (a proxy, some Redis-compatible servers): its
//     restarts could not be detected. ErrUnsafeNode;
//   - is the same server (same run_id) as another node of the client, under
//     another address (localhost and 127.0.0.1, a proxy, a Sentinel's
//     master also listed by itself): the node that reached it second is
//     refused, so that one server has one vote. ErrDuplicateNode.
//
// These are checked when a connection is opened, and again every second
// by each lane on the connection it keeps using (INFO in front of a
// round; a Cluster's shards only on new connections): a server
// reconfigured to evict (CONFIG SET keeps the connections) stops counting
// from the first round that finds it, and counts again once it passes. A
// node whose script cache was emptied (SCRIPT FLUSH) answers NOSCRIPT; the
// lane loads the scripts again and resends the calls of that round that
// failed so, in their order (except a call on a lease that a later call of
// the round reached: resent, it would be applied after that call), so the
// node keeps voting. Health checks a node with a script round through its lane,
// like the other rounds.
//
// A Sentinel failover puts a promoted replica behind the node, which may
// lack the last leases the old master granted. A client that knew the old
// master sees the new run_id on its next connection and keeps the node from
// voting for the restart guard. A client that meets a promoted master for
// the first time cannot tell when it was promoted (Redis does not say), so
// it keeps the node from voting for the guard as well. Passwords never
// appear in errors (see Redact).
//
// The old master still takes writes until the Sentinels demote it, and a
// client cut off from the Sentinels but not from the old master keeps
// using it: its grants there are not seen by clients that moved to the new
// master, so the two can hand out the same lease (a split brain inside one
// node). The client does not detect that; it is a precondition. Bound it
// in Redis with min-replicas-to-write 1 and min-replicas-max-lag L on every
// master of the group: a master whose replicas stopped acknowledging
// refuses writes after at most L+1 seconds. The promoted master votes one
// restart guard after the promotion, while the old master's last grants
// last one TTL from at most L+1 s after it (its replicas stop acknowledging
// at the promotion at the latest), so the restart guard must be at least
// the longest TTL plus L+1 s (WithRestartGuard). With a guard equal to the
// TTL, the old master must stop writing before the promotion: it must be
// cut off from its replicas as well, and L+1 s must be shorter than the
// Sentinels' down-after-milliseconds.
//
// # Entries and logs
//
// PutEntry, GetEntry and ListEntries keep small versioned values with an
// optional TTL in a hash per space; AppendLog and ReadLog keep bounded
// logs in a sorted set per log; Put, Get, List, Append and Log (lease.Entries
// and lease.Logs) check their inputs (lease.CheckEntry and friends:
// nothing is sent on bad input) and call them on PREFIX:entries:SPACE and
// PREFIX:log:LOG. The layout, per node, is in store.go:
//
//	{PREFIX:entries:SPACE}       hash: entry name -> "VERSION EXPIRY TTL DATA"
//	{PREFIX:entries:SPACE}:exp   sorted set: names with a TTL, by expiry (ms)
//	{PREFIX:log:LOG}             sorted set: record IDs, scored by At (unix ms)
//	{PREFIX:log:LOG}:data        hash: record ID -> data, " limit" -> last limit
//
// Their scripts travel
// on a second ordered lane per node, with its own connection, so they
// never hold up grants and renewals. A write succeeds once a
// quorum stored it; a read merges the answers of a quorum (the highest
// version per name, the union of log records), so it sees every write
// that succeeded before it. Expiry is on each server's clock. A read
// counts only the answers of nodes whose data birth (see below) is at
// least the restart guard before the answer: a node that lost its data
// would answer "absent" for what it lost, so without a quorum of older
// nodes the read fails (ErrNoQuorum, with ErrRestarted NodeErrors) rather
// than answering empty. Writes count every node. Entries and logs live in
// Redis memory and survive what the nodes' persistence keeps; what a
// quorum of nodes lost is read as absent once the guard has passed, unless
// written again. Use keys apart from each other: an entries key and a log
// key must differ.
//
// # Restarts, failovers and lost data
//
// A node that lost its data (a restart without fsync-always persistence, a
// failover to a replica that lacks the last writes, FLUSHALL or FLUSHDB, a
// master that was made a replica of another server and promoted again) no
// longer knows the leases and completion marks it stored. The client keeps,
// per node, its data birth: the latest moment at which the node's data may
// have begun. It is learnt from INFO on every new connection (the process's
// start from uptime_in_seconds at first sight; a change of run_id or of
// master_replid, which changes on every restart and promotion, is a restart
// now; a promoted master met for the first time counts as promoted now)
// and, for plain and Sentinel nodes, from a data marker read after every
// round in the same pipeline (by the round's last script call, in the same
// atomic step; a round of releases only, which counts for no grant, mark
// or read, skips it): the key leasecron:lease:birth, written once
// into an empty dataset with the server's time (Redis TIME) and a random
// nonce. A missing or changed marker is a data loss now; a marker seen for
// the first time gives the age of the dataset, also to a client that meets
// a node long after it was flushed. The same script step returns the
// server's master_replid (INFO replication, read inside the script), and a
// master_replid other than the one the client saw last is a data loss now
// too: a master demoted with REPLICAOF and promoted again keeps its client
// connections, and when it synced from its own former replica its dataset
// carries its own old marker (without the leases and marks written since);
// only the replication ID tells. This costs the server about 6 µs per
// round (EVALSHA 8.6 -> 14.7 µs per call in a one-node Acquire+Release
// loop). Ages are measured on the server's clock
// and subtracted from the moment the answer arrived, so only clock rates
// matter here. A Redis Cluster node has no marker (a key of fixed name
// lives on one shard); its shards are watched through INFO on new
// connections only, which sees restarts and failovers to another address
// but not a flushed shard, nor a master demoted and promoted again while
// the client's connections to it stayed open (Redis keeps client
// connections across REPLICAOF): those are outside the preconditions for
// Cluster nodes. A node seen for the first time without a marker (every
// node, right after upgrading to this version) does not vote for one guard,
// like a fresh process.
//
// A node votes for a request only when its data birth is at least the
// restart guard (WithRestartGuard) before now, and, for a Request with
// EpochTime, at least the guard before EpochTime (see Epochs). Its other
// grants are reported as NodeErrors with ErrDataYounger (data younger than
// EpochTime by less than the guard: final for that epoch, also while the
// node's guard runs) or ErrRestarted (the guard has not ended; the node
// votes for the epoch afterwards) and as VoteNotVoting;
// WithoutRestartDetection turns all of this off, for tests only.
//
// # Guarantees and their preconditions
//
// Mutual exclusion: while a Lease's ValidUntil has not passed, no other
// Acquire of the same key succeeds, under the preconditions written once in
// leasecron's docs/guarantees.md ("On every backend" and "Redis
// (Redlock)": bounded clock drift, nodes that lost their data not voting
// for the restart guard — enforced by the client for every data loss it
// can see, above —, a demoted Sentinel master that stops granting,
// independent masters, nodes that keep their keys) and provided the holder
// stops its work before ValidUntil (Hold closes Done before validity ends
// when renewals fail).
//
// Fencing tokens: every successful acquisition gets Fence() strictly
// greater than the Fence of every earlier acquisition of the key that was
// handed out, under the conditions below. Each node keeps a counter per
// key (the field f of its hash); a node that grants an acquisition raises it in the same script, only
// where the lock is ours, to max(counter+1, the client's unix microseconds)
// and returns it. When the granting quorum returned one value (the usual
// case) that value, now stored on a quorum, is the token; otherwise a
// second round writes the highest value seen to a quorum (again only where
// the lock is ours) before the lease is handed out. Either way a Lease's
// token is stored on a quorum of nodes where it held the lock. A counter
// is kept at least E after the last raise (E is the fence expiry: WithFenceExpiry,
// default 1 hour, never less than the restart guard) and then expires with
// its hash, so a key nobody takes again leaves no counter behind (the hash
// of a key with a completed epoch or a note, kept without TTL, keeps it
// too: a counter kept longer only makes the next token larger).
//
// Exactly when tokens increase: say W nodes stored the earlier token T at
// time t (W >= N/2+1). Any voting quorum of a later acquisition at time t'
// shares at least W-N/2 nodes with them. If one of those still has its
// counter (t' - t < E and it did not lose its data), the later token is
// above T. Otherwise every shared node lost the counter, by expiry (then
// t' >= t+E) or with its data (it does not vote until the restart guard
// has passed since it came back, so t' >= t+guard, and E >= guard); the
// later token is then at least the later client's unix microseconds, which
// is above T as long as the client hosts' wall clocks differ by less than
// E (with a node's data lost: the restart guard), and a key is not
// acquired more than once per microsecond on average.
//
// Keys and memory (layout 2): a lease is one hash, {key}:lease, with the
// fields h (the holder: token and owner, while held), d (the lock's
// deadline in the server's unix milliseconds: the lock is held while h is
// set and d has not passed on the server's clock, the clock Redis's own
// key expiry uses), f (the fence counter), e (the completed epoch), v and
// n (SetNote's newest note and its version). Each operation is one script
// on that one key: an acquisition reads the hash once (HMGET) and writes
// it once. A hash with a completed epoch or a note is kept without TTL (a
// run-once mark that expired would let its epoch run again); any other
// expires with the longest of its lock and, with fencing, E after the last
// raise of its counter, so a lease released without an epoch leaves only
// its counter, which expires, and a key used with epochs or notes keeps one
// hash (about 140 bytes with its counter, plus the note) however many
// epochs pass (leasecron's daemon: one per job, under 1 KB per node with
// its run record). Locking many distinct keys costs one hash per key
// acquired within the last E. Besides, each node holds the data marker
// leasecron:lease:birth (whose third field is the layout, see below) and,
// for each lane of a client that had a round fail on its connection within
// the last day, a generation key leasecron:lease:gen:<nonce> (a number);
// an ACL user of the client needs access to both.
//
// Layouts: clients that keep leases in different keys must not share a
// node, as each would see the other's leases as free. The data marker
// names the layout of the client that wrote it into the empty dataset
// (a marker without one: layout 1, three keys per lease, {key}:lock,
// :fence and :epoch, plus :note), and a client refuses a node whose
// marker names another layout than its own, with ErrOtherLayout naming
// the node (in Health, and in every round's NodeErrors). A Redis Cluster
// node has no marker and is not checked.
//
// Epochs: an acquisition with Epoch e is refused by a node whose completed
// epoch for the key is >= e, and one such node's answer refuses the whole
// attempt (a mark exists only if e's work finished), if it arrives before a
// quorum granted. Lease.Complete marks e completed and returns once a
// quorum stored the mark; it waits for every node up to the timeout, to
// store it on as many as possible. A node marks e unless a newer holder
// took the key since the lease's acquisition: another lock is there, or
// the lock expired and the fence counter went past the lease's Fence (the
// newer holder came and went; without fencing, or once the counter
// expired, that case is not seen). A lock that merely expired with nobody
// after it is no reason to leave e open: its work finished. When too many
// nodes name a newer holder for a quorum to mark e, Complete returns
// ErrNotHeld and e stays open for that holder; a first round that only
// checks makes sure nothing is written then, also on nodes the newer
// holder's requests have not reached yet (a race with a newer holder
// arriving between the two rounds can still leave a minority mark, which
// is safe: e's work did finish). Marks live as long as the key's data, so
// they must survive longer than locks: a client started long after e (a
// daemon restarted inside a day-long deadline) must not win e on nodes that
// lost the mark. Request.EpochTime is the instant e's work became eligible
// (a scheduler's tick); a node whose data birth is less than the restart
// guard before EpochTime does not vote for the request, since its data may
// not hold a mark written after EpochTime. The mark is on a quorum, and any
// voting quorum shares a node with it: with EpochTime set, a completed
// epoch is therefore acquired again only if a node that stored its mark
// lost it without the client being able to see it (a flushed Cluster shard,
// persistence that loses acknowledged writes without a restart, the key
// deleted by hand), and no node that still has the mark answered before a
// quorum granted. The price is liveness: once a quorum of nodes lost their
// data after EpochTime, e cannot be acquired any more (the refusal is
// ErrEpochDone if a node still has the mark, else ErrNoQuorum with
// ErrDataYounger NodeErrors and a Detail saying so). Clocks: EpochTime is
// read on the caller's host and the data birth on this client's, so the
// guard also covers the offset between the wall clocks of the host that
// completed e and of the one acquiring it; it must stay below the guard.
// Without EpochTime only the restart guard applies, and a completed epoch
// runs again if so many nodes that stored its mark lose their data that a
// quorum without it votes again.
//
// Reentrancy: acquiring again with the same token (a retry inside one
// Acquire call) acts as an extend. Every Acquire call uses a fresh token, so
// a second Acquire of a key the caller already holds is refused.
//
// The package logs nothing. It reports through return values (errors match
// package lease's sentinels with errors.Is; *lease.RefusedError and
// *lease.NodeError carry detail)
// and an optional Observer for metrics. All calls are bounded by their
// context and the per-node timeout; Client and Lease are safe for
// concurrent use.
package redlock
