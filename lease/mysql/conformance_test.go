package mysql_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/mysqltest"
	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/internal/sqlleasetest"
	"github.com/leasecron/leasecron/lease/leasetest"
	"github.com/leasecron/leasecron/lease/mysql"
)

// conformanceTimeout is the clients' per-request timeout (a loaded 2-core
// machine commits with fsync in well under it; the race detector slows
// the client's encoding of a 10,000-key batch); the suite's TTL is 10 ×.
var (
	conformanceTimeout = map[bool]time.Duration{false: 400 * time.Millisecond, true: 600 * time.Millisecond}[raceEnabled]
	conformanceTTL     = 10 * conformanceTimeout
)

// isolations are the transaction isolation levels the suite runs under,
// set through the DSN (tx_isolation: MariaDB before 11.1 has no
// transaction_isolation).
var isolations = map[string]string{"RepeatableRead": "REPEATABLE-READ", "ReadCommitted": "READ-COMMITTED"}

// TestConformance runs the backend conformance suite against one real
// MariaDB server, under REPEATABLE READ and READ COMMITTED.
func TestConformance(t *testing.T) {
	t.Parallel()
	for name, level := range isolations {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a server each
			s := mysqltest.Start(t)
			dsn := s.DSN() + "?tx_isolation='" + level + "'"
			runConformance(t, s, dsn)
		})
	}
}

func dial(ctx context.Context, dsn string, opts ...mysql.Option) (*mysql.Backend, error) {
	return mysql.OpenWith(ctx, dsn, append([]mysql.Option{mysql.WithTimeout(conformanceTimeout)}, opts...)...)
}

func runConformance(t *testing.T, s *mysqltest.Server, dsn string) {
	leasetest.Run(t, leasetest.Harness{
		Name:    "mysql",
		Servers: 1,
		TTL:     conformanceTTL,
		Open: func(t testing.TB) lease.Backend {
			b, err := dial(context.Background(), dsn)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
		OpenLossy: func(t testing.TB) (lease.Backend, func(bool)) {
			g := netproxy.NewGroup(t, s.Addr())
			b, err := dial(context.Background(), g.Rewrite(dsn)[0])
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			t.Cleanup(func() { g.Cut(); _ = b.Close() })
			return b, g.DropReplies
		},
		OpenBatch: func(t testing.TB) lease.Backend {
			b, err := mysql.OpenWith(context.Background(), dsn, mysql.WithTimeout(5*time.Second))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
		Kill:    func(testing.TB, int) { s.Kill() },
		Restart: func(testing.TB, int) { s.Restart() },
		Pause:   func(testing.TB, int) { s.Pause() },
		Resume:  func(testing.TB, int) { s.Resume() },
		Ready: func(t testing.TB) {
			sqlleasetest.WaitReady(t, func(ctx context.Context) (lease.Backend, error) { return dial(ctx, dsn) })
		},
		BadInputs: func(t testing.TB) []leasetest.BadInput { return badInputs(t, s) },
	})
}

// badInputs returns what Open (or, when Open cannot tell yet, Warm)
// returns for bad DSNs and credentials.
func badInputs(t testing.TB, s *mysqltest.Server) []leasetest.BadInput {
	const wrong = "Wr0ng-s3cret"
	s.Exec("CREATE USER IF NOT EXISTS 'weak'@'%' IDENTIFIED BY 'weak-s3cret'")
	s.Exec("GRANT SELECT, INSERT, UPDATE ON " + mysqltest.Database + ".* TO 'weak'@'%'")
	closed := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	firstErr := func(dsn string, opts ...mysql.Option) error {
		return sqlleasetest.FirstErr(func(ctx context.Context) (lease.Backend, error) { return dial(ctx, dsn, opts...) })
	}
	pw := s.Password()
	u := mysqltest.User
	return []leasetest.BadInput{
		{Name: "wrong password", Err: firstErr(s.DSNFor(u, wrong)), MustName: s.Addr(), Secret: wrong},
		{Name: "unknown user", Err: firstErr(s.DSNFor("nobody", pw)), MustName: "nobody", Secret: pw},
		{Name: "nothing listening", Err: firstErr(u + ":" + pw + "@tcp(" + closed + ")/leasecron"), MustName: closed, Secret: pw},
		{Name: "no such database", Err: firstErr(u + ":" + pw + "@tcp(" + s.Addr() + ")/nope"), MustName: "nope", Secret: pw},
		{Name: "port out of range", Err: firstErr(u + ":" + pw + "@tcp(127.0.0.1:99999)/leasecron"), MustName: "127.0.0.1:99999", Secret: pw},
		{Name: "unknown parameter", Err: firstErr(s.DSN() + "?allowAllFiles=true"), MustName: "allowAllFiles", Secret: pw},
		{Name: "URL", Err: firstErr("mysql://" + u + ":" + pw + "@" + s.Addr() + "/leasecron"), MustName: "tcp(host:3306)", Secret: pw},
		{Name: "empty", Err: firstErr(""), MustName: "tcp(host:3306)"},
		{Name: "no database", Err: firstErr(u + ":" + pw + "@tcp(" + s.Addr() + ")/"), MustName: "no database name", Secret: pw},
		{Name: "user may not create the table", Err: firstErr(s.DSNFor("weak", "weak-s3cret"), mysql.WithTable("weak_leases")),
			MustName: "`weak_leases` does not exist and user \"weak\" may not create it", Secret: "weak-s3cret"},
		{Name: "bad table name", Err: firstErr(s.DSN(), mysql.WithTable("a.b.c")), MustName: "a.b.c", Secret: pw},
	}
}
