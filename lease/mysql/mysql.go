package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/leasecron/leasecron/lease"
)

// Backend keeps leases in a MySQL or MariaDB (InnoDB) table. It is safe for
// concurrent use.
type Backend struct {
	db      *sql.DB
	o       options
	dbName  string // the table's database ("" for the DSN's)
	name    string // the table's name
	table   string // quoted
	user    string
	server  string // redacted DSN
	sql     statements
	store   storeStatements // Entries and Logs
	timeout time.Duration
	obs     *lease.Observations // held rows seen, for takeover

	ensureMu sync.Mutex
	ready    atomic.Bool // the table exists and is usable
	// storeMu and storeReady do for the tables of entries and logs what
	// ensureMu and ready do for the lease table (see ensureStore).
	storeMu    sync.Mutex
	storeReady atomic.Bool
	closed     atomic.Bool
	// beatSwept is when a Beat last swept the expired entries of its
	// space (unix ns; see Beat).
	beatSwept atomic.Int64
}

var _ lease.Backend = (*Backend)(nil)

// reconnectAttempts is how many times a statement is sent, on a fresh
// connection each time, when the connection it used turned out dead.
const reconnectAttempts = 3

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
	if cfg.Timeout <= 0 || cfg.Timeout > o.timeout {
		cfg.Timeout = o.timeout
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
	dbName, name, _ := parseTable(o.table)
	table := quote(dbName, name)
	b := &Backend{db: db, o: o, dbName: dbName, name: name, table: table, user: cfg.User,
		server: Redact(dsn), sql: newStatements(table, o), store: newStoreStatements(dbName, name),
		timeout: o.timeout, obs: lease.NewObservations()}
	tctx, cancel := context.WithTimeout(ctx, o.timeout)
	err = b.ensureTable(tctx)
	cancel()
	if err != nil && (ctx.Err() != nil || permanent(err)) {
		_ = db.Close()
		return nil, fmt.Errorf("mysql backend: %w", b.scrubErr(err, dsn))
	}
	return b, nil
}

// scrubErr makes sure err's text does not quote the DSN's password.
func (b *Backend) scrubErr(err error, dsn string) error {
	if msg := scrub(err.Error(), dsn); msg != err.Error() {
		return &lease.NodeError{Node: b.server, Err: errors.New(msg)}
	}
	return err
}

func (b *Backend) nodeErr(err error) error {
	var ne *lease.NodeError
	if errors.As(err, &ne) {
		return err
	}
	return &lease.NodeError{Node: b.server, Err: err}
}

