package postgres_test

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/pgtest"
)

// TestMain runs the tests and then checks that every goroutine they
// started (pool health checkers, Hold renewers, proxies) has ended and
// that no postgres server they started still runs.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		code = leaked(before)
	}
	if left := pgtest.Leftover(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "postgres processes left running after the tests: %v\n", left)
		code = 1
	}
	os.Exit(code)
}

// leaked waits (bounded) for the goroutine count to fall back to before
// and returns 1, after printing every stack, if it does not.
func leaked(before int) int {
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
