package scheduler

import (
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// TestFireOffset: each host fires a tick at its own small offset, the same
// every time it computes it, and which host fires first changes from tick
// to tick.
func TestFireOffset(t *testing.T) {
	hosts := []*Scheduler{{host: "a"}, {host: "b"}, {host: "c"}}
	first := map[string]int{}
	base := time.Unix(1_800_000_000, 0)
	for i := range 300 {
		tick := base.Add(time.Duration(i) * time.Second)
		best, bestHost := fireSpread, ""
		seen := map[time.Duration]bool{}
		for _, s := range hosts {
			d := s.fireOffset(tick)
			if d < 0 || d >= fireSpread {
				t.Fatalf("fireOffset(%s) on %s = %s, want in [0, %s)", tick, s.host, d, fireSpread)
			}
			if d != s.fireOffset(tick) {
				t.Fatalf("fireOffset not deterministic")
			}
			seen[d] = true
			if d < best {
				best, bestHost = d, s.host
			}
		}
		if len(seen) == 1 {
			t.Errorf("tick %s: all hosts fire at the same offset %s", tick, best)
		}
		first[bestHost]++
	}
	for _, s := range hosts {
		if first[s.host] < 50 {
			t.Errorf("host %s fires first in %d of 300 ticks, want about a third: %v", s.host, first[s.host], first)
		}
	}
}

// TestHeldWait: a loser that saw the tick held on a quorum looks once more
// after heldRecheck and then waits for the holder's TTL; one that saw the
// votes split retries within a short, doubling random delay, splitRetries
// times, before trusting the TTL; a wait never passes the holder's TTL.
func TestHeldWait(t *testing.T) {
	const quorum = 3
	ttl := 20 * time.Second
	held := &lease.RefusedError{Reason: lease.ErrHeld, Holder: "tick=1 host=b", HolderTTL: ttl, HolderNodes: quorum}
	if got := heldWait(held, quorum, 0); got != heldRecheck {
		t.Errorf("held on a quorum, first look: wait %s, want heldRecheck %s", got, heldRecheck)
	}
	for attempt := 1; attempt <= splitRetries+1; attempt++ {
		if got := heldWait(held, quorum, attempt); got != ttl+5*time.Millisecond {
			t.Errorf("held on a quorum, attempt %d: wait %s, want the holder's TTL + 5ms", attempt, got)
		}
	}
	split := *held
	split.HolderNodes = 2
	for attempt := 0; attempt < splitRetries; attempt++ {
		limit := splitRetryBase<<attempt + time.Millisecond
		for range 100 {
			if got := heldWait(&split, quorum, attempt); got < time.Millisecond || got > limit {
				t.Fatalf("split, attempt %d: wait %s, want within [1ms, %s]", attempt, got, limit)
			}
		}
	}
	if got := heldWait(&split, quorum, splitRetries); got != ttl+5*time.Millisecond {
		t.Errorf("split, after %d retries: wait %s, want the holder's TTL + 5ms", splitRetries, got)
	}
	soon := *held
	soon.HolderTTL = 10 * time.Millisecond
	if got := heldWait(&soon, quorum, 0); got != 15*time.Millisecond {
		t.Errorf("held on a quorum, free in 10ms: wait %s, want 15ms", got)
	}
}

// TestTickOffset: a tick whose jobs the ranking gives one host each fires
// at the tick itself; one with a job every host tries (candidates 0), or
// without a fresh view of the live hosts (every host ranks itself first),
// fires at the host's offset, so that hosts do not split the votes.
func TestTickOffset(t *testing.T) {
	at := time.Unix(1_800_000_007, 0)
	cfg := &Config{Heartbeat: time.Second, Jobs: []*Job{{Name: "ranked", Candidates: 3}, {Name: "everyone", Candidates: 0}}}
	next := map[string]time.Time{"ranked": at, "everyone": at.Add(time.Minute)}
	// A host whose offset at this tick is not 0 (else the check below
	// could not tell the cases apart).
	s := &Scheduler{host: "a"}
	for i := 0; s.fireOffset(at) == 0; i++ {
		s.host = "a" + string(rune('0'+i))
	}
	if got := s.tickOffset(cfg, newTickQueue(cfg, next).due(at), at); got != s.fireOffset(at) {
		t.Errorf("no view of the live hosts: offset %s, want the host's %s", got, s.fireOffset(at))
	}
	s.view.Store(&fleetView{hosts: []HostBeat{{Host: s.host}, {Host: "b"}}, read: time.Now()})
	if got := s.tickOffset(cfg, newTickQueue(cfg, next).due(at), at); got != 0 {
		t.Errorf("ranked jobs only, with a view: offset %s, want 0", got)
	}
	next["everyone"] = at
	if got := s.tickOffset(cfg, newTickQueue(cfg, next).due(at), at); got != s.fireOffset(at) {
		t.Errorf("a job with candidates 0 is due: offset %s, want the host's %s", got, s.fireOffset(at))
	}
	s.view.Store(&fleetView{hosts: []HostBeat{{Host: s.host}}, read: time.Now().Add(-time.Hour)})
	next["everyone"] = at.Add(time.Minute)
	if got := s.tickOffset(cfg, newTickQueue(cfg, next).due(at), at); got != s.fireOffset(at) {
		t.Errorf("a stale view: offset %s, want the host's %s", got, s.fireOffset(at))
	}
}
