// Package leakcheck checks, at the end of a test binary, that every
// goroutine its tests started has ended: a leak check in the spirit of
// etcd's, without a dependency. Use it from TestMain:
//
//	func TestMain(m *testing.M) {
//		before := runtime.NumGoroutine()
//		code := m.Run()
//		if code == 0 {
//			code = leakcheck.Wait(before, 15*time.Second)
//		}
//		os.Exit(code)
//	}
package leakcheck

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"time"
)

// Wait waits, up to within, for the number of goroutines to fall back to
// before (clients' background helpers end a little after their Close),
// and returns 0; if it does not, it prints every goroutine's stack to
// standard error and returns 1, an exit code.
func Wait(before int, within time.Duration) int {
	deadline := time.Now().Add(within)
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
