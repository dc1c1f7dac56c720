package redlock_test

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/leakcheck"
	"github.com/leasecron/leasecron/internal/testkit/waitbound"
)

func TestMain(m *testing.M) {
	// The tests spend most of their time waiting for real time to pass
	// (TTLs, restart guards, renewals), not on the CPU.
	waitbound.Widen(3)
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
