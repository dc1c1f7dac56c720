package mysql

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"strings"

	driver "github.com/go-sql-driver/mysql"

	"github.com/leasecron/leasecron/lease/internal/sqllease"
)

var (
	//go:embed schema.sql
	schemaSQL string
	//go:embed check.sql
	checkSQL string
	//go:embed acquire.sql
	acquireSQL string
	//go:embed rows.sql
	rowsSQL string
	//go:embed extend.sql
	extendSQL string
	//go:embed release.sql
	releaseSQL string
	//go:embed complete.sql
	completeSQL string
	//go:embed note.sql
	noteSQL string
	//go:embed inspect.sql
	inspectSQL string
)

// statements are the SQL texts with the table name filled in.
type statements struct {
	schema, acquire, rows, extend, release, complete, note, inspect string
}

// takeoverRule is the condition under which acquire.sql takes a held row
// over: the row still carries the token and version this client has seen
// unchanged for the holder's TTL on its own monotonic clock (the claim
// sent with the key's request; see observations). The server's clock plays
// no part in it, so a server clock that steps forward cannot shorten a
// lease.
const takeoverRule = "CONCAT(token, '/', version) = VALUES(claim)"

// wallClockRule is the takeover rule of the server's wall clock, which a
// step of that clock breaks: the negative control's.
const wallClockRule = "expires_at <= UTC_TIMESTAMP(6)"

// body returns a .sql file's text without its comment lines (they name
// the placeholders, which must be replaced in the statement only).
func body(text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
		}
	}
	return strings.TrimSpace(b.String())
}

func newStatements(table string, o options) statements {
	rule := takeoverRule
	if o.test.wallClockTakeover {
		rule = wallClockRule
	}
	r := strings.NewReplacer("{{table}}", table, "{{takeover}}", rule)
	f := func(text string) string { return r.Replace(body(text)) }
	return statements{
		schema:   f(schemaSQL),
		acquire:  f(acquireSQL),
		rows:     f(rowsSQL),
		extend:   f(extendSQL),
		release:  f(releaseSQL),
		complete: f(completeSQL),
		note:     f(noteSQL),
		inspect:  f(inspectSQL),
	}
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// maxTableName leaves room for the longest suffix ("_entries") within
// MySQL's 64-byte identifiers.
const maxTableName = 64 - len(entriesSuffix)

// parseTable checks a Config.Table name and returns its database ("" for the
// DSN's) and name.
func parseTable(name string) (db, table string, err error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", "", fmt.Errorf("mysql backend: table %q: want NAME or DATABASE.NAME", name)
	}
	for i, p := range parts {
		limit := 64
		if i == len(parts)-1 {
			limit = maxTableName
		}
		if !identRE.MatchString(p) || len(p) > limit {
			return "", "", fmt.Errorf("mysql backend: table %q: %q is not a valid name (letters, digits and _, not starting with a digit, at most %d bytes)", name, p, limit)
		}
	}
	if len(parts) == 2 {
		return parts[0], parts[1], nil
	}
	return "", parts[0], nil
}

// quote returns db.name quoted with backquotes (name alone if db is "").
func quote(db, name string) string {
	if db == "" {
		return "`" + name + "`"
	}
	return "`" + db + "`.`" + name + "`"
}

// Server error numbers the backend tells apart.
const (
	erTableAccessDenied = 1142 // CREATE command denied
	erDBAccessDenied    = 1044
	erAccessDenied      = 1045
	erBadDB             = 1049
	erTableExists       = 1050
	erLockWaitTimeout   = 1205
	erDeadlock          = 1213
	erServerShutdown    = 1053
	erConnectionKilled  = 1927
	erQueryInterrupted  = 1317
	erReadOnly          = 1290 // --read-only: a demoted primary
)

// ensureTable creates the lease table if missing and checks that it has
// the expected columns.
func (b *Backend) ensureTable(ctx context.Context) error {
	return b.tableReady.Do(func() error {
		err := b.do(ctx, func(ctx context.Context) error {
			if err := b.checkSQLMode(ctx); err != nil {
				return err
			}
			return b.ensure(ctx, b.dbName, b.name, b.table, leaseColumns, b.sql.schema)
		})
		if err != nil {
			return b.core.NodeErr(err)
		}
		return nil
	})
}

// checkSQLMode refuses a server whose sql_mode makes the assignments of
// an UPDATE or ON DUPLICATE KEY UPDATE see the old values of the columns
// (MariaDB's SIMULTANEOUS_ASSIGNMENT): the statements rely on the
// assignments running left to right, the first one deciding.
func (b *Backend) checkSQLMode(ctx context.Context) error {
	var mode string
	if err := b.db.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
		return fmt.Errorf("reading sql_mode: %w", err)
	}
	if strings.Contains(strings.ToUpper(mode), "SIMULTANEOUS_ASSIGNMENT") {
		return sqllease.Permanentf("sql_mode %s has SIMULTANEOUS_ASSIGNMENT, which the lease statements cannot work with (they rely on ON DUPLICATE KEY UPDATE assigning left to right): remove it from the server's sql_mode", mode)
	}
	return nil
}

var leaseColumns = []string{"k", "token", "owner", "epoch", "ttl_us", "expires_at", "fence", "version",
	"claim", "done_epoch", "note", "note_version"}

// ensure creates the table quoted (db, name) with ddl if it is missing,
// and checks its columns.
func (b *Backend) ensure(ctx context.Context, db, name, quoted string, cols []string, ddl string) error {
	found, err := b.checkTable(ctx, db, name, quoted, cols)
	if err != nil || found {
		return err
	}
	if _, err := b.db.ExecContext(ctx, ddl); err != nil {
		var me *driver.MySQLError
		switch {
		case errors.As(err, &me) && (me.Number == erTableAccessDenied || me.Number == erDBAccessDenied):
			return sqllease.Permanentf("table %s does not exist and user %q may not create it (%s): grant it CREATE, or create the table as another user with the DDL in lease/mysql/ and grant this user SELECT, INSERT, UPDATE, DELETE on it",
				quoted, b.user, me.Message)
		case errors.As(err, &me) && me.Number == erBadDB:
			return sqllease.Permanentf("table %s: %s", quoted, me.Message)
		case errors.As(err, &me) && me.Number == erTableExists:
		default:
			return fmt.Errorf("creating table %s: %w", quoted, err)
		}
	}
	found, err = b.checkTable(ctx, db, name, quoted, cols)
	if err == nil && !found {
		err = fmt.Errorf("table %s not found after CREATE TABLE", quoted)
	}
	return err
}

// checkTable reports whether the table exists, and fails (permanently)
// when it lacks columns.
func (b *Backend) checkTable(ctx context.Context, db, name, quoted string, want []string) (bool, error) {
	var dbArg any
	if db != "" {
		dbArg = db
	}
	rows, err := b.db.QueryContext(ctx, body(checkSQL), dbArg, name)
	if err != nil {
		return false, fmt.Errorf("checking table %s: %w", quoted, err)
	}
	have := map[string]bool{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			_ = rows.Close()
			return false, fmt.Errorf("checking table %s: %w", quoted, err)
		}
		have[strings.ToLower(c)] = true
	}
	if err := rows.Close(); err != nil {
		return false, fmt.Errorf("checking table %s: %w", quoted, err)
	}
	if len(have) == 0 {
		return false, nil
	}
	var missing []string
	for _, c := range want {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return true, sqllease.Permanentf("table %s exists but is not a leasecron table: no column %s", quoted, strings.Join(missing, ", "))
	}
	return true, nil
}

// queryer is what the statements run on.
type queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}
