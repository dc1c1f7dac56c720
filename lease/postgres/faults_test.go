package postgres_test

import (
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/internal/sqlleasetest"
	"github.com/leasecron/leasecron/lease/postgres"
)

// harness runs the fault tests shared with lease/mysql (sqlleasetest) on
// PostgreSQL servers of their own.
var harness = sqlleasetest.Harness{
	Start: func(t testing.TB) sqlleasetest.Server { return server{pgtest.Start(t)} },
	Drop:  "pg_terminate_backend",
}

// server is a pgtest server as the shared fault tests use it.
type server struct{ *pgtest.Server }

// with maps the shared tests' client settings to this driver's options.
var with = sqlleasetest.With[postgres.Option]{
	Timeout:           postgres.WithTimeout,
	ServerClockStep:   postgres.WithServerClockStep,
	WallClockTakeover: postgres.WithWallClockTakeover,
	NoReconnect:       postgres.WithoutReconnect,
}

// Open opens a client on s (through its proxy if c says so).
func (s server) Open(t testing.TB, c sqlleasetest.Client) lease.Backend {
	url := s.URL()
	if c.Proxied {
		url = s.ProxiedURL()
	}
	return open(t, url, with.Options(c)...)
}

// DropConnections ends the client connections with pg_terminate_backend.
func (s server) DropConnections(t testing.TB) int { return s.Terminate(t) }

// The fault tests shared with lease/mysql; each says what it asserts in
// package sqlleasetest.

func TestKillDuringHold(t *testing.T)       { sqlleasetest.KillDuringHold(t, harness) }
func TestCommitsSurviveKill(t *testing.T)   { sqlleasetest.CommitsSurviveKill(t, harness) }
func TestPauseDuringHold(t *testing.T)      { sqlleasetest.PauseDuringHold(t, harness) }
func TestProxyCut(t *testing.T)             { sqlleasetest.ProxyCut(t, harness) }
func TestLostGrantAnswer(t *testing.T)      { sqlleasetest.LostGrantAnswer(t, harness) }
func TestLostGrantOfDoneEpoch(t *testing.T) { sqlleasetest.LostGrantOfDoneEpoch(t, harness) }

// TestTerminateReconnects: after pg_terminate_backend of the client's
// connections, the very next call succeeds on a fresh connection; its
// negative control fails without the retry.
func TestTerminateReconnects(t *testing.T)         { sqlleasetest.Reconnects(t, harness) }
func TestTerminateReconnectsNegative(t *testing.T) { sqlleasetest.ReconnectsNegative(t, harness) }

// The clock step tests: a step of the server's clock shortens no lease.
func TestServerClockStepForward(t *testing.T) { sqlleasetest.ServerClockStepForward(t, harness) }
func TestServerClockStepForwardNegative(t *testing.T) {
	sqlleasetest.ServerClockStepForwardNegative(t, harness)
}
func TestServerClockStepKeepsRenewedLease(t *testing.T) {
	sqlleasetest.ServerClockStepKeepsRenewedLease(t, harness)
}
func TestServerClockStepBatchTakeover(t *testing.T) {
	sqlleasetest.ServerClockStepBatchTakeover(t, harness)
}

// TestCommitsSurviveKillNegative is the negative control of
// TestCommitsSurviveKill: with an UNLOGGED table, which a crash empties,
// the same steps find the lease taken over while still valid and the
// fence gone back — the violation the LOGGED table prevents.
func TestCommitsSurviveKillNegative(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t)
	b := open(t, s.URL(), postgres.WithUnloggedTable())
	other := open(t, s.URL(), postgres.WithUnloggedTable())
	l, err := b.Acquire(ctxT(t), lease.Request{Key: "job", TTL: 30 * time.Second, Owner: "holder"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctxT(t), lease.Request{Key: "bump", TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	s.Restart()
	l2, err := try(t, other, lease.Request{Key: "job", TTL: time.Second})
	if err != nil {
		t.Fatalf("negative control: the unlogged lease survived the crash (%v); the control does not control", err)
	}
	if !time.Now().Before(l.ValidUntil()) || l2.Fence() > l.Fence() {
		t.Fatalf("negative control: taken over at the end of the validity or with a higher fence (%d after %d)", l2.Fence(), l.Fence())
	}
}
