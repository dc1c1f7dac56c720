package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasecron/leasecron/lease/internal/sqllease"
)

var (
	//go:embed schema.sql
	schemaSQL string
	//go:embed check.sql
	checkSQL string
	//go:embed acquire.sql
	acquireSQL string
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
	schema, check, acquire, extend, release, complete, note, inspect string
}

// takeoverRule is the condition under which acquire.sql takes a held row
// over: the row still carries the version this client has seen unchanged
// for the holder's TTL ($6, $7 of the key's request). The subquery is
// uncorrelated, so the server hashes it once per statement (a correlated
// one would scan the batch for every conflicting row: quadratic).
const takeoverRule = "(l.key, l.token, l.xmin::text) IN (SELECT key, seen_token, seen_xmin FROM req WHERE seen_token <> '')"

// wallClockRule is the takeover rule of the server's wall clock, which a
// step of that clock breaks: the negative control's.
const wallClockRule = "l.expires_at <= clock_timestamp()"

func newStatements(table string, unlogged, wallClockTakeover bool) statements {
	r := strings.NewReplacer("{{table}}", table)
	logged := ""
	if unlogged {
		logged = "UNLOGGED"
	}
	rule := takeoverRule
	if wallClockTakeover {
		rule = wallClockRule
	}
	return statements{
		schema:   strings.NewReplacer("{{table}}", table, "{{logged}}", logged).Replace(schemaSQL),
		check:    r.Replace(checkSQL),
		acquire:  strings.NewReplacer("{{table}}", table, "{{takeover}}", rule).Replace(acquireSQL),
		extend:   r.Replace(extendSQL),
		release:  r.Replace(releaseSQL),
		complete: r.Replace(completeSQL),
		note:     r.Replace(noteSQL),
		inspect:  r.Replace(inspectSQL),
	}
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseTable checks a Config.Table name and returns it quoted
// ("schema"."name" or "name").
func parseTable(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("postgres backend: table %q: want NAME or SCHEMA.NAME", name)
	}
	for _, p := range parts {
		if !identRE.MatchString(p) || len(p) > 63 {
			return "", fmt.Errorf("postgres backend: table %q: %q is not a valid name (letters, digits and _, not starting with a digit, at most 63 bytes)", name, p)
		}
	}
	return pgx.Identifier(parts).Sanitize(), nil
}

// ensureTable creates the lease table if missing and checks that it has
// the expected columns and that the role may read and write it.
func (b *Backend) ensureTable(ctx context.Context) error {
	return b.tableReady.Do(func() error {
		err := b.do(ctx, func(ctx context.Context, c *pgx.Conn) error {
			found, err := b.checkTable(ctx, c)
			if err != nil || found {
				return err
			}
			// CREATE TABLE IF NOT EXISTS checks the CREATE privilege on the
			// schema even when the table exists, hence the check first.
			if _, err := c.Exec(ctx, b.sql.schema); err != nil {
				if err := b.createFailed(err, c.Config().User); err != nil {
					return err
				}
			}
			found, err = b.checkTable(ctx, c)
			if err == nil && !found {
				err = fmt.Errorf("table %s not found after CREATE TABLE (is the schema in the role's search_path?)", b.table)
			}
			return err
		})
		if err != nil {
			return b.core.NodeErr(err)
		}
		return nil
	})
}

// createFailed is the error of a failed CREATE TABLE of the lease table
// by user: nil when another client created it at the same moment.
func (b *Backend) createFailed(err error, user string) error {
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "42501": // insufficient_privilege
		return sqllease.Permanentf("table %s does not exist and role %q may not create it (%s): grant it CREATE on the schema, or create the table as another role with the DDL in lease/postgres/schema.sql and grant this role SELECT, INSERT, UPDATE on it",
			b.table, user, pe.Message)
	case errors.As(err, &pe) && pe.Code == "3F000": // invalid_schema_name
		return sqllease.Permanentf("table %s: %s", b.table, pe.Message)
	case createdMeanwhile(err):
		return nil
	default:
		return fmt.Errorf("creating table %s: %w", b.table, err)
	}
}

// createdMeanwhile reports whether err, from a CREATE TABLE IF NOT
// EXISTS, says another client created the same table at the same moment:
// IF NOT EXISTS is not atomic in PostgreSQL, and the loser of the race
// gets duplicate_table, or duplicate_object or unique_violation for the
// table's row type.
func createdMeanwhile(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P07" || pe.Code == "42710" || pe.Code == "23505")
}

// checkTable reports whether the table exists, and fails (permanently)
// when it lacks columns or privileges.
func (b *Backend) checkTable(ctx context.Context, c *pgx.Conn) (bool, error) {
	var cols, privs *string
	err := c.QueryRow(ctx, b.sql.check, b.table).Scan(&cols, &privs)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking table %s: %w", b.table, err)
	}
	if cols != nil {
		return true, sqllease.Permanentf("table %s exists but is not a leasecron lease table: no column %s", b.table, *cols)
	}
	if privs != nil {
		return true, sqllease.Permanentf("role %q lacks the %s privilege on table %s (grant it: GRANT SELECT, INSERT, UPDATE ON %s TO ...)", c.Config().User, *privs, b.table, b.table)
	}
	return true, nil
}
