package postgres

import (
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/internal/sqllease"
)

// Defaults of Open's options (the same for every SQL driver).
const (
	// DefaultTable is the lease table's name.
	DefaultTable = sqllease.DefaultTable
	// DefaultTimeout bounds every request (statement) to the server.
	DefaultTimeout = sqllease.DefaultTimeout
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
	return options{Options: sqllease.Settings(cfg.Table, cfg.Timeout, cfg.Drift)}
}

// Option changes what Open does, for tests (export_test.go).
type Option func(*options)

// options are the settings of every SQL driver and the test switches.
type options struct {
	sqllease.Options
	// test holds the switches only tests set (testhooks.go).
	test testHooks
}

func (o *options) check() error {
	if err := o.Check("postgres backend"); err != nil {
		return err
	}
	_, err := parseTable(o.Table)
	return err
}
