package main

import (
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// statusConfig writes a config whose nodes are cl's, through their
// proxies, with one job.
func statusConfig(t *testing.T, cl *redistest.Cluster) string {
	t.Helper()
	return writeConfig(t, fleetConfig(cl.ProxiedURLs(), `  - name: nightly
    schedule: "@daily"
    shell: "true"
`))
}

// TestStatusSlowFirstContact: status reports every node of a healthy
// cluster reachable when the first contact with each takes longer than
// the health check's and the store reads' 1 s bound: the command opens
// its connections first, within --timeout. Each node is behind a proxy
// that delays everything 150 ms each way, so a round trip takes 300 ms
// (under status's 500 ms request timeout) and a cold connection's first
// request 1.5 s or more (HELLO, INFO, the script loads, the data marker,
// then the request). Without the first contact, every read of the same
// test fails on every node.
func TestStatusSlowFirstContact(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 3)
	for _, n := range cl.Nodes {
		n.Proxy().SetDelay(150 * time.Millisecond)
	}
	st := readStatus(t, statusConfig(t, cl))
	for _, n := range st.Nodes {
		if !n.OK {
			t.Errorf("node %s reported unreachable: %s", n.Node, n.Err)
		}
	}
}

// TestStatusFirstContactLeavesTimeToRead: a node that accepts connections
// but never answers (its proxy swallows everything) holds the first
// contact up for as long as it may, which is a third of --timeout: with
// --timeout 3s, status still reads the fleet's state from the other two
// and reports them reachable, the silent one not. It returns within its
// --timeout and a second (the end of a command on a loaded machine): the
// client's close does not wait for the silent node's reads, which once
// kept every run 2 s longer (4.5 s in all). A run slowed by the machine
// is tried once more; the old wait made each run slow.
func TestStatusFirstContactLeavesTimeToRead(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 3)
	cl.Nodes[2].Proxy().Blackhole(true)
	path := statusConfig(t, cl)
	st := readStatus(t, path, "--timeout", "3s")
	var took []time.Duration
	for range 2 {
		t0 := time.Now()
		cli(t, "status", "-c", path, "--timeout", "3s")
		if took = append(took, time.Since(t0)); took[len(took)-1] <= 4*time.Second {
			break
		}
	}
	if len(took) == 2 && took[1] > 4*time.Second {
		t.Errorf("status --timeout 3s took %v", took)
	}
	for i, n := range st.Nodes {
		if n.OK != (i < 2) {
			t.Errorf("node %d (%s): reachable %v; want only the silent node 2 unreachable", i, n.Node, n.OK)
		}
	}
}
