// Package proctest holds what every server test kit needs to run real
// server processes for tests (redistest, pgtest, etcdtest, zktest): free
// loopback ports, a parent-death signal so that a test binary that dies
// leaves no server behind, and a wait for SIGSTOP to take effect.
package proctest

import (
	"fmt"
	"net"
)

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago. It holds every listener until all n are chosen, so the
// ports differ from each other. As with any such helper, another process
// may take a port before the caller binds it: callers retry on a new port.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
