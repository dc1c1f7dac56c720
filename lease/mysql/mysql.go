package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/internal/sqllease"
)

// Backend keeps leases in a MySQL or MariaDB (InnoDB) table. It is safe for
// concurrent use.
type Backend struct {
	db     *sql.DB
	core   *sqllease.Core // settings, server, takeover observations, closed
	test   testHooks
	dbName string // the table's database ("" for the DSN's)
	name   string // the table's name
	table  string // quoted
	user   string
	sql    statements
	store  storeStatements // Entries and Logs
	// tableReady is set once the lease table exists and is usable,
	// storeReady once the tables of entries and logs are (see ensureStore).
	tableReady, storeReady sqllease.Ready
	// beatSwept is when a Beat last swept the expired entries of its
	// space (unix ns; see Beat).
	beatSwept atomic.Int64
}

var _ lease.Backend = (*Backend)(nil)

// Open returns a Backend on the server of cfg.DSN, a go-sql-driver/mysql data
// source name (user:password@tcp(host:3306)/dbname?tls=true; see CheckDSN
// for the parameters it may carry and ForcedDSN for those the backend
// sets), with a pool of connections.
//
// Open connects and creates the lease table if it is missing (see
// schema.sql and Config.Table). It fails when the DSN or a setting is
// invalid, the server refuses the credentials, the database does not
// exist, the user may not create the missing table (the error names the
// table and the privilege), or the table exists without the expected
// columns. When the server cannot be reached (down, timed out), Open
// still returns the Backend: every call first retries creating the table
// and fails, naming the server, until it answers. ctx bounds the whole of
// Open, and each request is bounded by the timeout. Errors never contain
// the password.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	return open(ctx, cfg)
}

// open is Open with test options (export_test.go) over cfg's.
func open(ctx context.Context, c Config, opts ...Option) (*Backend, error) {
	dsn := c.DSN
	o := c.options()
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	cfg, err := parseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql backend: %w", err)
	}
	if cfg.Timeout <= 0 || cfg.Timeout > o.Timeout {
		cfg.Timeout = o.Timeout
	}
	// The driver's own log lines (a dead idle connection dropped, ...)
	// would go to the process's stderr, outside leasecron's logging; the
	// errors that matter reach the caller.
	cfg.Logger = nopLogger{}
	if o.test.noReconnect {
		cfg.CheckConnLiveness = false
	}
	conn, err := driver.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql backend: %s: %s", Redact(dsn), scrub(err.Error(), dsn))
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(8)
	db.SetConnMaxIdleTime(5 * time.Minute)
	dbName, name, _ := parseTable(o.Table)
	table := quote(dbName, name)
	server := Redact(dsn)
	b := &Backend{db: db, core: sqllease.NewCore(o.Options, server), test: o.test, dbName: dbName, name: name,
		table: table, user: cfg.User, sql: newStatements(table, o), store: newStoreStatements(dbName, name)}
	if err := b.core.OpenCheck(ctx, b.ensureTable, permanent); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("mysql backend: %w", sqllease.Scrubbed(server, err, scrub(err.Error(), dsn)))
	}
	return b, nil
}

// permanent reports whether err is one that retrying cannot cure: the
// server answered with an error other than a connection-level one, a
// deadlock or a lock wait timeout.
func permanent(err error) bool {
	if sqllease.IsPermanent(err) {
		return true
	}
	var me *driver.MySQLError
	return errors.As(err, &me) && !retryableCode(me.Number)
}

// retryableCode reports whether a server error means the statement did
// not take effect and may be sent again: a deadlock (InnoDB rolled the
// statement back), a lock wait timeout, the connection killed or the
// server shutting down, or a read-only server (a failover in progress).
func retryableCode(n uint16) bool {
	switch n {
	case erDeadlock, erLockWaitTimeout, erConnectionKilled, erServerShutdown, erQueryInterrupted, erReadOnly:
		return true
	}
	return false
}

