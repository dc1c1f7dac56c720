package postgres_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/postgres"
)

// argTracer records the arguments of every statement.
type argTracer struct {
	mu   sync.Mutex
	sql  []string
	args []any
}

func (a *argTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sql = append(a.sql, d.SQL)
	a.args = append(a.args, d.Args...)
	return ctx
}

func (a *argTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestHostClocksDoNotMatter shows why two clients whose host wall clocks
// differ cannot break exclusion: no statement carries a client timestamp,
// and every instant the SQL stores is the database's own
// clock_timestamp(), which only feeds reports (takeover is counted on the
// contender's monotonic clock: TestServerClockStepForward). So offsetting
// a client's wall clock, which it never reads for a lease, changes
// nothing: there is no hook to test beyond this.
func TestHostClocksDoNotMatter(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t)
	tr := &argTracer{}
	b := open(t, s.URL(), postgres.WithTracer(tr))
	ctx := ctxT(t)
	l, err := b.Acquire(ctx, lease.Request{Key: "job", TTL: time.Second, Epoch: 3, Owner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Extend(ctx, 0)
	_ = b.SetNote(ctx, "job", 1, "n")
	_, _ = b.Inspect(ctx, "job")
	_ = l.Complete(ctx)
	l, _ = b.Acquire(ctx, lease.Request{Key: "job2", TTL: time.Second})
	_ = l.Release(ctx)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.sql) < 7 {
		t.Fatalf("traced %d statements", len(tr.sql))
	}
	timeType := reflect.TypeFor[time.Time]()
	for _, a := range tr.args {
		switch a.(type) {
		case string, int64, []string, []int64:
		default:
			t.Errorf("a statement carries a %T argument (%v)", a, a)
		}
		if reflect.TypeOf(a) == timeType {
			t.Errorf("a statement carries a client timestamp: %v", a)
		}
	}
	for _, q := range tr.sql {
		lq := strings.ToLower(q)
		for _, f := range []string{"now()", "current_timestamp", "localtimestamp", "timestamptz"} {
			if strings.Contains(lq, f) && !strings.Contains(lq, "create") {
				t.Errorf("statement uses %s (only clock_timestamp() may decide expiry):\n%s", f, q)
			}
		}
	}
}
