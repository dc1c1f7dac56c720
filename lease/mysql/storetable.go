package mysql

import (
	"context"
	_ "embed"
	"strings"
)

var (
	//go:embed store_schema.sql
	storeSchemaSQL string
	//go:embed put.sql
	putSQL string
	//go:embed sweep.sql
	sweepSQL string
	//go:embed get.sql
	getSQL string
	//go:embed list.sql
	listSQL string
	//go:embed lists.sql
	listsSQL string
	//go:embed append.sql
	appendSQL string
	//go:embed trim.sql
	trimSQL string
	//go:embed log.sql
	logSQL string
)

// Suffixes of the names of the tables (and indexes) of entries and logs,
// appended to the lease table's name.
const (
	entriesSuffix = "_entries"
	logSuffix     = "_log"
)

// storeStatements are the SQL texts of Entries and Logs with the tables'
// names filled in.
type storeStatements struct {
	db, entriesName, logName string
	entries, log             string // quoted table names
	entriesDDL, logDDL       string
	put, sweep, get, list    string
	lists                    string // lists.sql, {{spaces}} left for the placeholders
	appendRec, trim, trail   string // trail: log.sql
}

var (
	entriesColumns = []string{"space", "name", "version", "data", "ttl_us", "expires_at", "wtoken"}
	logColumns     = []string{"log", "id", "at_ms", "data"}
)

func newStoreStatements(db, table string) storeStatements {
	en, ln := table+entriesSuffix, table+logSuffix
	entries, log := quote(db, en), quote(db, ln)
	r := strings.NewReplacer("{{entries}}", entries, "{{log}}", log,
		"{{entries_expiry}}", "`expiry`", "{{log_at}}", "`newest`")
	ddl := strings.Split(r.Replace(body(storeSchemaSQL)), ";\nCREATE")
	return storeStatements{
		db: db, entriesName: en, logName: ln,
		entries: entries, log: log,
		entriesDDL: ddl[0], logDDL: "CREATE" + ddl[1],
		put:       r.Replace(body(putSQL)),
		sweep:     r.Replace(body(sweepSQL)),
		get:       r.Replace(body(getSQL)),
		list:      r.Replace(body(listSQL)),
		lists:     r.Replace(body(listsSQL)),
		appendRec: r.Replace(body(appendSQL)),
		trim:      r.Replace(body(trimSQL)),
		trail:     r.Replace(body(logSQL)),
	}
}

// ensureStore creates the tables of entries and logs if either is missing
// and checks their columns. Concurrent creators (daemons starting at once)
// are fine: CREATE TABLE IF NOT EXISTS. A missing privilege is a permanent
// error naming the table and the user.
func (b *Backend) ensureStore(ctx context.Context) error {
	return b.storeReady.Do(func() error {
		s := b.store
		if err := b.ensure(ctx, s.db, s.entriesName, s.entries, entriesColumns, s.entriesDDL); err != nil {
			return err
		}
		return b.ensure(ctx, s.db, s.logName, s.log, logColumns, s.logDDL)
	})
}
