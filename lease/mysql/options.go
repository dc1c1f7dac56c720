package mysql

import (
	"fmt"
	"time"

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
	// test holds the switches only tests set (testhooks.go).
	test testHooks
}

func defaultOptions() options {
	return options{table: DefaultTable, timeout: DefaultTimeout, drift: DefaultDrift}
}

// WithTable sets the lease table: NAME or DATABASE.NAME, each part made of
// letters, digits and underscores (not starting with a digit), at most 55
// bytes for NAME (64 for DATABASE). Default DefaultTable
// ("leasecron_leases") in the DSN's database. Entries and logs go to
// NAME_entries and NAME_log beside it.
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
		return fmt.Errorf("mysql backend: timeout must be positive, got %s", o.timeout)
	}
	if err := lease.CheckDrift(o.drift); err != nil {
		return fmt.Errorf("mysql backend: %w", err)
	}
	if _, _, err := parseTable(o.table); err != nil {
		return err
	}
	return nil
}
