package config

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/mysql"
)

// MySQLConfig is the "mysql" section: leases are rows of one InnoDB table
// in a MySQL or MariaDB database.
type MySQLConfig struct {
	// DSN is the database, as written in the file, in go-sql-driver/mysql's
	// form: user[:password]@tcp(host:3306)/dbname?tls=true (see
	// mysql.CheckDSN for the parameters allowed). Open the database with
	// ConnString, which adds the password of PasswordFile.
	DSN string
	// Table is the lease table, created if missing: a lower-case SQL
	// identifier, optionally database-qualified ("ops.leases"); default
	// "leasecron_leases".
	Table string
	// Timeout bounds each request to the database; default 2s. It must be
	// less than a tenth of Lease.TTL.
	Timeout time.Duration
	// PasswordFile names a file holding the password, used when the DSN
	// has none (a relative path is read from the config file's
	// directory). Validate reads it.
	PasswordFile string

	password *secret // read from PasswordFile by Validate
}

// rawMySQL is the mysql section as yaml.v3 decodes it.
type rawMySQL struct {
	DSN          text     `yaml:"dsn"`
	Table        text     `yaml:"table"`
	Timeout      duration `yaml:"timeout"`
	PasswordFile text     `yaml:"password_file"`
}

// ConnString returns the DSN to open, with the password read from
// PasswordFile filled in when the DSN has none. The result carries a
// secret: hand it to the driver, never log or print it (log
// mysql.Redact of it).
func (m *MySQLConfig) ConnString() string {
	if m.password == nil {
		return m.DSN
	}
	dsn, err := mysql.WithPassword(m.DSN, m.password.s)
	if err != nil {
		return m.DSN
	}
	return dsn
}

// NewMySQL returns a mysql section of dsn with the documented defaults:
// Table "leasecron_leases", Timeout 2s.
func NewMySQL(dsn string) *MySQLConfig {
	return &MySQLConfig{DSN: dsn, Table: defaultMySQLTable, Timeout: defaultMySQLTimeout}
}

// Name returns "mysql".
func (m *MySQLConfig) Name() string { return "mysql" }

// RequestTimeout returns Timeout, the per-request timeout.
func (m *MySQLConfig) RequestTimeout() time.Duration { return m.Timeout }

// Equal reports whether o is a mysql section with the same DSN (and
// password), table and timeout.
func (m *MySQLConfig) Equal(o Section) bool {
	x, ok := o.(*MySQLConfig)
	return ok && m.ConnString() == x.ConnString() && m.Table == x.Table && m.Timeout == x.Timeout
}

// Summary names the database, without its password: "mysql DSN".
func (m *MySQLConfig) Summary(LeaseConfig) string { return "mysql " + mysql.Redact(m.DSN) }

// Open connects to the database (with the password of PasswordFile) and
// creates the lease tables if they are missing.
func (m *MySQLConfig) Open(ctx context.Context, o OpenOptions) (lease.Backend, error) {
	octx, cancel := context.WithTimeout(ctx, openTimeout(m.Timeout, o))
	defer cancel()
	be, err := mysql.Open(octx, mysql.Config{DSN: m.ConnString(), Table: m.Table,
		Timeout: max(m.Timeout, o.MinTimeout), Drift: driverDrift(o.Lease.Drift)})
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	return be, nil
}

// section builds the mysql section from the file.
func (r *rawMySQL) section(d *decoder) Section {
	dst := NewMySQL("")
	if d.take("mysql.dsn", r.DSN.leaf) {
		dst.DSN = r.DSN.v
	}
	if d.take("mysql.table", r.Table.leaf) {
		dst.Table = r.Table.v
	}
	if d.take("mysql.timeout", r.Timeout.leaf) {
		dst.Timeout = r.Timeout.v
	}
	if d.take("mysql.password_file", r.PasswordFile.leaf) {
		dst.PasswordFile = r.PasswordFile.v
	}
	return dst
}

// checkMySQLTable says what is wrong with a mysql table name, or "".
func checkMySQLTable(table string) string {
	if table == "" {
		return "empty table name"
	}
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return fmt.Sprintf("table %q: at most one dot, as in database.table", table)
	}
	for i, p := range parts {
		limit := 64
		if i == len(parts)-1 {
			limit = 56 // room for the _entries suffix
		}
		switch {
		case len(p) > limit:
			return fmt.Sprintf("table %q: %.20q... is longer than %d bytes", table, p, limit)
		case !sqlIdent.MatchString(p):
			return fmt.Sprintf("table %q: %q is not a plain SQL identifier: lower-case letters, digits and _, not starting with a digit", table, p)
		}
	}
	return ""
}

// mysql checks the mysql section: a DSN that mysql.CheckDSN accepts
// (parsed, never connected to), a valid table name, a password_file that
// can be read.
func (m *MySQLConfig) check(v *validator) {
	switch {
	case strings.TrimSpace(m.DSN) == "":
		v.errorf("mysql.dsn", 0, "missing dsn (such as leasecron@tcp(db1:3306)/ops?tls=true)")
	default:
		if err := mysql.CheckDSN(m.DSN); err != nil {
			v.errorf("mysql.dsn", 0, "%v", err)
		} else if w := tlsWarning(m.DSN); w != "" {
			v.warnf("mysql.dsn", 0, "%s", w)
		}
	}
	if msg := checkMySQLTable(m.Table); msg != "" {
		v.errorf("mysql.table", 0, "%s", msg)
	}
	m.password = v.passwordFile("mysql.password_file", m.PasswordFile)
	if m.password != nil && !v.failed("mysql.dsn") {
		if _, err := mysql.WithPassword(m.DSN, "x"); err != nil {
			v.warnf("mysql.password_file", 0, "not used: %v", err)
		}
	}
}

// tlsWarning warns of a DSN to a remote server without verified TLS.
func tlsWarning(dsn string) string {
	tail := dsn[strings.LastIndex(dsn, "@")+1:]
	addr, query, _ := strings.Cut(tail, "?")
	if !strings.HasPrefix(addr, "tcp") {
		return ""
	}
	host := addr
	if i, j := strings.Index(addr, "("), strings.Index(addr, ")"); i >= 0 && j > i {
		host = addr[i+1 : j]
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return ""
	}
	for kv := range strings.SplitSeq(query, "&") {
		if k, val, _ := strings.Cut(kv, "="); k == "tls" && val != "false" && val != "preferred" && val != "skip-verify" {
			return ""
		}
	}
	return fmt.Sprintf("%s: no verified TLS to %s: add tls=true", mysql.Redact(dsn), host)
}
