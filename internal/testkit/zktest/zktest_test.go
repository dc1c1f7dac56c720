package zktest

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestEnsemble starts 3 servers, finds the leader, writes through one
// server and reads through another, kills and restarts the leader (the
// data survives), and pauses a follower.
func TestEnsemble(t *testing.T) {
	e := Start(t, 3)
	lead := e.Leader()
	if lead < 0 {
		t.Fatal("no leader")
	}
	c, _, err := zk.Connect(e.Addrs()[:1], 2*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create("/zktest", []byte("kept"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	e.Servers[lead].Kill()
	e.Servers[lead].Restart()
	other := (lead + 1) % 3
	c2, _, err := zk.Connect([]string{e.Servers[lead].Addr()}, 2*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Sync("/zktest"); err != nil {
		t.Fatal(err)
	}
	b, _, err := c2.Get("/zktest")
	if err != nil || string(b) != "kept" {
		t.Fatalf("after the leader's restart: %q, %v", b, err)
	}
	e.Servers[other].Pause()
	if m := e.Servers[other].Mode(); m != "" {
		t.Errorf("paused server answers srvr: %q", m)
	}
	e.Servers[other].Resume()
	if e.Leader() < 0 {
		t.Error("no leader after the pause")
	}
}
