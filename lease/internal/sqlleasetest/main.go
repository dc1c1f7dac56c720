package sqlleasetest

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
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
		code = leaked(before)
	}
	if left := leftover(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "%s processes left running after the tests: %v\n", what, left)
		code = 1
	}
	return code
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
