package main

import (
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// TestStatusSlowFirstContact: status reports every node of a healthy
// cluster reachable when the first contact with each — the dial and the
// connection's set-up, three round trips on Redis (INFO, the script
// loads, the data marker) — takes longer than the health check's 1 s
// bound: the command connects first, within --timeout. Each node is
// behind a proxy that delays everything 150 ms each way: a round trip
// takes 300 ms, under status's 500 ms request timeout, and the first
// contact with the check after it 1.2 s. Without the first connection
// the same test sees the nodes unreachable.
func TestStatusSlowFirstContact(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 3)
	for _, n := range cl.Nodes {
		n.Proxy().SetDelay(150 * time.Millisecond)
	}
	path := writeConfig(t, fleetConfig(cl.ProxiedURLs(), `  - name: nightly
    schedule: "@daily"
    shell: "true"
`))
	st := readStatus(t, path)
	for _, n := range st.Nodes {
		if !n.OK {
			t.Errorf("node %s reported unreachable: %s", n.Node, n.Err)
		}
	}
}
