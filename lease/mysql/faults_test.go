package mysql_test

import (
	"testing"

	"github.com/leasecron/leasecron/internal/testkit/mysqltest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/internal/sqlleasetest"
	"github.com/leasecron/leasecron/lease/mysql"
)

// harness runs the fault tests shared with lease/postgres (sqlleasetest)
// on MariaDB servers of their own.
var harness = sqlleasetest.Harness{
	Start: func(t testing.TB) sqlleasetest.Server { return server{mysqltest.Start(t)} },
	Drop:  "KILL CONNECTION",
}

// server is a mysqltest server as the shared fault tests use it.
type server struct{ *mysqltest.Server }

// with maps the shared tests' client settings to this driver's options.
var with = sqlleasetest.With[mysql.Option]{
	Timeout:           mysql.WithTimeout,
	ServerClockStep:   mysql.WithServerClockStep,
	WallClockTakeover: mysql.WithWallClockTakeover,
	NoReconnect:       mysql.WithoutReconnect,
}

// Open opens a client on s (through its proxy if c says so).
func (s server) Open(t testing.TB, c sqlleasetest.Client) lease.Backend {
	dsn := s.DSN()
	if c.Proxied {
		dsn = s.ProxiedDSN()
	}
	return open(t, dsn, with.Options(c)...)
}

// DropConnections ends the client connections with KILL CONNECTION.
func (s server) DropConnections(t testing.TB) int { return s.KillConnections(t) }

// The fault tests shared with lease/postgres; each says what it asserts
// in package sqlleasetest.

func TestKillDuringHold(t *testing.T)       { sqlleasetest.KillDuringHold(t, harness) }
func TestCommitsSurviveKill(t *testing.T)   { sqlleasetest.CommitsSurviveKill(t, harness) }
func TestPauseDuringHold(t *testing.T)      { sqlleasetest.PauseDuringHold(t, harness) }
func TestProxyCut(t *testing.T)             { sqlleasetest.ProxyCut(t, harness) }
func TestLostGrantAnswer(t *testing.T)      { sqlleasetest.LostGrantAnswer(t, harness) }
func TestLostGrantOfDoneEpoch(t *testing.T) { sqlleasetest.LostGrantOfDoneEpoch(t, harness) }

// TestKillConnectionReconnects: after KILL CONNECTION of the client's
// sessions, the very next call succeeds on a fresh connection; its
// negative control fails without the retry.
func TestKillConnectionReconnects(t *testing.T) { sqlleasetest.Reconnects(t, harness) }
func TestKillConnectionReconnectsNegative(t *testing.T) {
	sqlleasetest.ReconnectsNegative(t, harness)
}

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
