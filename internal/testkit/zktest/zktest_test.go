package zktest

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestEnsemble starts 3 servers, finds the leader, writes through one
// server and reads through another, kills and restarts the leader (the
// data survives), and pauses a follower.
func TestEnsemble(t *testing.T) {
	e := Start(t, 3)
	lead := e.WaitLeader(15 * time.Second)
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
	if e.WaitLeader(15*time.Second) < 0 {
		t.Error("no leader after the pause")
	}
}

// TestStartRetriesTakenPort: the client port chosen for the first attempt
// is taken (by this test) before the server binds it; the server exits
// while starting, and Start starts it again on new ports, where it
// serves.
func TestStartRetriesTakenPort(t *testing.T) {
	var attempts [][]int
	takePortsHook = func(ports []int) func() {
		attempts = append(attempts, ports)
		if len(attempts) > 1 {
			return func() {}
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(ports[0]))
		if err != nil {
			t.Fatalf("taking port %d: %v", ports[0], err)
		}
		return func() { _ = ln.Close() }
	}
	t.Cleanup(func() { takePortsHook = nil })
	e := Start(t, 1)
	if len(attempts) != 2 {
		t.Fatalf("%d start attempts (ports %v); want 2: the taken port, then new ones", len(attempts), attempts)
	}
	if got, want := e.Addrs()[0], "127.0.0.1:"+strconv.Itoa(attempts[1][0]); got != want {
		t.Fatalf("serving on %s, want the second attempt's %s", got, want)
	}
	if m := e.Servers[0].Mode(); m != "standalone" {
		t.Fatalf("mode %q, want standalone", m)
	}
}
