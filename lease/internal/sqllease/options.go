package sqllease

import (
	"fmt"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// Defaults of the settings of every SQL driver (each driver exports them
// under its own name: postgres.DefaultTable, mysql.DefaultTimeout, ...).
const (
	// DefaultTable is the lease table's name.
	DefaultTable = "leasecron_leases"
	// DefaultTimeout bounds every request (statement) to the server.
	DefaultTimeout = 2 * time.Second
)

// Options are the settings every SQL driver takes from its Config: the
// lease table, the per-request timeout and the drift factor.
type Options struct {
	// Table is the lease table's name as configured (unquoted).
	Table string
	// Timeout bounds every request to the server.
	Timeout time.Duration
	// Drift is the clock drift factor subtracted from every validity.
	Drift float64
}

// Settings returns the options a Config sets, with the defaults
// (DefaultTable, DefaultTimeout) in place of zero values and the drift
// as lease.DriftOf reads it.
func Settings(table string, timeout time.Duration, drift float64) Options {
	o := Options{Table: DefaultTable, Timeout: DefaultTimeout}
	if table != "" {
		o.Table = table
	}
	if timeout != 0 {
		o.Timeout = timeout
	}
	o.Drift = lease.DriftOf(drift)
	return o
}

// Check refuses a timeout that is not positive and a drift outside
// [0, 1); backend names the driver in the error ("postgres backend").
// The table's name is the driver's to check.
func (o Options) Check(backend string) error {
	if o.Timeout <= 0 {
		return fmt.Errorf("%s: timeout must be positive, got %s", backend, o.Timeout)
	}
	if err := lease.CheckDrift(o.Drift); err != nil {
		return fmt.Errorf("%s: %w", backend, err)
	}
	return nil
}
