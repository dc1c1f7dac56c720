package leakcheck

import (
	"runtime"
	"testing"
	"time"
)

// TestWait: a goroutine still blocked is reported (exit code 1); once it
// ends, Wait returns 0.
func TestWait(t *testing.T) {
	before := runtime.NumGoroutine()
	stop := make(chan struct{})
	go func() { <-stop }()
	if code := Wait(before, 100*time.Millisecond); code != 1 {
		t.Fatalf("a blocked goroutine: Wait returned %d, want 1", code)
	}
	close(stop)
	if code := Wait(before, 5*time.Second); code != 0 {
		t.Fatalf("after the goroutine ended: Wait returned %d, want 0", code)
	}
}
