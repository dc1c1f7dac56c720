package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasecron/leasecron/lease/internal/sqllease"
)

var (
	//go:embed store_schema.sql
	storeSchemaSQL string
	//go:embed store_check.sql
	storeCheckSQL string
	//go:embed put.sql
	putSQL string
	//go:embed get.sql
	getSQL string
	//go:embed list.sql
	listSQL string
	//go:embed lists.sql
	listsSQL string
	//go:embed append.sql
	appendSQL string
	//go:embed log.sql
	logSQL string
)

// Suffixes of the names of the tables (and indexes) of entries and logs,
// appended to the lease table's name.
const (
	entriesSuffix = "_entries"
	expirySuffix  = "_entries_expiry"
	logSuffix     = "_log"
	logAtSuffix   = "_log_at"
)

// maxIdent is PostgreSQL's longest identifier (NAMEDATALEN - 1): a longer
// name is cut silently by the server, which could make two derived names
// equal.
const maxIdent = 63

// storeStatements are the SQL texts of Entries and Logs with the tables'
// names filled in.
type storeStatements struct {
	entries, log                     string // quoted table names
	schema, check                    string
	put, get, list, appendRec, trail string // trail: log.sql
	lists                            string // lists.sql
}

var (
	entriesColumns = []string{"space", "name", "version", "data", "ttl_us", "expires_at"}
	logColumns     = []string{"log", "id", "at", "data"}
	storePrivs     = []string{"SELECT", "INSERT", "UPDATE", "DELETE"}
)

// siblingName returns the name of the table or index named after the
// lease table table (NAME or SCHEMA.NAME, as Config.Table was checked) with
// suffix: qualified is quoted and in the lease table's schema, bare is the
// quoted last part alone (an index's name). NAME is cut so that NAME +
// suffix fits in maxIdent bytes (NAME is ASCII).
func siblingName(table, suffix string) (qualified, bare string) {
	parts := strings.Split(table, ".")
	last := parts[len(parts)-1]
	if len(last)+len(suffix) > maxIdent {
		last = last[:maxIdent-len(suffix)]
	}
	parts[len(parts)-1] = last + suffix
	return pgx.Identifier(parts).Sanitize(), pgx.Identifier{last + suffix}.Sanitize()
}

func newStoreStatements(o options) storeStatements {
	table := o.Table
	entries, _ := siblingName(table, entriesSuffix)
	log, _ := siblingName(table, logSuffix)
	_, expiry := siblingName(table, expirySuffix)
	_, logAt := siblingName(table, logAtSuffix)
	logged := ""
	if o.test.unlogged {
		logged = "UNLOGGED"
	}
	put := putSQL
	if o.test.noSkipLocked {
		put = strings.Replace(put, "FOR UPDATE SKIP LOCKED", "FOR UPDATE", 1)
	}
	r := strings.NewReplacer("{{entries}}", entries, "{{log}}", log,
		"{{entries_expiry}}", expiry, "{{log_at}}", logAt, "{{logged}}", logged)
	return storeStatements{
		entries:   entries,
		log:       log,
		schema:    r.Replace(storeSchemaSQL),
		check:     storeCheckSQL,
		put:       r.Replace(put),
		get:       r.Replace(getSQL),
		list:      r.Replace(listSQL),
		lists:     r.Replace(listsSQL),
		appendRec: r.Replace(appendSQL),
		trail:     r.Replace(logSQL),
	}
}

// ensureStore creates the tables of entries and logs if either is missing
// (store_schema.sql, one transaction), and checks their columns and the
// role's privileges, on c. Concurrent creators (daemons starting at once)
// are fine: the loser's CREATE fails with a duplicate, and the check that
// follows finds the winner's tables. A missing privilege is a permanent
// error naming the tables and the role.
func (b *Backend) ensureStore(ctx context.Context, c *pgx.Conn) error {
	return b.storeReady.Do(func() error {
		found, err := b.checkStoreTables(ctx, c)
		if err != nil || found {
			return err
		}
		// CREATE TABLE IF NOT EXISTS checks the CREATE privilege on the
		// schema even when the table exists, hence the check first.
		if _, err := c.Exec(ctx, b.store.schema); err != nil {
			if err := b.storeCreateFailed(err, c.Config().User); err != nil {
				return err
			}
		}
		found, err = b.checkStoreTables(ctx, c)
		if err == nil && !found {
			err = fmt.Errorf("tables %s and %s not found after CREATE TABLE (is the schema in the role's search_path?)", b.store.entries, b.store.log)
		}
		return err
	})
}

// storeCreateFailed is the error of a failed CREATE TABLE of the tables of
// entries and logs by user: nil when another client created them at the
// same moment.
func (b *Backend) storeCreateFailed(err error, user string) error {
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "42501": // insufficient_privilege
		return sqllease.Permanentf("tables %s and %s (entries and logs) do not both exist and role %q may not create them (%s): grant it CREATE on the schema, or create them as another role with the DDL in lease/postgres/store_schema.sql and grant this role SELECT, INSERT, UPDATE, DELETE on them",
			b.store.entries, b.store.log, user, pe.Message)
	case errors.As(err, &pe) && pe.Code == "3F000": // invalid_schema_name
		return sqllease.Permanentf("tables %s and %s: %s", b.store.entries, b.store.log, pe.Message)
	case createdMeanwhile(err):
		return nil
	default:
		return fmt.Errorf("creating tables %s and %s: %w", b.store.entries, b.store.log, err)
	}
}

// checkStoreTables reports whether both tables exist, and fails
// (permanently) when one lacks columns or privileges.
func (b *Backend) checkStoreTables(ctx context.Context, c *pgx.Conn) (bool, error) {
	both := true
	for _, t := range []struct {
		name string
		cols []string
	}{{b.store.entries, entriesColumns}, {b.store.log, logColumns}} {
		var cols, privs *string
		err := c.QueryRow(ctx, b.store.check, t.name, t.cols, storePrivs).Scan(&cols, &privs)
		if errors.Is(err, pgx.ErrNoRows) {
			both = false
			continue
		}
		if err != nil {
			return false, fmt.Errorf("checking table %s: %w", t.name, err)
		}
		if cols != nil {
			return true, sqllease.Permanentf("table %s exists but is not a leasecron table: no column %s", t.name, *cols)
		}
		if privs != nil {
			return true, sqllease.Permanentf("role %q lacks the %s privilege on table %s (grant it: GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO ...)", c.Config().User, *privs, t.name, t.name)
		}
	}
	return both, nil
}
