// Package zookeeper is the ZooKeeper backend of leasecron: a lease is an
// ephemeral znode held by the daemon's ZooKeeper session, behind the
// lease.Backend interface. It is like go-zookeeper's zk.Lock or Apache
// Curator's InterProcessMutex, except that a holder always knows how long
// its lock is certainly still its own (Lease.ValidUntil), so it can stop
// its work before anyone else could take the lock over; that it refuses a
// run-once epoch that was completed; and that every acquisition gets a
// fencing token.
//
// # Znodes
//
// Under the root (default /leasecron), each key has a persistent node with
// three children:
//
//	ROOT/KEY/lock   ephemeral: "TOKEN OWNER" of the holder; its czxid is the fencing token
//	ROOT/KEY/done   persistent: the highest completed epoch, in decimal
//	ROOT/KEY/note   persistent: "VERSION\nNOTE", the newest note (SetNote)
//
// Acquire is one multi: Check(done, version) + Create(lock, ephemeral) +
// SetData(lock) — the check makes a completion that happened after this
// client read done fail the create, and the SetData's reply carries the
// lock's czxid, the fencing token: the zxid of the transaction that created
// the lock, strictly greater than every earlier one cluster-wide. A key's
// done version is cached after the first read, so a tick costs one round
// trip per key (requests are pipelined on the session's connection).
// Complete is one multi: SetData(done, version = the lease's generation) +
// Delete(lock); when the lock is already gone (given up at its validity's
// end, or with its session), SetData(done) alone under the same version:
// the generation unchanged means nobody took the key after us.
//
// # Validity
//
// The lock lives as long as the session: ZooKeeper deletes it when the
// session expires, which the leader decides once it has not heard from the
// client for the negotiated session timeout. Every acquire and extend is a
// write that goes through the leader and touches the session, so the lock
// is certainly ours until (start of that request) + min(TTL, negotiated
// session timeout) − drift margin; that is ValidUntil. A disconnected
// client does not count as holding — validity keeps running out from the
// last answered request (Curator's SUSPENDED, not yet LOST), so the holder
// stops before the server could expire the session. The session timeout is
// asked for at Open (Config.SessionTimeout, leasecron: lease.ttl) and the
// server may change it within its minSessionTimeout..maxSessionTimeout;
// the negotiated value is used.
//
// A create whose reply was lost (a timeout, a broken connection) may still
// have made the lock. A late success deletes it again; a lock found later
// whose ephemeral owner is this session but whose token belongs to no
// acquisition in progress or held is such an orphan and is deleted before
// the next attempt.
//
// ZooKeeper keeps its own quorum: Quorum is 1 and Health reports each
// server's mode (srvr four-letter word) and the session's state.
//
// # Entries and logs
//
// Entries (Put, Get, List) and logs (Append, Log) live beside the keys,
// under znodes whose names hold '@', which job names cannot (and which
// Acquire refuses as keys):
//
//	ROOT/@entries/SPACE            persistent, empty: its version is raised by every write of its entries
//	ROOT/@entries/SPACE/NAME       persistent: "VERSION TTL_NS\n" then the entry's data
//	ROOT/@logs/LOG/AT-ID           persistent: the record's data
//	ROOT/@clock                    persistent, empty: written to read the servers' clock
//	ROOT/@beats/SPACE              persistent: the entries Beat wrote in SPACE, one JSON object
//	ROOT/@layout                   persistent: the root's layout, "2" (layout.go)
//
// AT is the record's time in ms, offset by 2^63 and zero-padded to 20
// digits, so that names sort by At, then ID. Parents are created on the
// first write that misses them (two daemons may race: ErrNodeExists is
// fine). Data is at most 16 KiB, far below ZooKeeper's 1 MB jute.maxbuffer.
//
// Put is a compare-and-set on the entry znode's version: read it; create
// it when absent (a multi of Create and SetData, whose reply carries the
// mtime); keep it when its stored version is >= the new one and it has not
// expired (confirmed by a Check through the leader, as the read may come
// from a lagging server); else Set it at the version read. A lost race is
// retried, up to 10 times. Two round trips when it writes. The create or
// set is a multi that also raises the data version of the space's znode,
// so that version changes whenever the space's entries do (but for the
// deletion of an expired entry: readers judge expiry themselves).
//
// Expiry does not use the clients' clocks. An entry's TTL counts from its
// znode's mtime: the leader's wall clock when the Put was applied. A
// client judges it against its estimate of that clock: every write's
// reply carries the mtime the leader gave it before replying, so at a
// later moment the leader's clock reads at least mtime + (time elapsed on
// this client's monotonic clock since the reply came). The newest such
// sample is kept; when it is older than 5 s, a judgement first writes
// ROOT/@clock for a fresh one (a daemon that heartbeats every 5 s rarely
// needs to). So an entry is never judged expired before its TTL ended on
// the leader's clock, and is judged so at most the sample's round trip
// later. Two things widen that bound: the rate difference of the two
// clocks over at most 5 s (negligible), and an election, after which
// mtimes come from another server's clock, so the skew between the
// servers' clocks (NTP keeps it to milliseconds) adds to it. An expired
// entry is absent for Get, List and Put, and the reader that finds it
// deletes it, at the version it read (a Put in between keeps it). ZooKeeper's
// own TTL nodes are not used: they need zookeeper.extendedTypesEnabled on
// every server; ephemeral nodes are not used either (they live as long
// as the session, not the TTL).
//
// Append creates the record znode (it exists already for a repeated
// record: a no-op), lists the log, and deletes the oldest records beyond
// the limit, and any later copy of a record ID appended again with
// another At (the copy with the lowest creation zxid stays): two round
// trips, and a third (the deletes, pipelined) once the log is full. The listing follows the create on the
// same session, so it sees every record created before it: concurrent
// appenders may leave a few records over the limit, which the next Append
// deletes. A log thus holds at most limit records between Appends (plus
// those of Appends in flight), an entry space one znode per name; expired
// entries go when a Get, List or Put finds them (a List of the space
// finds them all).
//
// Reads (Get, List, Log) first sync the server the session talks to with
// the leader, so they see every write acknowledged before they started
// — the write of another daemon through another server included. A
// write is acknowledged once a quorum logged it, so it survives the loss
// of a minority of servers. (A sync'd read can still miss a write in one
// rare case ZooKeeper documents: a leader that lost its quorum without
// knowing it yet, until it steps down.) A List or Log reads the
// entries' or records' data with pipelined requests, at most 32 in flight.
//
// # Heartbeats
//
// A host's heartbeat round (Beat) writes its entry into the space's one
// beat znode, ROOT/@beats/SPACE (name -> version, TTL, data and the
// leader's clock when written; a compare-and-set on the znode's version,
// like Put), and then reads the spaces it is asked to as List does. Read
// as one znode per host, every host reading every host's heartbeat would
// cost the ensemble requests growing with the square of the fleet; read
// as one znode, a host's round costs a constant few requests. The reads
// come after the write's reply, which the server sends once it applied
// the write and every write before it, so they need no sync. A round
// keeps what it read of each space with the versions of the space's
// znode and beat znode, and the next round's write is a multi that also
// checks those versions: when they hold, nothing in the spaces changed
// and the round returns what it kept (expiry judged again), so an idle
// round is two requests, the beat znode's read and that multi, and a
// full read once a minute; a failed check drops the space, whose read
// then follows the write. Kept reads are dropped when the session
// changes (a store that lost its data or was restored ends every session)
// and read again after a minute whatever the versions say: a space
// deleted and made again, or an entry znode edited by hand (zkCli), which
// does not raise the version, is seen by heartbeats within that minute
// (a run's start reads the pause flags afresh). Every client of a root
// raises the space's version as it writes: this layout, which the root's
// marker names (Open refuses a root laid out another way:
// ErrOtherLayout). (Watches would spare the read too, but go-zookeeper
// v1.0.4 races on its last zxid when it sets a session's watches again
// after a reconnect, which the race detector reports: not used.) List and
// Get read the beat znode beside the entry znodes (per name, the higher
// version); heartbeats are written by Beat only. The beat znode of
// "hosts" holds a few hundred bytes per live host, within jute.maxbuffer
// (1 MB) for fleets of over a thousand hosts.
package zookeeper
