package config

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/postgres"
)

// PostgresConfig is the "postgres" section: leases are rows of one table
// in a PostgreSQL database.
type PostgresConfig struct {
	// URL is the database, as written in the file:
	// postgres://user[:password]@host[:port][,host2[:port]]/dbname?sslmode=verify-full
	// (see postgres.CheckURL for the options allowed). Open the database
	// with ConnString, which adds the password of PasswordFile.
	URL string
	// Table is the lease table, created if missing: a lower-case SQL
	// identifier, optionally schema-qualified ("ops.leases"); default
	// "leasecron_leases".
	Table string
	// Timeout bounds each request to the database; default 2s. It must be
	// less than a tenth of Lease.TTL.
	Timeout time.Duration
	// PasswordFile names a file holding the password, used when the URL
	// has none (a relative path is read from the config file's
	// directory). Validate reads it.
	PasswordFile string

	password *secret // read from PasswordFile by Validate
}

// rawPostgres is the postgres section as yaml.v3 decodes it.
type rawPostgres struct {
	URL          text     `yaml:"url"`
	Table        text     `yaml:"table"`
	Timeout      duration `yaml:"timeout"`
	PasswordFile text     `yaml:"password_file"`
}

// ConnString returns the URL to open, with the password read from
// PasswordFile filled in when the URL has none. The result carries a
// secret: hand it to pgx, never log or print it (log URL, or
// postgres.Redact of it).
func (p *PostgresConfig) ConnString() string {
	if p.password == nil {
		return p.URL
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return p.URL
	}
	user, has := "", false
	if u.User != nil {
		user = u.User.Username()
		_, has = u.User.Password()
	}
	if has {
		return p.URL
	}
	u.User = url.UserPassword(user, p.password.s)
	return u.String()
}

// TableName returns the schema ("" for the search path's) and the name of
// Table, for pgx.Identifier.
func (p *PostgresConfig) TableName() (schema, table string) {
	if s, t, ok := strings.Cut(p.Table, "."); ok {
		return s, t
	}
	return "", p.Table
}

// NewPostgres returns a postgres section of url with the documented
// defaults: Table "leasecron_leases", Timeout 2s.
func NewPostgres(url string) *PostgresConfig {
	return &PostgresConfig{URL: url, Table: defaultPostgresTable, Timeout: defaultPostgresTimeout}
}

// Name returns "postgres".
func (p *PostgresConfig) Name() string { return "postgres" }

// RequestTimeout returns Timeout, the per-request timeout.
func (p *PostgresConfig) RequestTimeout() time.Duration { return p.Timeout }

// Equal reports whether o is a postgres section with the same URL (and
// password), table and timeout.
func (p *PostgresConfig) Equal(o Section) bool {
	x, ok := o.(*PostgresConfig)
	return ok && p.ConnString() == x.ConnString() && p.Table == x.Table && p.Timeout == x.Timeout
}

// Summary names the database, without its password: "postgres URL".
func (p *PostgresConfig) Summary(LeaseConfig) string { return "postgres " + postgres.Redact(p.URL) }

// Open connects to the database (with the password of PasswordFile) and
// creates the lease table if it is missing.
func (p *PostgresConfig) Open(ctx context.Context, o OpenOptions) (lease.Backend, error) {
	schema, table := p.TableName()
	if schema != "" {
		table = schema + "." + table
	}
	octx, cancel := context.WithTimeout(ctx, openTimeout(p.Timeout, o))
	defer cancel()
	be, err := postgres.Open(octx, postgres.Config{URL: p.ConnString(), Table: table,
		Timeout: max(p.Timeout, o.MinTimeout), Drift: driverDrift(o.Lease.Drift)})
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return be, nil
}

// section builds the postgres section from the file.
func (r *rawPostgres) section(d *decoder) Section {
	dst := NewPostgres("")
	if d.take("postgres.url", r.URL.leaf) {
		dst.URL = r.URL.v
	}
	if d.take("postgres.table", r.Table.leaf) {
		dst.Table = r.Table.v
	}
	if d.take("postgres.timeout", r.Timeout.leaf) {
		dst.Timeout = r.Timeout.v
	}
	if d.take("postgres.password_file", r.PasswordFile.leaf) {
		dst.PasswordFile = r.PasswordFile.v
	}
	return dst
}

// sqlIdent is a lower-case, unquoted SQL identifier.
var sqlIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// checkTable says what is wrong with a table name, or "".
func checkTable(table string) string {
	if table == "" {
		return "empty table name"
	}
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return fmt.Sprintf("table %q: at most one dot, as in schema.table", table)
	}
	for _, p := range parts {
		switch {
		case len(p) > 63:
			return fmt.Sprintf("table %q: %.20q... is longer than 63 bytes (PostgreSQL's limit)", table, p)
		case !sqlIdent.MatchString(p):
			return fmt.Sprintf("table %q: %q is not a plain SQL identifier: lower-case letters, digits and _, not starting with a digit (PostgreSQL folds unquoted names to lower case)", table, p)
		}
	}
	return ""
}

// postgres checks the postgres section: a URL that postgres.CheckURL
// accepts, a valid table name, a password_file that can be read.
func (p *PostgresConfig) check(v *validator) {
	switch {
	case strings.TrimSpace(p.URL) == "":
		v.errorf("postgres.url", 0, "missing url (such as postgres://leasecron@db1:5432/ops?sslmode=verify-full)")
	default:
		if err := postgres.CheckURL(p.URL); err != nil {
			v.errorf("postgres.url", 0, "%s: %v", postgres.Redact(p.URL), err)
		} else if w := sslWarning(p.URL); w != "" {
			v.warnf("postgres.url", 0, "%s", w)
		}
	}
	if msg := checkTable(p.Table); msg != "" {
		v.errorf("postgres.table", 0, "%s", msg)
	}
	p.password = v.passwordFile("postgres.password_file", p.PasswordFile)
	if p.password != nil {
		if u, err := url.Parse(p.URL); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				v.warnf("postgres.password_file", 0, "not used: the URL has its own password")
			}
		}
	}
}

// sslWarning warns of a URL to a remote server that does not verify the
// server's certificate.
func sslWarning(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	mode := u.Query().Get("sslmode")
	if mode == "verify-full" || mode == "verify-ca" {
		return ""
	}
	for _, hp := range strings.Split(u.Host, ",") {
		host := hp
		if h, _, err := net.SplitHostPort(hp); err == nil {
			host = h
		}
		host = strings.Trim(host, "[]")
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			if mode == "" {
				mode = "prefer (the default)"
			}
			return fmt.Sprintf("sslmode=%s does not verify the server %s: use sslmode=verify-full", mode, host)
		}
	}
	return ""
}
