package lease

import (
	"strconv"
	"testing"
	"time"
)

// TestObservations: a version is ripe only once seen unchanged for its
// TTL; a new version (a renewal) or token restarts the count; forget and
// pruning drop observations.
func TestObservations(t *testing.T) {
	o := NewObservations()
	t0 := time.Now()
	if w := o.Saw("k", "tok", "100", time.Second, t0); w != time.Second {
		t.Fatalf("first sight: wait %s, want 1s", w)
	}
	if tok, x := o.Ripe("k", t0.Add(999*time.Millisecond)); tok != "" || x != "" {
		t.Fatalf("ripe before the TTL: %q %q", tok, x)
	}
	if w := o.Saw("k", "tok", "100", time.Second, t0.Add(400*time.Millisecond)); w != 600*time.Millisecond {
		t.Fatalf("same version again: wait %s, want 600ms (counted from the first sight)", w)
	}
	if tok, x := o.Ripe("k", t0.Add(time.Second)); tok != "tok" || x != "100" {
		t.Fatalf("after the TTL: %q %q, want tok 100", tok, x)
	}
	if w := o.Saw("k", "tok", "101", time.Second, t0.Add(time.Second)); w != time.Second {
		t.Fatalf("renewed (new xmin): wait %s, want a full TTL", w)
	}
	if tok, _ := o.Ripe("k", t0.Add(1500*time.Millisecond)); tok != "" {
		t.Fatal("a renewed row is ripe before a full TTL from its first sight")
	}
	o.Forget("k")
	if tok, _ := o.Ripe("k", t0.Add(time.Hour)); tok != "" {
		t.Fatal("ripe after forget")
	}
	for i := range minPrune - 1 {
		o.Saw(strconv.Itoa(i), "t", "1", time.Second, t0)
	}
	later := t0.Add(2 * time.Minute)
	o.Saw("fresh", "t", "1", time.Second, later) // reaches minPrune: prunes
	o.mu.Lock()
	n := len(o.m)
	o.mu.Unlock()
	if n != 1 {
		t.Fatalf("after pruning %d observations left, want only the fresh one", n)
	}
}
