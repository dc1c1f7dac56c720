//go:build linux

package proctest

import (
	"testing"
	"time"
)

// TestStartSlotBounds: with both slots of a 2-slot directory held, a
// further startSlot waits, and gets a slot once one is freed; with none
// free for its whole wait, it gives up and returns. (Its own directory:
// the machine's slots are shared with other test processes.)
func TestStartSlotBounds(t *testing.T) {
	dir := t.TempDir()
	a, b := startSlot(dir, 2, time.Minute), startSlot(dir, 2, time.Minute)
	got := make(chan func(), 1)
	go func() { got <- startSlot(dir, 2, time.Minute) }()
	select {
	case r := <-got:
		r()
		t.Fatal("startSlot returned while both slots were held")
	case <-time.After(300 * time.Millisecond):
	}
	a()
	select {
	case r := <-got:
		r()
	case <-time.After(5 * time.Second):
		t.Fatal("startSlot did not return within 5s of a slot freed")
	}
	held := startSlot(dir, 1, time.Minute) // slot-0 again; b has slot-1
	start := time.Now()
	startSlot(dir, 1, 200*time.Millisecond)() // none free: it gives up
	if d := time.Since(start); d < 200*time.Millisecond || d > 5*time.Second {
		t.Errorf("startSlot with no slot free returned after %s, want its 200ms bound", d)
	}
	held()
	b()
}
