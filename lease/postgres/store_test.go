package postgres_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/postgres"
)

// storeRoundTrip puts an entry and appends a record with b, and reads
// both back, failing the test on any error or difference.
func storeRoundTrip(t *testing.T, b *postgres.Backend, name string) {
	t.Helper()
	if err := roundTrip(t, b, name); err != nil {
		t.Fatal(err)
	}
}

// roundTrip is storeRoundTrip returning the error, for goroutines.
func roundTrip(t *testing.T, b *postgres.Backend, name string) error {
	ctx := ctxT(t)
	if err := b.Put(ctx, "hosts", lease.Entry{Name: name, Version: 1, Data: []byte(name), TTL: time.Minute}); err != nil {
		return fmt.Errorf("Put(%s): %w", name, err)
	}
	if e, ok, err := b.Get(ctx, "hosts", name); err != nil || !ok || string(e.Data) != name || e.TTL != time.Minute {
		return fmt.Errorf("Get(%s) = %+v, %v, %v", name, e, ok, err)
	}
	if err := b.Append(ctx, "job", lease.Record{ID: name, At: time.Now(), Data: []byte(name)}, 50); err != nil {
		return fmt.Errorf("Append(%s): %w", name, err)
	}
	if l, err := b.Log(ctx, "job", 50); err != nil || len(l) == 0 {
		return fmt.Errorf("Log: %v, %v", l, err)
	}
	return nil
}

// relations returns the tables and indexes of schema public whose name
// starts with prefix, with their persistence ('p' LOGGED, 'u' UNLOGGED).
func relations(s *pgtest.Server, prefix string) string {
	var got string
	s.QueryRow(`SELECT coalesce(string_agg(relname || ':' || relkind::text || relpersistence::text, ' ' ORDER BY relname COLLATE "C"), '')
	            FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relname LIKE $1 || '%'
	            AND relkind IN ('r', 'i')`, []any{prefix}, &got)
	return got
}

