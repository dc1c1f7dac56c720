package pgtest_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/leasecron/leasecron/internal/testkit/pgtest"
)

// TestMain fails the run if a postgres server started by the tests
// outlives them.
func TestMain(m *testing.M) {
	code := m.Run()
	if left := pgtest.Leftover(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "pgtest: postgres processes left running after the tests: %v\n", left)
		code = 1
	}
	os.Exit(code)
}
