// Package sqllease is what the two SQL lease drivers, lease/postgres and
// lease/mysql, share: the parts of a lease kept as a row of a table that
// do not depend on the SQL dialect or on the Go client (pgx or
// database/sql). Package lease holds what every driver shares (validity,
// tokens, completion retry, lease state, takeover observations); this
// package holds what only the row-per-key drivers share, the way
// database/sql sits between its callers and its drivers:
//
//   - the settings every SQL driver takes (table, timeout, drift), their
//     defaults and their checks (options.go);
//   - the Backend skeleton: the per-request timeout and the "closed"
//     state, errors that name the server, the creation of the tables once
//     (Ready), which errors a statement may be sent again after, Health
//     and Open's first look at the table (core.go, errors.go);
//   - Acquire's retry loop and the one attempt at a batch: checking the
//     requests, sorting their keys, and turning each key's row (Row) into
//     a lease or a refusal, with the takeover bookkeeping (acquire.go),
//     and taking back a grant whose answer was lost (lost.go);
//   - the held Lease: Extend, Release and Complete around the driver's
//     token-guarded statements (lease.go);
//   - the checks and error wrapping of Inspect and of the entries and logs
//     (store.go).
//
// A driver implements only what talks to its server: its statements (the
// .sql files beside it), running them on its client with the retries its
// server needs (Table), parsing its URL or DSN, and its schema checks.
package sqllease