// TestStoreTables: the tables of entries and logs are created LOGGED, with
// their indexes, by the first Put or Append, even by eight clients at
// once; they go to the lease table's schema; a lease table name of 63
// bytes still gets three distinct tables; a role that may not create them
// gets an error naming the tables, the role and the DDL, never the
// password, while its leases keep working, and succeeds once an admin has
// created them and granted it every privilege; a foreign table of that
// name is refused.
func TestStoreTables(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t)

	t.Run("ConcurrentCreation", func(t *testing.T) {
		clients := make([]*postgres.Backend, 8)
		for i := range clients {
			clients[i] = open(t, s.URL(), postgres.WithTable("fresh"), loadedTimeout)
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(clients))
		for i, b := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- roundTrip(t, b, fmt.Sprintf("host-%d", i))
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		want := "fresh:rp fresh_entries:rp fresh_entries_expiry:ip fresh_entries_pkey:ip fresh_log:rp fresh_log_at:ip fresh_log_pkey:ip fresh_pkey:ip"
		if got := relations(s, "fresh"); got != want {
			t.Errorf("relations:\n got %s\nwant %s", got, want)
		}
		l, err := clients[0].List(ctxT(t), "hosts")
		if err != nil || len(l) != len(clients) {
			t.Errorf("List after %d concurrent first Puts: %d entries, %v", len(clients), len(l), err)
		}
	})

	t.Run("LongTableName", func(t *testing.T) {
		name := strings.Repeat("l", 63)
		b := open(t, s.URL(), postgres.WithTable(name), loadedTimeout)
		if _, err := try(t, b, lease.Request{Key: "k", TTL: time.Second}); err != nil {
			t.Fatal(err)
		}
		storeRoundTrip(t, b, "h")
		// Bytewise order: '_' sorts before 'l'.
		want := name[:48] + "_entries_expiry:ip " + name[:55] + "_entries:rp " +
			name[:56] + "_log_at:ip " + name[:59] + "_log:rp " + name + ":rp"
		var got string
		s.QueryRow(`SELECT string_agg(relname || ':' || relkind::text || relpersistence::text, ' ' ORDER BY relname COLLATE "C")
		            FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relname LIKE 'lll%'
		            AND relname NOT LIKE '%pkey%'`, nil, &got)
		if got != want {
			t.Errorf("relations:\n got %s\nwant %s", got, want)
		}
	})

	t.Run("SchemaQualified", func(t *testing.T) {
		s.Exec("CREATE SCHEMA ops AUTHORIZATION " + pgtest.User)
		storeRoundTrip(t, open(t, s.URL(), postgres.WithTable("ops.leases"), loadedTimeout), "h")
		var got string
		s.QueryRow(`SELECT string_agg(relname, ' ' ORDER BY relname) FROM pg_class
		            WHERE relnamespace = 'ops'::regnamespace AND relname NOT LIKE '%pkey'`, nil, &got)
		if want := "leases leases_entries leases_entries_expiry leases_log leases_log_at"; got != want {
			t.Errorf("relations in schema ops: %s, want %s", got, want)
		}
	})

	t.Run("RoleMayNotCreate", func(t *testing.T) {
		const pw = "weak-st0re-pw"
		s.Exec("CREATE ROLE weakstore LOGIN PASSWORD '" + pw + "'")
		owner := open(t, s.URL(), postgres.WithTable("granted")) // creates the lease table only
		s.Exec("GRANT SELECT, INSERT, UPDATE ON granted TO weakstore")
		weak := open(t, s.URLFor("weakstore", pw), postgres.WithTable("granted"))
		if _, err := try(t, weak, lease.Request{Key: "k", TTL: time.Second}); err != nil {
			t.Fatalf("lease of a role without the store tables: %v", err)
		}
		err := weak.Put(ctxT(t), "pause", lease.Entry{Name: "job", Version: 1})
		var ne *lease.NodeError
		if !errors.As(err, &ne) || ne.Node != weak.Servers()[0] {
			t.Errorf("Put: %v, want a NodeError naming %s", err, weak.Servers()[0])
		}
		for _, w := range []string{`"granted_entries"`, `"granted_log"`, `role "weakstore" may not create them`, "store_schema.sql", "DELETE", s.Addr()} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Put error %v does not name %q", err, w)
			}
		}
		if err != nil && strings.Contains(err.Error(), pw) {
			t.Errorf("Put error %q contains the password", err)
		}
		if _, err := weak.Log(ctxT(t), "job", 5); err == nil {
			t.Errorf("Log without the tables succeeded")
		}
		storeRoundTrip(t, owner, "by-owner") // creates the tables
		s.Exec("GRANT SELECT, INSERT, UPDATE ON granted_entries, granted_log TO weakstore")
		err = weak.Put(ctxT(t), "pause", lease.Entry{Name: "job", Version: 1})
		if err == nil || !strings.Contains(err.Error(), `lacks the DELETE privilege on table "granted_entries"`) {
			t.Errorf("Put without DELETE: %v, want one naming the missing privilege", err)
		}
		s.Exec("GRANT DELETE ON granted_entries, granted_log TO weakstore")
		storeRoundTrip(t, weak, "by-weak") // the same client, once granted
	})

	t.Run("ForeignTable", func(t *testing.T) {
		s.Exec("CREATE TABLE foreign_entries (space text, name text)")
		b := open(t, s.URL(), postgres.WithTable("foreign"))
		_, _, err := b.Get(ctxT(t), "hosts", "h")
		if err == nil || !strings.Contains(err.Error(), `"foreign_entries" exists but is not a leasecron table: no column data, expires_at, ttl_us, version`) {
			t.Errorf("Get with a foreign entries table: %v", err)
		}
	})
}

// count returns the number of rows of table matching where (with args).
func count(s *pgtest.Server, table, where string, args ...any) int {
	var n int
	s.QueryRow("SELECT count(*) FROM "+table+" WHERE "+where, args, &n)
	return n
}

