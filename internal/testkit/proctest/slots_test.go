//go:build linux

package proctest

import (
	"runtime"
	"testing"
	"time"
)

// TestStartSlotBounds: with every start slot of the machine held (one
// per CPU), a further StartSlot waits, and gets a slot once one is freed.
func TestStartSlotBounds(t *testing.T) {
	var held []func()
	for range runtime.NumCPU() {
		held = append(held, StartSlot())
	}
	got := make(chan func(), 1)
	go func() { got <- StartSlot() }()
	select {
	case r := <-got:
		r()
		t.Fatalf("StartSlot returned while all %d slots were held", len(held))
	case <-time.After(300 * time.Millisecond):
	}
	held[0]()
	select {
	case r := <-got:
		r()
	case <-time.After(5 * time.Second):
		t.Fatal("StartSlot did not return within 5s of a slot freed")
	}
	for _, r := range held[1:] {
		r()
	}
}
