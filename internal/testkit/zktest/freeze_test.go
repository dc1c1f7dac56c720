package zktest

import (
	"testing"
	"time"
)

// TestWholeFreezeResumesLeaderLast freezes every server of an ensemble
// and resumes them leader first, the order most likely to stall
// ZooKeeper 3.8.0 (see freeze.go): the leader must be continued only
// after the others elected another, so that the ensemble serves with a
// new leader and the old one follows it. (Without the rule, the old
// leader led again in two of three tries.) A leader frozen alone is
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
	if now := e.WaitLeader(15 * time.Second); now == lead {
		t.Errorf("server %d leads again: it was resumed before the others elected another", e.Servers[lead].ID)
	}
}
