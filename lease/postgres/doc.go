// Package postgres is the PostgreSQL backend of leasecron: each lease is a
// row of one table, taken and renewed by single statements — like
// ShedLock's JDBC provider, except that no clock of the server decides
// when a lease ends: a contender takes a row over once it has seen the
// holder's last renewal unchanged for a TTL on its own monotonic clock
// (see Time).
//
// # The table
//
// One row per key (schema.sql): the current token and owner, expires_at on
// the database's clock (a report: see Time), a fence counter, the
// completed epoch and a note (the run record `leasecron status` shows).
// Open creates the table if it is missing (CREATE TABLE IF NOT EXISTS;
// LOGGED, so acknowledged commits survive a crash of the server). Rows are
// never deleted: deleting one would restart its fence counter.
//
// # Statements
//
// Every operation is one statement, one round trip, with no transaction
// around it, no advisory lock and no session state (so it works behind
// PgBouncer in transaction pooling mode):
//
//   - acquire.sql takes a whole batch: the requests, as arrays, are unnested
//     into one INSERT ... ON CONFLICT (key) DO UPDATE ... WHERE the row is
//     free AND done_epoch < the epoch, setting fence = fence + 1 and
//     expires_at = clock_timestamp() + ttl. Free means no token, or our
//     own token (a retry), or a held row this client has seen unchanged
//     for the holder's TTL (see Time: not expires_at). The same statement
//     returns, for a refused key, the row as it stood (holder, time left,
//     completed epoch, token, row version, TTL), so a refusal explains
//     itself and is recorded without a second round trip. Acquire is a
//     batch of one, retried.
//   - extend.sql and release.sql are UPDATEs guarded by key and token;
//     zero rows means the lease is lost (ErrNotHeld).
//   - complete.sql raises done_epoch and frees the row, guarded by the
//     token too: a lease lost to another acquisition leaves its epoch open.
//
// # Entries and logs
//
// lease.Entries and lease.Logs live in two more LOGGED tables beside
// the lease table, named after it: <table>_entries and <table>_log, in its
// schema (store_schema.sql; a lease table name longer than 55 bytes is cut
// to make room for the suffix). The first call of Put, Get, List, Append
// or Log creates both if either is missing, in one transaction, as Open
// does the lease table (daemons starting at once are fine); a role that
// may not create them gets an error naming the tables and the DDL, and its
// leases keep working. Names and IDs are COLLATE "C": they sort bytewise,
// as Go strings do.
//
//   - An entry is a row (space, name) -> version, data, ttl_us, expires_at.
//     put.sql is one INSERT ... ON CONFLICT (space, name) DO UPDATE ...
//     WHERE the stored row expired (expires_at <= clock_timestamp()) OR
//     its version is lower. A TTL sets expires_at = clock_timestamp() +
//     TTL, on the database's clock like a lease (kept to the microsecond,
//     rounded up); no TTL leaves it NULL. Get and List (get.sql, list.sql)
//     skip expired rows.
//   - Expired rows are deleted by the next Put in their space, up to 100
//     per Put, in the same statement (a partial index finds them). So the
//     table holds the live entries plus, per space, the entries expired
//     since its last Put (beyond 100, the next Puts finish the job): a
//     dead host's heartbeat goes with the next heartbeat of any live host.
//     Entries without a TTL (pause flags, retry state: one per job) stay
//     until replaced.
//   - A record is a row (log, id) -> at, data; at is Record.At cut to the
//     millisecond. append.sql, one statement, inserts the record unless
//     its ID is there or it is older than the log's newest limit records,
//     and deletes the records older than the limit-th newest (counting the
//     new one). A log thus holds at most limit rows (16 KiB of data each),
//     or a few more right after concurrent Appends, until the next Append;
//     the log of a job that is removed stays until deleted by hand. Log
//     (log.sql) reads the index (log, at DESC, id DESC).
//
// Put and Append may be sent twice (see Failures): a repeated Put finds
// its own version and changes nothing, a repeated Append finds its ID.
// With one server, a read after an acknowledged Put or Append sees it,
// from any client, under the same precondition as the leases (the server
// keeps acknowledged commits). Cleanups never wait for rows another
// statement locked (SKIP LOCKED), so concurrent Puts and Appends do not
// deadlock.
//
// # Time
//
// No clock of the server decides anything. The client never sends a
// timestamp, and takeover of a held row is counted on the contender's own
// monotonic clock, as ZooKeeper and Curator expire a session on the
// observer's clock:
//
//   - Every write of a row (a grant, each renewal) makes a new row version:
//     a new xmin, the id of the writing transaction (Npgsql and EF Core use
//     it as a row version for optimistic concurrency the same way). A
//     SetNote on the row makes one too, which only restarts the count.
//     One row gets the same xmin again only after some 4 billion
//     transactions, or when the server loses commits (see below).
//   - A refused acquisition records the holder's token, the row version and
//     the holder's TTL, with the time its reply arrived on the client's
//     monotonic clock (per Backend, in memory). The version was committed
//     before the statement's snapshot, so before that reply, and the holder
//     counted its validity from before its own request left: earlier still.
//   - A later acquisition of the key passes the version it has seen for at
//     least that TTL, and the statement takes the row over only if it still
//     carries that token and version (compared after the row lock, so a
//     renewal that commits first wins). A holder that renewed in between
//     wrote a new version, and the count starts again.
//
// So a server clock that steps (an NTP step, a failover to a standby whose
// clock is ahead) shortens no lease, and renewals ignore expires_at too.
// expires_at (clock_timestamp() + ttl) is kept for reports only: the time
// left of a refusal (HolderTTL) and Inspect, which a step of the server's
// clock makes wrong. The client counts a lease's validity on its own
// monotonic clock from the moment before the request left, minus a drift
// margin, as package lease does:
//
//	validity = ttl - elapsed - (ttl*drift + 2ms)
//
// and a contender waits the full ttl from a later instant on its own
// clock; so a holder's ValidUntil always comes before any takeover as long
// as the two hosts' monotonic clocks run at rates that differ by less than
// drift.
//
// The cost is liveness, and memory: a holder that died is taken over one
// TTL after a contender first saw its last renewal (not when the server's
// clock says it expired), so a contender that first looks at a row long
// after its holder died still waits a full TTL; a contender that restarts
// forgets what it saw and waits a full TTL again (safe: it only waits
// longer). A daemon that watches a tick looks again when the refusal's time
// left has passed, so it takes a dead holder's tick over between one and
// two TTLs after the holder's last renewal. Each Backend keeps one
// observation per key it was refused (about 150 bytes), dropped when it
// gets the key or, once the map doubled, when not confirmed for a TTL plus
// a minute.
//
// # Guarantees and their preconditions
//
// Mutual exclusion and fencing hold as long as the server does not lose
// commits it acknowledged: fsync and synchronous_commit on (the defaults),
// and no failover to an asynchronous replica that lacks the last commits;
// and the monotonic clocks of the hosts (the holder's and the contender's)
// run at rates that differ by less than drift. The server's clock may
// step or drift by any amount. Fence is strictly greater than every
// earlier holder's under the same condition, and as long as rows are not
// deleted.
//
// # Failures
//
// Every request is bounded by the timeout (Config.Timeout, default 2 s): on a
// paused or unreachable server, calls fail with an error naming the
// server (a *lease.NodeError) once it passes. A statement that finds its
// connection dead (server restarted, pg_terminate_backend, network cut) is
// sent again on a fresh connection, within the same timeout: every
// statement may safely run twice (an acquisition retried with the same
// token re-enters its own grant). Hold (package lease) closes Done before
// ValidUntil when extensions keep failing.
//
// # Shared with lease/mysql
//
// What this driver and lease/mysql write alike lives once in
// lease/internal/sqllease: Acquire's retry loop, the checks and the
// decision of an attempt at a batch (a lease for a granted row, a refusal
// explaining the others, the takeover bookkeeping), the Lease type with
// Extend, Release and Complete, the settings (Table, Timeout, Drift) and
// their defaults, and the Backend's skeleton (timeouts, closing, errors
// naming the server, Health). This package holds what talks to PostgreSQL
// through pgx: the statements (the .sql files), running them with the
// retries its server needs, URL parsing and the schema checks. The fault
// and clock step tests are one body each, in lease/internal/sqlleasetest,
// run on both stores.
package postgres
