package postgres

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasecron/leasecron/lease"
)

// Defaults of Open's options.
const (
	// DefaultTable is the lease table's name.
	DefaultTable = "leasecron_leases"
	// DefaultTimeout bounds every request (statement) to the server.
	DefaultTimeout = 2 * time.Second
	// DefaultDrift is the clock drift factor subtracted from every
	// validity, as in package lease.
	DefaultDrift = lease.DefaultDrift
)

// Option configures Open.
type Option func(*options)

type options struct {
	table   string
	timeout time.Duration
	drift   float64
	// unlogged creates the table UNLOGGED (tests only: the negative
	// control of the durability tests; see export_test.go).
	unlogged bool
	// noReconnect turns off the retry of a statement on a fresh
	// connection after a connection failure (tests only).
	noReconnect bool
	// noSkipLocked makes Put's cleanup of expired entries wait for rows
	// locked by other statements (tests only: the negative control of
	// TestPutCleanupNoDeadlock).
	noSkipLocked bool
	// tracer sees every statement and its arguments (tests only).
	tracer pgx.QueryTracer
	// wallClockTakeover lets acquire.sql take over a row once expires_at
	// passed on the server's clock (tests only: the negative control of
	// TestServerClockStepForward).
	wallClockTakeover bool
	// clockStep, if set, is added to the server's clock_timestamp() in
	// the lease statements, in µs, read at every statement (tests only:
	// the injected step of the server's clock).
	clockStep *atomic.Int64
}

func defaultOptions() options {
	return options{table: DefaultTable, timeout: DefaultTimeout, drift: DefaultDrift}
}

// WithTable sets the lease table: NAME or SCHEMA.NAME, each part made of
// letters, digits and underscores (not starting with a digit), at most 63
// bytes. The name is quoted as written, so it is case-sensitive; use lower
// case. Default DefaultTable ("leasecron_leases") in the role's
// search_path (normally the public schema). Entries and logs go to
// NAME_entries and NAME_log in the same schema (NAME cut to 55 bytes if
// longer).
func WithTable(name string) Option { return func(o *options) { o.table = name } }

// WithTimeout sets the per-request timeout: every statement (and the
// connect it may need) is bounded by it, so a paused or unreachable server
// cannot hang a call. Default DefaultTimeout (2 s). It must be positive.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithDrift sets the clock drift factor subtracted from every validity:
// validity = ttl - elapsed - (ttl*drift + 2ms). Default DefaultDrift
// (0.01). It must be in [0, 1).
func WithDrift(f float64) Option { return func(o *options) { o.drift = f } }

func (o *options) check() error {
	if o.timeout <= 0 {
		return fmt.Errorf("postgres backend: timeout must be positive, got %s", o.timeout)
	}
	if err := lease.CheckDrift(o.drift); err != nil {
		return fmt.Errorf("postgres backend: %w", err)
	}
	if _, err := parseTable(o.table); err != nil {
		return err
	}
	return nil
}
