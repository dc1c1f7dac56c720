package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/internal/sqllease"
)

// Backend keeps leases in a PostgreSQL table. It is safe for concurrent
// use.
type Backend struct {
	pool  *pgxpool.Pool
	core  *sqllease.Core // settings, server, takeover observations, closed
	test  testHooks
	table string // quoted
	sql   statements
	store storeStatements // Entries and Logs
	// tableReady is set once the lease table exists and is usable,
	// storeReady once the tables of entries and logs are (see ensureStore).
	tableReady, storeReady sqllease.Ready
}

var _ lease.Backend = (*Backend)(nil)

// Open returns a Backend on the server of cfg.URL
// (postgres://user:password@host:5432/dbname?sslmode=verify-full; see
// pgx's ParseConfig for the options), with a pool of connections.
//
// Open connects and creates the lease table if it is missing (see
// schema.sql and Config.Table). It fails when the URL or a setting is
// invalid, the server refuses the credentials, the database does not
// exist, the role may not create the missing table (the error names the
// table, the server and the privilege), or the table exists without the
// expected columns or privileges. When the server cannot be reached (down,
// timed out), Open still returns the Backend: every call first retries
// creating the table and fails, naming the server, until it answers.
// ctx bounds the whole of Open, and each request is bounded by the timeout.
// Errors never contain the password.
//
// Statements go out in pgx's QueryExecModeExec (no named prepared
// statements, one round trip each), so the backend works behind PgBouncer
// in transaction pooling mode; it uses no advisory locks and no session
// state, and sends no server setting in the startup packet but
// application_name (PgBouncer refuses the others by default). A statement
// whose timeout passed is cancelled with a cancel request (pgx does that
// when it closes the connection); to bound statements on the server side
// as well, set one on the role: ALTER ROLE leasecron SET
// statement_timeout = '5s'.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	return open(ctx, cfg)
}

// open is Open with test options (export_test.go) over cfg's.
func open(ctx context.Context, c Config, opts ...Option) (*Backend, error) {
	connString := c.URL
	o := c.options()
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	table, _ := parseTable(o.Table)
	server := Redact(connString)
	if l := strings.ToLower(connString); !strings.HasPrefix(l, "postgres://") && !strings.HasPrefix(l, "postgresql://") {
		scheme, _, ok := strings.Cut(connString, "://")
		what := "no scheme"
		if ok && !strings.ContainsAny(scheme, "@:/ ") {
			what = fmt.Sprintf("scheme %q", scheme)
		}
		return nil, fmt.Errorf("postgres backend: %s: want a postgres:// URL (postgres://user@host:5432/dbname?sslmode=verify-full)", what)
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("postgres backend: %s: %s", server, scrub(err.Error(), connString))
	}
	cc := cfg.ConnConfig
	cc.DefaultQueryExecMode = pgx.QueryExecModeExec
	if o.test.tracer != nil {
		cc.Tracer = o.test.tracer
	}
	if cc.ConnectTimeout <= 0 || cc.ConnectTimeout > o.Timeout {
		cc.ConnectTimeout = o.Timeout
	}
	if _, ok := cc.RuntimeParams["application_name"]; !ok {
		cc.RuntimeParams["application_name"] = "leasecron"
	}
	// A dead connection is found by the statement itself and the statement
	// retried (see do), instead of a ping before every idle connection's
	// use, which would double the round trips of a Hold's renewals.
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres backend: %s: %s", server, scrub(err.Error(), connString))
	}
	b := &Backend{pool: pool, core: sqllease.NewCore(o.Options, server), test: o.test, table: table,
		sql: newStatements(table, o.test.unlogged, o.test.wallClockTakeover), store: newStoreStatements(o)}
	if err := b.core.OpenCheck(ctx, b.ensureTable, permanent); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres backend: %w", sqllease.Scrubbed(server, err, scrub(err.Error(), connString)))
	}
	return b, nil
}

// stmt returns a lease statement as sent: sql itself, or with the
// injected step of the server's clock (tests only).
func (b *Backend) stmt(sql string) string {
	if b.test.clockStep == nil {
		return sql
	}
	return strings.ReplaceAll(sql, "clock_timestamp()",
		fmt.Sprintf("(clock_timestamp() + %d * interval '1 microsecond')", b.test.clockStep.Load()))
}

// permanent reports whether err is one that retrying cannot cure: the
// server answered with an error other than a connection-level one.
func permanent(err error) bool {
	if sqllease.IsPermanent(err) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && !retryableCode(pe.Code)
}