// do runs f. When its connection was dead (the server restarted, KILL
// CONNECTION, a cut; database/sql drops such a connection), it runs f
// again, up to sqllease.ReconnectAttempts times in all, while ctx lasts.
//
// A deadlock (which InnoDB resolves by rolling one statement back) is
// retried after a short random pause for as long as ctx lasts, without
// counting as an attempt: the lease statements lock their rows in key
// order and never deadlock with each other, but the cleanups of Append
// and Put may.
func (b *Backend) do(ctx context.Context, f func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		if b.core.Closed() {
			return lease.ErrClosed
		}
		err := f(ctx)
		if me := (*driver.MySQLError)(nil); err != nil && ctx.Err() != nil && errors.As(err, &me) && retryableCode(me.Number) {
			// Out of time while retrying what the server rolled back
			// (a deadlock, a lock wait): say both.
			return errors.Join(err, ctx.Err())
		}
		if err == nil || ctx.Err() != nil || b.test.noReconnect || !sqllease.ConnectionLost(err, permanent) {
			return err
		}
		var me *driver.MySQLError
		if errors.As(err, &me) && me.Number == erDeadlock {
			attempt--
			t := time.NewTimer(lease.Jitter(2 * time.Millisecond))
			select {
			case <-ctx.Done():
				t.Stop()
				return errors.Join(err, ctx.Err())
			case <-t.C:
			}
		}
		if attempt >= sqllease.ReconnectAttempts {
			return err
		}
	}
}

// call makes sure the table exists and runs f (see do), bounded by the
// timeout. Its error names the server.
func (b *Backend) call(ctx context.Context, f func(context.Context) error) error {
	return b.callFor(ctx, b.core.Timeout, f)
}

// callFor is call bounded by d instead of the timeout.
func (b *Backend) callFor(ctx context.Context, d time.Duration, f func(context.Context) error) error {
	return b.core.Call(ctx, d, b.ensureTable, func(ctx context.Context) error { return b.do(ctx, f) })
}

// queryRow returns a sqllease.RowFunc that runs query with args through
// call (call or callStore).
func (b *Backend) queryRow(ctx context.Context, call func(context.Context, func(context.Context) error) error, query string, args ...any) sqllease.RowFunc {
	return func(dest ...any) (bool, error) {
		found := false
		err := call(ctx, func(ctx context.Context) error {
			err := b.db.QueryRowContext(ctx, query, args...).Scan(dest...)
			found = err == nil
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			return err
		})
		return found, err
	}
}

// stmt returns a lease statement as sent: query itself, or with the
// injected step of the server's clock (tests only).
func (b *Backend) stmt(query string) string {
	if b.test.clockStep == nil {
		return query
	}
	return strings.ReplaceAll(query, "UTC_TIMESTAMP(6)",
		fmt.Sprintf("(UTC_TIMESTAMP(6) + INTERVAL %d MICROSECOND)", b.test.clockStep.Load()))
}

// Inspect reads key's row: holder (its Owner while the lease is held),
// time left on the database's clock, completed epoch, fence and note. A
// key never used has NoteVersion -1 and zero values. It fails (naming the
// server) when the server does not answer within the timeout.
func (b *Backend) Inspect(ctx context.Context, key string) (lease.Info, error) {
	return sqllease.Inspect(key, b.queryRow(ctx, b.call, b.stmt(b.sql.inspect), key))
}

// SetNote stores note in key's row unless a note of the same or a higher
// version is already there (a lower version never overwrites a higher
// one). It creates the row if needed; it does not touch the lease.
func (b *Backend) SetNote(ctx context.Context, key string, version int64, note string) error {
	if err := checkText("set note", key, note); err != nil {
		return err
	}
	err := b.call(ctx, func(ctx context.Context) error {
		_, err := b.db.ExecContext(ctx, b.sql.note, key, version, note)
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
		return b.do(ctx, func(ctx context.Context) error {
			_, err := b.db.ExecContext(ctx, "SELECT 1")
			return err
		})
	})
}

// Warm creates the table if missing and makes sure the pool holds a live
// connection, so that the next request does not pay for a connect and a
// handshake; all within the timeout.
func (b *Backend) Warm(ctx context.Context) error {
	return b.call(ctx, func(ctx context.Context) error { return b.db.PingContext(ctx) })
}

// Timeout is the per-request timeout (Config.Timeout; default 2 s).
func (b *Backend) Timeout() time.Duration { return b.core.Timeout }

// Quorum is 1: one server decides.
func (b *Backend) Quorum() int { return 1 }

// Servers returns the server as user@tcp(host:port)/dbname, without the
// password and the parameters.
func (b *Backend) Servers() []string { return []string{b.core.Server} }

// Table returns the lease table's name, quoted as the statements use it.
func (b *Backend) Table() string { return b.table }

// Close closes the connections; later calls fail with lease.ErrClosed.
// Leases still held expire by their TTL. It is safe to call more than
// once.
func (b *Backend) Close() error {
	return b.core.Close(b.db.Close)
}

// nopLogger discards the driver's log lines.
type nopLogger struct{}

func (nopLogger) Print(...any) {}
