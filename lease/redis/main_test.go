package redis_test

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain runs the tests and then checks that every goroutine they
// started (client lanes, Hold renewers, go-redis pool helpers) has ended:
// a leak check in the spirit of etcd's.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		code = leaked(before)
	}
	os.Exit(code)
}

// leaked waits (bounded) for the goroutine count to fall back to before
// and returns 1, after printing every stack, if it does not.
func leaked(before int) int {
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
