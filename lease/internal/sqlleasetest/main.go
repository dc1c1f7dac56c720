package sqlleasetest

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/leakcheck"
)

// Main runs a driver's tests (m.Run) and then checks that every goroutine
// they started (pool health checkers, Hold renewers, proxies) has ended
// and that no server process they started still runs (leftover: the
// server kit's Leftover; what names the servers in the message). It
// returns the exit code:
//
//	func TestMain(m *testing.M) { os.Exit(sqlleasetest.Main(m, "postgres", pgtest.Leftover)) }
func Main(m *testing.M, what string, leftover func() []int) int {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		code = leakcheck.Wait(before, 15*time.Second)
	}
	if left := leftover(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "%s processes left running after the tests: %v\n", what, left)
		code = 1
	}
	return code
}
