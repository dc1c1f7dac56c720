package postgres_test

import (
	"os"
	"testing"

	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/lease/internal/sqlleasetest"
)

// TestMain runs the tests and then checks that every goroutine they
// started has ended and that no postgres server they started still runs.
func TestMain(m *testing.M) { os.Exit(sqlleasetest.Main(m, "postgres", pgtest.Leftover)) }
