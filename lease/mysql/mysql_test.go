package mysql_test

import (
	"testing"

	"github.com/leasecron/leasecron/lease/internal/sqlleasetest"
	"github.com/leasecron/leasecron/lease/mysql"
)

// open opens a test client on dsn (sqlleasetest.Open: the short test
// timeout, then opts).
func open(t testing.TB, dsn string, opts ...mysql.Option) *mysql.Backend {
	t.Helper()
	return sqlleasetest.Open(t, mysql.OpenWith, mysql.WithTimeout, dsn, opts...)
}

// ctxT and try are the shared tests' Ctx (30 s) and Try (one attempt).
var (
	ctxT = sqlleasetest.Ctx
	try  = sqlleasetest.Try
)
