// Package postgres is the PostgreSQL backend of leasecron: each lease is a
// row of one table, taken and renewed by single statements — like
// ShedLock's JDBC provider with usingDbTime(), or a Redis SET NX PX with
// the database's clock in place of Redis's.
//
// # The table
//
// One row per key (schema.sql): the current token and owner, expires_at on
// the database's clock, a fence counter, the completed epoch and a note
// (the run record `leasecron status` shows). Open creates the table if it
// is missing (CREATE TABLE IF NOT EXISTS; LOGGED, so acknowledged commits
// survive a crash of the server). Rows are never deleted: deleting one
// would restart its fence counter.
//
// # Statements
//
// Every operation is one statement, one round trip, with no transaction
// around it, no advisory lock and no session state (so it works behind
// PgBouncer in transaction pooling mode):
//
//   - acquire.sql takes a whole batch: the requests, as arrays, are unnested
//     into one INSERT ... ON CONFLICT (key) DO UPDATE ... WHERE the row is
//     free (no token, or expires_at <= clock_timestamp()) AND done_epoch <
//     the epoch, setting fence = fence + 1 and expires_at =
//     clock_timestamp() + ttl. The same statement returns, for a refused
//     key, the row as it stood (holder, time left, completed epoch), so a
//     refusal explains itself without a second round trip. Acquire is a
//     batch of one, retried.
//   - extend.sql and release.sql are UPDATEs guarded by key and token
//     (extend also by expires_at > clock_timestamp()); zero rows means the
//     lease is lost (ErrNotHeld).
//   - complete.sql raises done_epoch and frees the row, guarded by the
//     token too: a lease lost to another acquisition leaves its epoch open.
//
// # Time
//
// Expiry is decided only by the database's clock_timestamp(): the client
// never sends a timestamp, only durations, so the wall clocks of the
// clients and of the server may differ by any amount. The client counts a
// lease's validity on its own monotonic clock from the moment before the
// request left, minus a drift margin, as package lease does:
//
//	validity = ttl - elapsed - (ttl*drift + 2ms)
//
// and the server starts the TTL when it runs the statement, which is
// later; so the client's ValidUntil always comes before the server's
// expiry as long as the two clocks' rates differ by less than drift.
//
// # Guarantees and their preconditions
//
// Mutual exclusion and fencing hold as long as the server does not lose
// commits it acknowledged: fsync and synchronous_commit on (the defaults),
// and no failover to an asynchronous replica that lacks the last commits.
// Fence is strictly greater than every earlier holder's under the same
// condition, and as long as rows are not deleted.
//
// # Failures
//
// Every request is bounded by the timeout (WithTimeout, default 2 s): on a
// paused or unreachable server, calls fail with an error naming the
// server (a *backend.NodeError) once it passes. A statement that finds its
// connection dead (server restarted, pg_terminate_backend, network cut) is
// sent again on a fresh connection, within the same timeout: every
// statement may safely run twice (an acquisition retried with the same
// token re-enters its own grant). Hold (package backend) closes Done before
// ValidUntil when extensions keep failing.
package postgres
