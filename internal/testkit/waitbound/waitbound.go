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
	setParallel(func(n int) int { return widened(n, k, runtime.GOMAXPROCS(0)) })
}

// AtLeast raises the package's -test.parallel to n (a larger value, and
// an explicit -parallel 1, are kept), for a package whose tests queue for
// a resource of their own after t.Parallel, each holding a slot of
// -parallel while it waits: with fewer slots than waiting tests, a test
// that does not queue, or a parallel subtest of the one holding the
// resource, waits for a slot too. Call it from TestMain before m.Run.
func AtLeast(n int) {
	setParallel(func(was int) int { return max(was, n) })
}

// setParallel sets -test.parallel to f of its value, unless that is 1 or
// less (one test at a time, asked for).
func setParallel(f func(int) int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	fl := flag.Lookup("test.parallel")
	if fl == nil {
		return
	}
	n, err := strconv.Atoi(fl.Value.String())
	if err != nil || n <= 1 {
		return
	}
	if err := flag.Set("test.parallel", strconv.Itoa(f(n))); err != nil {
		fmt.Fprintf(os.Stderr, "waitbound: %v\n", err)
	}
}

// widened is n × k, at most 4 × procs, and never less than n.
func widened(n, k, procs int) int {
	return max(n, min(n*k, 4*procs))
}
