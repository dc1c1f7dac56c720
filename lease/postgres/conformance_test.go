package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/internal/sqlleasetest"
	"github.com/leasecron/leasecron/lease/leasetest"
	"github.com/leasecron/leasecron/lease/postgres"
)

// conformanceTimeout is the clients' per-request timeout (a loaded 2-core
// machine commits with fsync in well under it; the race detector slows
// the client's encoding of a 10,000-key batch); the suite's TTL is 10 ×.
var (
	conformanceTimeout = map[bool]time.Duration{false: 300 * time.Millisecond, true: 500 * time.Millisecond}[raceEnabled]
	conformanceTTL     = 10 * conformanceTimeout
)

// TestConformance runs the backend conformance suite against one real
// PostgreSQL server.
func TestConformance(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t)
	dial := func(ctx context.Context, url string, opts ...postgres.Option) (*postgres.Backend, error) {
		return postgres.OpenWith(ctx, url, append([]postgres.Option{postgres.WithTimeout(conformanceTimeout)}, opts...)...)
	}
	leasetest.Run(t, leasetest.Harness{
		Name:    "postgres",
		Servers: 1,
		TTL:     conformanceTTL,
		Open: func(t testing.TB) lease.Backend {
			b, err := dial(context.Background(), s.URL())
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
		OpenLossy: func(t testing.TB) (lease.Backend, func(bool)) {
			g := netproxy.NewGroup(t, s.Addr())
			b, err := dial(context.Background(), g.Rewrite(s.URL())[0])
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			// Cut before Close: pgx drains a timed-out connection in the
			// background for up to 15 s, and Close waits for it.
			t.Cleanup(func() { g.Cut(); _ = b.Close() })
			return b, g.DropReplies
		},
		Kill:    func(testing.TB, int) { s.Kill() },
		Restart: func(testing.TB, int) { s.Restart() },
		Pause:   func(testing.TB, int) { s.Pause() },
		Resume:  func(testing.TB, int) { s.Resume() },
		Ready: func(t testing.TB) {
			sqlleasetest.WaitReady(t, func(ctx context.Context) (lease.Backend, error) { return dial(ctx, s.URL()) })
		},
		BadInputs: func(t testing.TB) []leasetest.BadInput {
			return badInputs(t, s, dial)
		},
	})
}

// badInputs returns what Open (or, when Open cannot tell yet, Warm)
// returns for bad URLs and credentials.
func badInputs(t testing.TB, s *pgtest.Server, dial func(context.Context, string, ...postgres.Option) (*postgres.Backend, error)) []leasetest.BadInput {
	const wrong = "Wr0ng-s3cret"
	s.Exec("DO $$ BEGIN CREATE ROLE weak LOGIN PASSWORD 'weak-s3cret'; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
	closed := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	firstErr := func(url string, opts ...postgres.Option) error {
		return sqlleasetest.FirstErr(func(ctx context.Context) (lease.Backend, error) { return dial(ctx, url, opts...) })
	}
	pw := s.Password()
	return []leasetest.BadInput{
		{Name: "wrong password", Err: firstErr(s.URLFor(pgtest.User, wrong)), MustName: s.Addr(), Secret: wrong},
		{Name: "unknown user", Err: firstErr(s.URLFor("nobody", pw)), MustName: `"nobody"`, Secret: pw},
		{Name: "nothing listening", Err: firstErr("postgres://leasecron:" + pw + "@" + closed + "/leasecron?sslmode=disable"), MustName: closed, Secret: pw},
		{Name: "no such database", Err: firstErr("postgres://leasecron:" + pw + "@" + s.Addr() + "/nope?sslmode=disable"), MustName: `"nope"`, Secret: pw},
		{Name: "port out of range", Err: firstErr("postgres://leasecron:" + pw + "@127.0.0.1:99999/leasecron"), MustName: "127.0.0.1:99999", Secret: pw},
		{Name: "bad sslmode", Err: firstErr(s.URL() + "x"), MustName: "sslmode", Secret: pw},
		{Name: "unsupported scheme", Err: firstErr("http://leasecron:" + pw + "@" + s.Addr() + "/leasecron"), MustName: `"http"`, Secret: pw},
		{Name: "keyword string", Err: firstErr("host=127.0.0.1 user=leasecron password=" + pw), MustName: "postgres://", Secret: pw},
		{Name: "empty", Err: firstErr(""), MustName: "postgres://"},
		{Name: "role may not create the table", Err: firstErr(s.URLFor("weak", "weak-s3cret"), postgres.WithTable("weak_leases")),
			MustName: `"weak_leases" does not exist and role "weak" may not create it`, Secret: "weak-s3cret"},
		{Name: "bad table name", Err: firstErr(s.URL(), postgres.WithTable("a.b.c")), MustName: "a.b.c", Secret: pw},
	}
}
