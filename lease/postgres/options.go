package postgres

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

// Config says where the leases live and how to use the server. Zero
// fields take the defaults above.
type Config struct {
	// URL is the database: postgres://user[:password]@host[:port][,host2[:port]]/dbname?sslmode=verify-full
	// (see CheckURL for the options allowed). It carries the password:
	// never log it (log Redact of it).
	URL string
	// Table is the lease table: NAME or SCHEMA.NAME, each part made of
	// letters, digits and underscores (not starting with a digit), at
	// most 63 bytes, quoted as written (so case-sensitive; use lower
	// case). Default DefaultTable in the role's search_path. Entries and
	// logs go to NAME_entries and NAME_log in the same schema.
	Table string
	// Timeout bounds every request (statement, and the connect it may
	// need), so that a paused or unreachable server cannot hang a call;
	// default DefaultTimeout. It must be positive.
	Timeout time.Duration
	// Drift is the clock drift factor subtracted from every validity:
	// validity = ttl - elapsed - (ttl*drift + 2ms); default (0)
	// DefaultDrift; lease.NoDrift for none.
	// It must be in [0, 1).
	Drift float64
}

// options returns the options cfg sets over the defaults.
func (cfg Config) options() options {
	o := defaultOptions()
	if cfg.Table != "" {
		o.table = cfg.Table
	}
	if cfg.Timeout != 0 {
		o.timeout = cfg.Timeout
	}
	o.drift = lease.DriftOf(cfg.Drift)
	return o
}

// Option changes what Open does, for tests (export_test.go).
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
