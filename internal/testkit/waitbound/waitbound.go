// Package waitbound lets a test package whose tests spend their time
// waiting for real time to pass (TTLs, schedules, restart guards,
// renewals), not on the CPU, run more of them at once than go test's
// -parallel, which `make test` sets for every package alike.
//
//	func TestMain(m *testing.M) {
//		waitbound.Widen(3) // three times -parallel
//		os.Exit(m.Run())
//	}
//
// Which packages widen, and by how much, is measured (their CPU against
// their wall time); see docs/development.md.
package waitbound

import (
	"flag"
	"fmt"
	"os"
	"strconv"
)

// Widen multiplies the package's -test.parallel (GOMAXPROCS unless given)
// by k. Call it from TestMain before m.Run; it parses the command line if
// nothing did yet.
func Widen(k int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.parallel")
	if f == nil || k <= 1 {
		return
	}
	n, err := strconv.Atoi(f.Value.String())
	if err != nil || n < 1 {
		return
	}
	if err := flag.Set("test.parallel", strconv.Itoa(n*k)); err != nil {
		fmt.Fprintf(os.Stderr, "waitbound: %v\n", err)
	}
}
