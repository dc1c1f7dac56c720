package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/postgres"
)

// crossingPuts has 8 clients Put their own entry in one space 40 times
// each, with a TTL of 1µs: every Put finds the others' entries expired and
// deletes them while they are being rewritten. No retry on a fresh
// connection (which would hide a deadlock) and a timeout above
// PostgreSQL's deadlock_timeout (1 s). It returns the first error.
func crossingPuts(t *testing.T, opts ...postgres.Option) error {
	s := pgtest.Start(t)
	opts = append([]postgres.Option{postgres.WithoutReconnect(), postgres.WithTimeout(10 * time.Second)}, opts...)
	storeRoundTrip(t, open(t, s.URL(), opts...), "create")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		b := open(t, s.URL(), opts...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range 40 {
				if err := b.Put(ctxT(t), "hosts", lease.Entry{Name: fmt.Sprintf("h%d", g), Version: int64(v + 1), TTL: time.Microsecond}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// TestPutCleanupNoDeadlock: Puts that delete each other's expired entries
// never deadlock: the cleanup skips rows other statements locked.
func TestPutCleanupNoDeadlock(t *testing.T) {
	t.Parallel()
	if err := crossingPuts(t); err != nil {
		t.Fatalf("crossing Puts: %v", err)
	}
}

// TestPutCleanupNoDeadlockNegative is its negative control: with a
// cleanup that waits for locked rows, the same Puts deadlock.
func TestPutCleanupNoDeadlockNegative(t *testing.T) {
	t.Parallel()
	err := crossingPuts(t, postgres.WithoutSkipLocked())
	if err == nil {
		t.Fatal("negative control: crossing Puts with a waiting cleanup did not deadlock")
	}
	if !strings.Contains(err.Error(), "40P01") {
		t.Fatalf("negative control: %v, want a deadlock (40P01)", err)
	}
	t.Logf("negative control: %v", err)
}

// storeAfterCrash puts an entry and appends a record, SIGKILLs the
// server, restarts it, and reports whether both are still there.
func storeAfterCrash(t *testing.T, opts ...postgres.Option) (entry, record bool) {
	s := pgtest.Start(t)
	// Not a latency test: the first Put creates the tables, which on a
	// loaded machine can take longer than the test clients' 500 ms.
	opts = append([]postgres.Option{postgres.WithTimeout(10 * time.Second)}, opts...)
	b, other := open(t, s.URL(), opts...), open(t, s.URL(), opts...)
	if err := b.Put(ctxT(t), "pause", lease.Entry{Name: "job", Version: 1, Data: []byte("paused")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ctxT(t), "job", lease.Record{ID: "run-1", At: time.Now(), Data: []byte("ok")}, 50); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	s.Restart()
	e, ok, err := other.Get(ctxT(t), "pause", "job")
	if err != nil {
		t.Fatalf("Get after the restart: %v", err)
	}
	l, err := other.Log(ctxT(t), "job", 5)
	if err != nil {
		t.Fatalf("Log after the restart: %v", err)
	}
	return ok && string(e.Data) == "paused", len(l) == 1 && l[0].ID == "run-1"
}

// TestStoreSurvivesKill: an acknowledged Put and Append are still there
// after SIGKILL of the server and a restart (LOGGED tables).
func TestStoreSurvivesKill(t *testing.T) {
	t.Parallel()
	if entry, record := storeAfterCrash(t); !entry || !record {
		t.Fatalf("after a crash: entry kept %v, record kept %v; want both", entry, record)
	}
}

// TestStoreSurvivesKillNegative is its negative control: with UNLOGGED
// tables, which a crash empties, both are gone.
func TestStoreSurvivesKillNegative(t *testing.T) {
	t.Parallel()
	if entry, record := storeAfterCrash(t, postgres.WithUnloggedTable()); entry || record {
		t.Fatalf("negative control: unlogged entry kept %v, record kept %v after a crash; the control does not control", entry, record)
	}
}

// TestStoreReconnects: after pg_terminate_backend of every connection,
// the very next Put and Append succeed on a fresh connection; without the
// retry (the negative control, a second client) they fail.
func TestStoreReconnects(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t)
	// Room for a SCRAM handshake under load (see terminateThenExtend).
	b := open(t, s.URL(), postgres.WithTimeout(5*time.Second))
	nb := open(t, s.URL(), postgres.WithTimeout(5*time.Second), postgres.WithoutReconnect())
	for _, c := range []*postgres.Backend{b, nb} {
		storeRoundTrip(t, c, "warm")
	}
	for i, call := range []struct {
		name string
		f    func(*postgres.Backend) error
	}{
		{"Put", func(c *postgres.Backend) error {
			return c.Put(ctxT(t), "hosts", lease.Entry{Name: "h", Version: 9, TTL: time.Minute})
		}},
		{"Append", func(c *postgres.Backend) error {
			return c.Append(ctxT(t), "job", lease.Record{ID: "after", At: time.Now()}, 50)
		}},
	} {
		if n := s.Terminate(t); n < 2 {
			t.Fatalf("round %d: Terminate ended %d connections, want both clients'", i, n)
		}
		if err := call.f(nb); err == nil {
			t.Errorf("negative control: %s without the reconnect retry succeeded after pg_terminate_backend", call.name)
		}
		if err := call.f(b); err != nil {
			t.Errorf("first %s after pg_terminate_backend: %v", call.name, err)
		}
		storeRoundTrip(t, nb, "again") // a fresh connection for the next round
	}
}

// TestStoreBlackhole: with the network swallowing every packet, Put, Get,
// List, Append and Log fail within the timeout (plus slack), each with a
// NodeError naming the server.
func TestStoreBlackhole(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t)
	b := open(t, s.ProxiedURL())
	storeRoundTrip(t, b, "before")
	s.Proxy().Blackhole(true)
	// See TestProxyCut: cutting at the end lets pgx's cleanup finish.
	t.Cleanup(s.Proxy().Cut)
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"Put", func() error { return b.Put(ctxT(t), "hosts", lease.Entry{Name: "h", Version: 2}) }},
		{"Get", func() error { _, _, err := b.Get(ctxT(t), "hosts", "before"); return err }},
		{"List", func() error { _, err := b.List(ctxT(t), "hosts"); return err }},
		{"Append", func() error { return b.Append(ctxT(t), "job", lease.Record{ID: "x", At: time.Now()}, 50) }},
		{"Log", func() error { _, err := b.Log(ctxT(t), "job", 5); return err }},
	} {
		start := time.Now()
		err := c.f()
		took := time.Since(start)
		var ne *lease.NodeError
		if !errors.As(err, &ne) || ne.Node != b.Servers()[0] {
			t.Errorf("blackholed %s: %v, want a NodeError naming %s", c.name, err, b.Servers()[0])
		}
		if took > b.Timeout()+2*time.Second {
			t.Errorf("blackholed %s failed after %s, want within the timeout %s (+2s)", c.name, took, b.Timeout())
		}
		if strings.Contains(fmt.Sprint(err), s.Password()) {
			t.Errorf("blackholed %s: error contains the password", c.name)
		}
	}
}
