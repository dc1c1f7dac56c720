// Package mysql is the MySQL/MariaDB backend of leasecron: each lease is a
// row of one InnoDB table, taken by one INSERT ... ON DUPLICATE KEY UPDATE
// per batch and renewed by one UPDATE — the lock-table design of the MySQL
// articles (a unique key that makes the second INSERT fail, an expiry
// column, a version column for optimistic updates), with the database's
// clock for reports and the contender's clock for takeover.
//
// # The table
//
// One row per key (schema.sql): the current token and owner, expires_at on
// the database's clock (UTC_TIMESTAMP(6), DATETIME(6): no session time
// zone can shift it), the TTL, a fence counter, a version counter, the
// completed epoch and a note (the run record `leasecron status` shows).
// Open creates the table if it is missing (CREATE TABLE IF NOT EXISTS,
// ENGINE=InnoDB, utf8mb4). Keys and tokens are VARBINARY: compared and
// sorted bytewise, as Go compares strings, with no collation folding case
// or padding spaces. Rows are never deleted: deleting one would restart
// its fence counter.
//
// # Statements
//
// MySQL has no RETURNING and no data-modifying WITH, so where PostgreSQL
// takes a batch in one statement that also reports, this backend sends
// one write statement and one read, each in autocommit (no transaction is
// held open across round trips, no session state, no advisory lock):
//
//   - acquire.sql takes a whole batch in one multi-row INSERT ... ON
//     DUPLICATE KEY UPDATE, its rows in key order (bytewise, the primary
//     key's order): the statement locks each row as it reaches it, so two
//     batches with overlapping keys lock them in the same order and one
//     waits for the other instead of deadlocking
//     (TestConcurrentBatchesNoDeadlock: 16 batches at once; its negative
//     control sends the keys unsorted and gets deadlock errors). The first
//     assignment decides (the row takes the new token only when it is
//     free and its done_epoch is below the epoch; tokens are random) and
//     the others follow it (fence + 1, version + 1, owner, TTL, expiry):
//     MySQL and MariaDB run ON DUPLICATE KEY UPDATE's assignments from left
//     to right, each seeing the previous ones (MariaDB's
//     SIMULTANEOUS_ASSIGNMENT sql_mode, off by default, is refused by Open).
//     rows.sql then reads the batch's rows back: a row carrying this
//     attempt's token was granted (its fence is the new one); any other
//     row is a refusal, reported with its holder, time left and completed
//     epoch. The read needs no transaction: only the holder's own
//     statements, or a takeover after a whole TTL, change a granted row.
//     Acquire is a batch of one, retried with the same token.
//   - extend.sql, release.sql and complete.sql are UPDATEs guarded by key
//     and token; zero rows matched (clientFoundRows) means the lease is
//     lost (ErrNotHeld). Complete succeeds on a lease that ran out as long
//     as nobody took the key since (the token is still there), and leaves
//     the epoch open when someone did.
//
// Every statement is correct under REPEATABLE READ and READ COMMITTED
// alike (the conformance suite runs under both, set through the DSN): the
// writes are single statements that lock the rows they decide on, and the
// reads are single autocommit statements.
//
// # Time and takeover
//
// The client never sends a timestamp, only durations. A contender takes a
// held row over only when it has seen the row's token and version
// unchanged for the holder's TTL on its own monotonic clock (the claim it
// sends with the key: acquire.sql's takeover condition, one small rule,
// takeoverRule in table.go). The holder counts its validity from before
// its request left, minus a drift margin, as package lease does:
//
//	validity = ttl - elapsed - (ttl*drift + 2ms)
//
// so the contender's count ends after the holder's validity whatever the
// server's clock does: a server clock that steps forward (an NTP step, a
// failover to a replica whose clock is ahead) cannot shorten a lease
// (TestServerClockStepForward; its negative control takes over on
// expires_at and overlaps). expires_at, on the server's clock, is only
// reported (time left in refusals and Inspect).
//
// # Entries and logs
//
// lease.Entries and lease.Logs live in two more InnoDB tables named
// after the lease table: <table>_entries and <table>_log
// (store_schema.sql), created by the first call that needs them. An entry
// is one INSERT ... ON DUPLICATE KEY UPDATE (put.sql) that replaces the
// stored row when it expired on the database's clock or has a lower
// version; a second statement (sweep.sql, best effort) deletes up to 100
// expired entries of the space. An Append is two statements: insert the
// record unless its ID is there or it is older than the newest limit
// (append.sql), then delete the records older than the limit-th newest
// (trim.sql). A deadlock between concurrent cleanups is retried.
//
// # Guarantees and their preconditions
//
// Mutual exclusion and fencing hold as long as the server does not lose
// commits it acknowledged: InnoDB with innodb_flush_log_at_trx_commit=1
// (and sync_binlog=1 with binary logging), and no failover to a replica
// that lacks the last commits. With asynchronous replication a failover
// can lose acknowledged grants and completions: a lease can be granted
// twice and a completed epoch run again. Semi-synchronous replication with
// rpl_semi_sync_master_wait_point=AFTER_SYNC (lossless) and a failover to
// the acknowledging replica keeps them. Galera and group replication
// certify writes at commit, so a conflicting concurrent grant on another
// node fails instead of overlapping (retried as a refusal), as long as
// clients write to one node or the cluster keeps a primary component. See
// docs/backends.md.
//
// # Failures
//
// Every request is bounded by the timeout (Config.Timeout, default 2 s): on a
// paused or unreachable server, calls fail with an error naming the
// server (a *lease.NodeError) once it passes. A statement that finds its
// connection dead (server restarted, KILL CONNECTION, network cut) is sent
// again on a fresh connection within the same timeout: every statement may
// safely run twice (an acquisition retried with the same token re-enters
// its own grant). Hold (package lease) closes Done before ValidUntil when
// extensions keep failing.
//
// # Shared with lease/postgres
//
// What this driver and lease/postgres write alike lives once in
// lease/internal/sqllease: Acquire's retry loop, the checks and the
// decision of an attempt at a batch (a lease for a granted row, a refusal
// explaining the others, the takeover bookkeeping), the Lease type with
// Extend, Release and Complete, the settings (Table, Timeout, Drift) and
// their defaults, and the Backend's skeleton (timeouts, closing, errors
// naming the server, Health). This package holds what talks to MySQL or
// MariaDB through database/sql: the statements (the .sql files), running
// them with the retries its server needs, DSN parsing and the schema
// checks. The fault
// and clock step tests are one body each, in lease/internal/sqlleasetest,
// run on both stores.
package mysql
