// Package redis is the Redis backend of leasecron: package lease (a
// Redlock client over N independent Redis masters; with one node, the
// plain single-instance lock) behind the lease.Backend interface.
//
// It adds nothing to the algorithm; it only names keys (every key is
// prefixed with "PREFIX:", so that several schedules can share the nodes)
// and converts between the two packages' types. Use package lease directly
// for the Redis-specific options (TLS, restart guard, observer hooks) and
// hand the client to New.
//
// # Entries and logs
//
// Put, Get and List (lease.Entries) and Append and Log (lease.Logs)
// check their inputs here (lease.CheckEntry and friends: nothing is sent
// on bad input) and call lease.Client's PutEntry, GetEntry, ListEntries,
// AppendLog and ReadLog, which run entries.lua and log.lua on every node,
// with the same script cache and NOSCRIPT reload as the lease scripts but
// on a second ordered lane per node (its own connection), so that a long
// List or Log never holds up a grant or a renewal. Keys, per node:
//
//	{PREFIX:entries:SPACE}       hash: entry name -> "VERSION EXPIRY TTL DATA"
//	{PREFIX:entries:SPACE}:exp   sorted set: names with a TTL, by expiry (ms)
//	{PREFIX:log:LOG}             sorted set: record IDs, scored by At (unix ms)
//	{PREFIX:log:LOG}:data        hash: record ID -> data, " limit" -> last limit
//
// (the braces are a hash tag: each pair lives on one shard of a Redis
// Cluster node).
//
// Expiry runs on each Redis server's clock: Put reads TIME inside the
// script and stores the expiry instant with the value, and every script
// treats a value past it as absent, so a lower version stores again over
// an expired entry. Expired entries are deleted by the next Put or List of
// the space (Get deletes the one it meets), with their index entries; a
// space whose entries all have a TTL (the hosts' heartbeats) carries the
// expiry of its last entry on both keys (PEXPIREAT), so an abandoned space
// vanishes by itself. HEXPIRE (Redis 7.4) is not used: Redis 7.0 does not
// have it. The version guard is in the same script, atomic on the node;
// versions travel as 20 digits (version + 2^63) and are compared digit by
// digit, since Lua numbers cannot tell unix nanoseconds apart.
//
// Append adds the ID unless it is there (ZADD NX: a retried Append adds
// nothing) and, in the same script, deletes the oldest records (by At,
// then ID) beyond limit. Memory per node: a log holds at most limit
// records (limit <= MaxLogLimit, data <= MaxRecordSize each); a space holds
// its live entries plus those expired since its last Put or List.
//
// Quorum: a write goes to every node and succeeds once a quorum (N/2+1)
// stored it, or already had an equal or higher live version; the other
// nodes still apply it in their lane's order. A read asks every node and
// returns once a quorum answered: entries merged per name by the highest
// version, log records as the union by ID of the answers, newest first,
// cut to n and to the largest limit the nodes report. Any read quorum
// shares a node with the quorum of every write that succeeded before the
// read began, so the read sees it (or a newer version). Without a quorum
// the error matches lease.ErrNoQuorum and joins a *lease.NodeError
// per node that failed, named by its redacted URL. Calls wait for each
// node up to the larger of the client's timeout and 1 s, and for ctx.
//
// Durability: entries and logs live in Redis memory and survive what the
// nodes' persistence keeps. As for grants, a read counts only nodes whose
// data is older than the restart guard: a node that came back empty (or
// was flushed, or failed over) would answer "absent", so after a quorum of
// nodes lost their data reads fail for one guard (lease.ErrNoQuorum,
// naming the nodes) instead of reading a pause flag as absent; after it,
// what they lost is read as absent unless written again (with union
// reads, a record survives while any answering node that stored it keeps
// it). Writes count every node. A node refused on connect
// (a replica, an evicting server) fails store calls like any other.
package redis
