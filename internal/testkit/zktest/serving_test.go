package zktest

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestServingMeansWrites: a 3-server ensemble serves once started; with
// its leader frozen it stops serving, and once Serving says it serves
// again, a write through another server succeeds at once.
func TestServingMeansWrites(t *testing.T) {
	e := Start(t, 3)
	waitServing(t, e)
	l := e.WaitLeader(15 * time.Second)
	other := e.Servers[(l+1)%3]
	conn, _, err := zk.Connect([]string{other.Addr()}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Create("/probe", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	e.Servers[l].Pause()
	defer e.Servers[l].Resume()
	end := time.Now().Add(30 * time.Second)
	for e.Servers[(l+2)%3].Mode() == "follower" && other.Mode() == "follower" && time.Now().Before(end) {
		time.Sleep(20 * time.Millisecond) // the followers see the leader gone
	}
	for !e.Serving() {
		if time.Now().After(end) {
			t.Fatal("no leader with a quorum synchronised within 30s of the leader's freeze")
		}
		time.Sleep(20 * time.Millisecond)
	}
	done := make(chan error, 1)
	go func() { _, err := conn.Set("/probe", []byte("x"), -1); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("write once the ensemble serves again: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Error("no write within 3s of the ensemble serving again")
	}
}

// TestServingNotOnALeadersWord: with both followers frozen, the leader
// goes on answering as leader with its followers synchronised for up to
// syncLimit ticks (2 s) — the control: its word, asked at once, says it
// serves — but takes no write, and the session Serving opens says so.
func TestServingNotOnALeadersWord(t *testing.T) {
	e := Start(t, 3)
	waitServing(t, e)
	l := e.WaitLeader(15 * time.Second)
	if l < 0 {
		t.Fatal("no leader")
	}
	for i := range e.Servers {
		if i != l {
			e.Servers[i].Pause()
			defer e.Servers[i].Resume()
		}
	}
	if !e.leaderSaysServing() {
		t.Fatal("control: the leader gave up its followers at once; the test shows nothing")
	}
	if e.opensSession() {
		t.Error("a session opened with both followers frozen")
	}
}

// waitServing waits up to 30 s for e to serve: on a loaded machine one
// question can come too early or time out.
func waitServing(t *testing.T, e *Ensemble) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !e.Serving(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("a started ensemble does not serve within 30s")
		}
	}
}