// TestStoreBounds: expired entries are deleted by the next Put in their
// space, up to 100 per Put, and only there (rows in the table, not just
// what Get shows); a log's rows are trimmed to the limit by every Append,
// and a smaller limit trims further; At is kept to the millisecond.
func TestStoreBounds(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t)
	b := open(t, s.URL(), loadedTimeout)
	ctx := ctxT(t)
	put := func(space, name string, ttl time.Duration) {
		t.Helper()
		if err := b.Put(ctx, space, lease.Entry{Name: name, Version: 1, TTL: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	// 150 + 3 entries that expire together, once all are stored.
	const ttl = 5 * time.Second
	start := time.Now()
	for i := range 150 {
		put("a", fmt.Sprintf("dead-%03d", i), ttl)
	}
	for i := range 3 {
		put("b", fmt.Sprintf("dead-%d", i), ttl)
	}
	put("a", "forever", 0)
	end := time.Now()
	if n := count(s, "leasecron_leases_entries", "true"); n != 154 {
		t.Fatalf("%d rows after 154 Puts in %s (TTL %s)", n, time.Since(start), ttl)
	}
	time.Sleep(time.Until(end.Add(ttl + 100*time.Millisecond)))
	if l, err := b.List(ctx, "a"); err != nil || len(l) != 1 {
		t.Fatalf("List(a) after expiry: %d entries, %v; want only the one without TTL", len(l), err)
	}
	if n := count(s, "leasecron_leases_entries", "true"); n != 154 {
		t.Fatalf("%d rows after expiry, before any Put; want 154 (reads delete nothing)", n)
	}
	put("a", "live-1", time.Minute)
	if n := count(s, "leasecron_leases_entries", "space = 'a'"); n != 52 {
		t.Errorf("a Put in space a with 150 expired: %d rows after, want 52 (100 expired deleted)", n)
	}
	put("a", "live-2", time.Minute)
	if n := count(s, "leasecron_leases_entries", "space = 'a'"); n != 3 {
		t.Errorf("after a second Put: %d rows in space a, want 3 (forever, live-1, live-2)", n)
	}
	if n := count(s, "leasecron_leases_entries", "space = 'b'"); n != 3 {
		t.Errorf("expired rows of space b: %d, want 3 (no Put there since)", n)
	}
	if _, ok, err := b.Get(ctx, "b", "dead-0"); err != nil || ok {
		t.Errorf("Get of an expired row still stored: found %v, %v", ok, err)
	}
	put("b", "dead-0", time.Minute) // an expired row of the same name is replaced
	if n := count(s, "leasecron_leases_entries", "space = 'b'"); n != 1 {
		t.Errorf("after a Put in space b: %d rows, want 1", n)
	}

	base := time.Date(2026, 11, 23, 12, 0, 0, 123456789, time.UTC)
	for i := range 60 {
		at := base.Add(time.Duration(i) * time.Second)
		if err := b.Append(ctx, "job", lease.Record{ID: fmt.Sprintf("r%02d", i), At: at, Data: []byte{byte(i)}}, 50); err != nil {
			t.Fatal(err)
		}
		if n := count(s, "leasecron_leases_log", "log = 'job'"); n != min(i+1, 50) {
			t.Fatalf("after %d Appends with limit 50: %d rows", i+1, n)
		}
	}
	if err := b.Append(ctx, "job", lease.Record{ID: "r60", At: base.Add(time.Hour)}, 10); err != nil {
		t.Fatal(err)
	}
	l, err := b.Log(ctx, "job", 50)
	if err != nil || len(l) != 10 || count(s, "leasecron_leases_log", "log = 'job'") != 10 {
		t.Fatalf("after an Append with limit 10: Log %d records, %v", len(l), err)
	}
	if want := base.Add(time.Hour).Truncate(time.Millisecond); !l[0].At.Equal(want) || l[0].Data == nil || len(l[0].Data) != 0 {
		t.Errorf("newest record: At %s Data %#v, want At %s (to the ms) and empty data", l[0].At, l[0].Data, want)
	}
	if !bytes.Equal(l[9].Data, []byte{51}) || l[9].ID != "r51" {
		t.Errorf("oldest kept: %s %v, want r51", l[9].ID, l[9].Data)
	}
}

// TestStoreExpiryOnDatabaseClock: Put, Get and List carry no client
// timestamp and compare expiry with clock_timestamp() only, as the lease
// statements do (see TestHostClocksDoNotMatter).
func TestStoreExpiryOnDatabaseClock(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t)
	tr := &argTracer{}
	b := open(t, s.URL(), postgres.WithTracer(tr), loadedTimeout)
	ctx := ctxT(t)
	if err := b.Put(ctx, "hosts", lease.Entry{Name: "h", Version: 1, TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	_, _, _ = b.Get(ctx, "hosts", "h")
	_, _ = b.List(ctx, "hosts")
	tr.mu.Lock()
	defer tr.mu.Unlock()
	timeType := reflect.TypeFor[time.Time]()
	for _, a := range tr.args {
		if reflect.TypeOf(a) == timeType {
			t.Errorf("an entry statement carries a client timestamp: %v", a)
		}
	}
	n := 0
	for _, q := range tr.sql {
		lq := strings.ToLower(q)
		if strings.Contains(lq, "create") || strings.Contains(lq, "pg_attribute") {
			continue
		}
		n++
		for _, f := range []string{"now()", "current_timestamp", "localtimestamp"} {
			if strings.Contains(lq, f) {
				t.Errorf("statement uses %s (only clock_timestamp() may decide expiry):\n%s", f, q)
			}
		}
		if !strings.Contains(lq, "clock_timestamp()") {
			t.Errorf("entry statement without clock_timestamp():\n%s", q)
		}
	}
	if n != 3 {
		t.Errorf("traced %d entry statements, want 3", n)
	}
}

// loadedTimeout is the per-request timeout of store tests that are not
// about timeouts: a loaded CI machine can take longer than sqlleasetest.TestTimeout
// for a statement that writes (an fsync), and those tests count rows.
var loadedTimeout = postgres.WithTimeout(5 * time.Second)
