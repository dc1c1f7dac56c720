package redlock_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
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
// ended: a leak check in the spirit of etcd's, without a dependency.
func runTests(m *testing.M) int {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code != 0 {
		return code
	}
	// go-redis's background dialer sleeps 1 s between probes before it
	// notices its pool closed; allow for that and a loaded machine.
	deadline := time.Now().Add(15 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			fmt.Fprintf(os.Stderr, "goroutine leak: %d goroutines before the tests, %d after:\n%s\n",
				before, runtime.NumGoroutine(), bytes.TrimSpace(buf))
			return 1
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0
}
