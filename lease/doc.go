// Package lease is a Redlock client: it takes a lease (a lock with a
// time limit) on N independent Redis masters, as described on redis.io
// ("Distributed Locks with Redis"), and adds what a job scheduler needs on
// top: renewal (Hold), fencing tokens, run-once epochs, refusal detail,
// restart detection and batching. It is like github.com/go-redsync/redsync
// except that every round is decided at quorum instead of waiting for the
// slowest node, and a release can never be overtaken by the request it
// cleans up after.
//
// # The algorithm
//
// Acquire records the start time, sends one Lua script (EVALSHA) to all N
// nodes in parallel and counts answers as they arrive. The lease is held
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
// (Ping reports it), when it
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
// node keeps voting. Ping checks a node with a script round through its lane,
// like the other rounds.
//
// A Sentinel failover puts a promoted replica behind the node, which may
// lack the last leases the old master granted. A client that knew the old
// master sees the new run_id on its next connection and keeps the node from
// voting for the restart guard. A client that meets a promoted master for
// the first time cannot tell when it was promoted (Redis does not say), so
// it keeps the node from voting for the guard as well. The old master
// still takes writes until the Sentinel demotes it; grants it makes then
// are lost with it, and are covered by the same guard. Passwords never
// appear in errors (see Redact).
//
// # Guarantees and their preconditions
//
// Mutual exclusion: while a Lease's ValidUntil has not passed, no other
// Acquire of the same key succeeds, provided that (1) the clocks of the
// Redis hosts and of the client advance at rates that differ by less than
// the drift factor, (2) a node that lost its data (restarted without
// fsync-always persistence, or failed over to a replica) does not vote until
// the restart guard (the longest TTL in use) has passed since it came back —
// the client enforces this itself by watching each node's run_id and
// uptime on every new connection (WithoutRestartDetection turns it off, for
// tests only), (3) the holder stops its work before ValidUntil: Hold
// closes Done before validity ends when renewals fail, and (4) nodes do not
// drop lease keys by themselves while they run: the client refuses servers
// that can evict keys (above), but a key deleted by hand, a FLUSHALL, or
// keys evicted in the second before a lane's check saw the setting are
// outside.
//
// Fencing tokens: every successful acquisition gets Fence() strictly
// greater than the Fence of every earlier acquisition of the key that was
// handed out, under the conditions below. Each node keeps a counter per
// key; a node that grants an acquisition raises it in the same script, only
// where the lock is ours, to max(counter+1, the client's unix microseconds)
// and returns it. When the granting quorum returned one value (the usual
// case) that value, now stored on a quorum, is the token; otherwise a
// second round writes the highest value seen to a quorum (again only where
// the lock is ours) before the lease is handed out. Either way a Lease's
// token is stored on a quorum of nodes where it held the lock. A counter
// expires E after the last raise (E is the fence expiry: WithFenceExpiry,
// default 1 hour, never less than the restart guard), so a key nobody takes
// again leaves no counter behind.
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
// Keys and memory: a lease's keys are {key}:lock (only while held, with
// the lease's TTL), {key}:fence (expires E after the last acquisition, about
// 90 bytes), {key}:epoch (the completed epoch, about 90 bytes, kept without
// TTL: a run-once mark that expired would let its epoch run again) and
// {key}:note (SetNote's newest note, kept without TTL, about 100 bytes plus
// the note). A lease released without an epoch leaves only its fencing
// counter, which expires; a key used with epochs or notes keeps one mark
// and one note per key, however many epochs pass (leasecron's daemon: one
// of each per job, under 1 KB per node with its run record). Locking many
// distinct keys costs one counter per key acquired within the last E.
//
// Epochs: an acquisition with Epoch e is refused by a node whose completed
// epoch for the key is >= e. Lease.Complete marks e completed and returns
// once a quorum stored the mark; after that no acquisition of e or older
// can gain a quorum, as long as fewer than (nodes holding the mark) - (N/2)
// of them lose their data. Complete waits for every node up to the timeout
// to make that margin as large as possible.
//
// Reentrancy: acquiring again with the same token (a retry inside one
// Acquire call) acts as an extend. Every Acquire call uses a fresh token, so
// a second Acquire of a key the caller already holds is refused.
//
// The package logs nothing. It reports through return values (errors match
// the sentinels with errors.Is; *RefusedError and *NodeError carry detail)
// and an optional Observer for metrics. All calls are bounded by their
// context and the per-node timeout; Client and Lease are safe for
// concurrent use.
package lease