// permanent reports whether err is one that retrying cannot cure: the
// server answered with an error other than a connection-level one, a
// deadlock or a lock wait timeout.
func permanent(err error) bool {
	var pm permanentError
	if errors.As(err, &pm) {
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

// connectionLost reports whether err is worth a retry on a fresh
// connection: anything but a server error, a permanent error or the end of
// ctx. Every statement of this package may be sent twice (an acquisition
// retried with the same token re-enters its own grant).
func connectionLost(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lease.ErrClosed) {
		return false
	}
	return !permanent(err)
}

// do runs f. When its connection was dead (the server restarted, KILL
// CONNECTION, a cut; database/sql drops such a connection), it runs f
// again, up to reconnectAttempts times in all, while ctx lasts.
//
// A deadlock (which InnoDB resolves by rolling one statement back) is
// retried after a short random pause for as long as ctx lasts, without
// counting as an attempt: the lease statements lock their rows in key
// order and never deadlock with each other, but the cleanups of Append
// and Put may.
func (b *Backend) do(ctx context.Context, f func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		if b.closed.Load() {
			return lease.ErrClosed
		}
		err := f(ctx)
		if err == nil || ctx.Err() != nil || b.o.test.noReconnect || !connectionLost(err) {
			return err
		}
		var me *driver.MySQLError
		if errors.As(err, &me) && me.Number == erDeadlock {
			attempt--
			t := time.NewTimer(lease.Jitter(2 * time.Millisecond))
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
		if attempt >= reconnectAttempts {
			return err
		}
	}
}

// call bounds ctx by d, makes sure the table exists and runs f (see do).
// Its error names the server.
func (b *Backend) call(ctx context.Context, d time.Duration, f func(context.Context) error) error {
	if b.closed.Load() {
		return b.nodeErr(lease.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := b.ensureTable(ctx); err != nil {
		return err
	}
	if err := b.do(ctx, f); err != nil {
		return b.nodeErr(err)
	}
	return nil
}

// stmt returns a lease statement as sent: query itself, or with the
// injected step of the server's clock (tests only).
func (b *Backend) stmt(query string) string {
	if b.o.test.clockStep == nil {
		return query
	}
	return strings.ReplaceAll(query, "UTC_TIMESTAMP(6)",
		fmt.Sprintf("(UTC_TIMESTAMP(6) + INTERVAL %d MICROSECOND)", b.o.test.clockStep.Load()))
}

// Inspect reads key's row: holder (its Owner while the lease is held),
// time left on the database's clock, completed epoch, fence and note. A
// key never used has NoteVersion -1 and zero values. It fails (naming the
// server) when the server does not answer within the timeout.
func (b *Backend) Inspect(ctx context.Context, key string) (lease.Info, error) {
	in := lease.Info{NoteVersion: -1}
	var leftUS int64
	err := b.call(ctx, b.timeout, func(ctx context.Context) error {
		err := b.db.QueryRowContext(ctx, b.stmt(b.sql.inspect), key).Scan(&in.Holder, &leftUS, &in.DoneEpoch, &in.Fence, &in.Note, &in.NoteVersion)
		if errors.Is(err, sql.ErrNoRows) {
			in = lease.Info{NoteVersion: -1}
			return nil
		}
		return err
	})
	if err != nil {
		return lease.Info{}, fmt.Errorf("inspect %s: %w", key, err)
	}
	in.Answered = 1
	if leftUS > 0 {
		in.TTL = time.Duration(leftUS) * time.Microsecond
		in.HolderNodes = 1
	}
	return in, nil
}

// SetNote stores note in key's row unless a note of the same or a higher
// version is already there (a lower version never overwrites a higher
// one). It creates the row if needed; it does not touch the lease.
func (b *Backend) SetNote(ctx context.Context, key string, version int64, note string) error {
	if err := checkText("set note", key, note); err != nil {
		return err
	}
	err := b.call(ctx, b.timeout, func(ctx context.Context) error {
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
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	start := time.Now()
	err := b.do(ctx, func(ctx context.Context) error {
		_, err := b.db.ExecContext(ctx, "SELECT 1")
		return err
	})
	// Err is the bare error: Server names the server.
	return []lease.ServerStatus{{Server: b.server, Err: err, Latency: time.Since(start), Voting: err == nil}}
}

// Warm creates the table if missing and makes sure the pool holds a live
// connection, so that the next request does not pay for a connect and a
// handshake; all within the timeout.
func (b *Backend) Warm(ctx context.Context) error {
	return b.call(ctx, b.timeout, func(ctx context.Context) error { return b.db.PingContext(ctx) })
}

// Timeout is the per-request timeout (Config.Timeout; default 2 s).
func (b *Backend) Timeout() time.Duration { return b.timeout }

// Quorum is 1: one server decides.
func (b *Backend) Quorum() int { return 1 }

// Servers returns the server as user@tcp(host:port)/dbname, without the
// password and the parameters.
func (b *Backend) Servers() []string { return []string{b.server} }

// Table returns the lease table's name, quoted as the statements use it.
func (b *Backend) Table() string { return b.table }

// Close closes the connections; later calls fail with lease.ErrClosed.
// Leases still held expire by their TTL. It is safe to call more than
// once.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	return b.db.Close()
}

// nopLogger discards the driver's log lines.
type nopLogger struct{}

func (nopLogger) Print(...any) {}