// retryableCode reports whether a server error means the statement did
// not take effect and may be sent again on another connection: the
// connection or the server went away (class 08, 57P01-57P03), too many
// connections, or a deadlock or serialization failure.
func retryableCode(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", "53300", "40001", "40P01":
		return true
	}
	return strings.HasPrefix(code, "08")
}

// do runs f on a pooled connection. When the connection was dead (the
// server restarted, pg_terminate_backend, a cut), it drops the idle
// connections (they are likely dead too) and runs f again on a new one,
// up to sqllease.ReconnectAttempts times in all, while ctx lasts.
func (b *Backend) do(ctx context.Context, f func(context.Context, *pgx.Conn) error) error {
	for attempt := 1; ; attempt++ {
		if b.core.Closed() {
			return lease.ErrClosed
		}
		err := b.once(ctx, f)
		if err == nil || attempt >= sqllease.ReconnectAttempts || ctx.Err() != nil || b.test.noReconnect || !sqllease.ConnectionLost(err, permanent) {
			return err
		}
		b.pool.Reset()
	}
}

func (b *Backend) once(ctx context.Context, f func(context.Context, *pgx.Conn) error) error {
	c, err := b.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	return f(ctx, c.Conn())
}

// call makes sure the table exists and runs f (see do), bounded by the
// timeout. Its error names the server.
func (b *Backend) call(ctx context.Context, f func(context.Context, *pgx.Conn) error) error {
	return b.callFor(ctx, b.core.Timeout, f)
}

// callFor is call bounded by d instead of the timeout.
func (b *Backend) callFor(ctx context.Context, d time.Duration, f func(context.Context, *pgx.Conn) error) error {
	return b.core.Call(ctx, d, b.ensureTable, func(ctx context.Context) error { return b.do(ctx, f) })
}

// queryRow returns a sqllease.RowFunc that runs query with args through
// call (call or callStore).
func queryRow(ctx context.Context, call func(context.Context, func(context.Context, *pgx.Conn) error) error, query string, args ...any) sqllease.RowFunc {
	return func(dest ...any) (bool, error) {
		found := false
		err := call(ctx, func(ctx context.Context, c *pgx.Conn) error {
			err := c.QueryRow(ctx, query, args...).Scan(dest...)
			found = err == nil
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		})
		return found, err
	}
}

// Inspect reads key's row: holder (its Owner while the lease is held),
// time left on the database's clock, completed epoch, fence and note. A
// key never used has NoteVersion -1 and zero values. It fails (naming the
// server) when the server does not answer within the timeout.
func (b *Backend) Inspect(ctx context.Context, key string) (lease.Info, error) {
	return sqllease.Inspect(key, queryRow(ctx, b.call, b.stmt(b.sql.inspect), key))
}

// SetNote stores note in key's row unless a note of the same or a higher
// version is already there (a lower version never overwrites a higher
// one). It creates the row if needed; it does not touch the lease.
func (b *Backend) SetNote(ctx context.Context, key string, version int64, note string) error {
	err := b.call(ctx, func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, b.sql.note, key, version, note)
		return err
	})
	if err != nil {
		return fmt.Errorf("set note %s: %w", key, err)
	}
	return nil
}

// Health pings the server (SELECT 1) within the timeout. The server votes
// whenever it answers.
func (b *Backend) Health(ctx context.Context) []lease.ServerStatus {
	return b.core.Health(ctx, func(ctx context.Context) error {
		return b.do(ctx, func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "SELECT 1")
			return err
		})
	})
}

// Warm creates the table if missing and makes sure the pool holds a live
// connection (opening one if needed, replacing a dead one), so that the
// next request does not pay for a connect and a SCRAM handshake; all
// within the timeout.
func (b *Backend) Warm(ctx context.Context) error {
	return b.call(ctx, func(ctx context.Context, c *pgx.Conn) error { return c.Ping(ctx) })
}

// Timeout is the per-request timeout (Config.Timeout; default 2 s).
func (b *Backend) Timeout() time.Duration { return b.core.Timeout }

// Quorum is 1: one server decides.
func (b *Backend) Quorum() int { return 1 }

// Servers returns the server's URL with the password redacted.
func (b *Backend) Servers() []string { return []string{b.core.Server} }

// Table returns the lease table's name, quoted as the statements use it.
func (b *Backend) Table() string { return b.table }

// Close closes the connections; later calls fail with lease.ErrClosed.
// Leases still held are taken over once a contender has seen them
// unrenewed for their TTL. It is safe to call more than
// once. It waits for pgx's cleanup of connections whose requests timed
// out (a cancel request to the server, then closing), which pgx bounds by
// 15 s: a network that swallows packets can make Close that slow.
func (b *Backend) Close() error {
	return b.core.Close(func() error {
		b.pool.Close()
		return nil
	})
}
