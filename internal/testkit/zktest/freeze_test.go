package zktest

import (
	"testing"
	"time"
)

// TestWholeFreezeResumesLeaderLast freezes every server of an ensemble
// and resumes them leader first, the order most likely to stall
// ZooKeeper 3.8.0 (see freeze.go): the leader must be continued only
// after the others elected another, so that the ensemble serves with a
// new leader and the old one follows it. A leader frozen alone is
// resumed at once.
func TestWholeFreezeResumesLeaderLast(t *testing.T) {
	e := Start(t, 3)
	lead := e.WaitLeader(15 * time.Second)
	if lead < 0 {
		t.Fatal("no leader")
	}
	e.Servers[lead].Pause()
	e.Servers[lead].Resume()
	if e.Servers[lead].paused() {
		t.Fatal("a leader frozen alone was not resumed")
	}
	if lead = e.WaitLeader(15 * time.Second); lead < 0 {
		t.Fatal("no leader after a short freeze of the leader")
	}
	for _, s := range e.Servers {
		s.Pause()
	}
	time.Sleep(3 * time.Second) // past syncLimit × tickTime (2 s)
	e.Servers[lead].Resume()
	if !e.Servers[lead].paused() {
		t.Fatal("the leader was resumed while its followers were frozen")
	}
	for i, s := range e.Servers {
		if i != lead {
			s.Resume()
		}
	}
	if e.Servers[lead].paused() {
		t.Fatal("the leader is still frozen after every server was resumed")
	}
	end := time.Now().Add(30 * time.Second)
	for !e.Serving() {
		if time.Now().After(end) {
			t.Fatalf("the ensemble does not serve 30 s after the freeze; figures:\n%s", e.Figures())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Continued after the others elected, the old leader steps down and
	// follows (it may answer as leader for a moment first).
	for end := time.Now().Add(15 * time.Second); e.Servers[lead].Mode() != "follower"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("server %d still answers %q 15 s after the freeze, not follower: it was resumed before the others elected another",
				e.Servers[lead].ID, e.Servers[lead].Mode())
		}
	}
}
