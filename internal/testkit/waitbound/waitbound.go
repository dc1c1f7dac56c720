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
	"runtime"
	"strconv"
)

// Widen multiplies the package's -test.parallel (GOMAXPROCS unless given)
// by k, up to 4 × GOMAXPROCS. An explicit -parallel 1 (tests one at a
// time, to debug one) is kept. Call it from TestMain before m.Run; it
// parses the command line if nothing did yet.
func Widen(k int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.parallel")
	if f == nil || k <= 1 {
		return
	}
	n, err := strconv.Atoi(f.Value.String())
	if err != nil || n <= 1 {
		return
	}
	if err := flag.Set("test.parallel", strconv.Itoa(widened(n, k, runtime.GOMAXPROCS(0)))); err != nil {
		fmt.Fprintf(os.Stderr, "waitbound: %v\n", err)
	}
}

// widened is n × k, at most 4 × procs, and never less than n.
func widened(n, k, procs int) int {
	return max(n, min(n*k, 4*procs))
}
