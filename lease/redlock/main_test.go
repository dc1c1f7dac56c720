package redlock_test

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) {
	// The tests spend most of their time waiting for real time to pass
	// (TTLs, restart guards, renewals), not on the CPU: unless -parallel
	// is given, run more of them at once than GOMAXPROCS.
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(max(runtime.GOMAXPROCS(0), 8)))
	}
	os.Exit(runTests(m))
}

// runTests runs the tests and then checks that every goroutine they
// started (client lanes, Hold renewers, go-redis pool helpers, proxies) has
// ended. go-redis's background dialer sleeps 1 s between probes before it
// notices its pool closed: the wait allows for that and a loaded machine.
func runTests(m *testing.M) int {
	before := runtime.NumGoroutine()
	if code := m.Run(); code != 0 {
		return code
	}
	return leakcheck.Wait(before, 15*time.Second)
}
