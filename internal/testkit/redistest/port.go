package redistest

import (
	"fmt"
	"net"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. As
// with any such helper, another process may take it before the caller binds
// it; Start and StartRedisCluster retry on a new port when that happens.
func FreePort(t testing.TB) int {
	t.Helper()
	ps, err := freePorts(1)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return ps[0]
}

// freePorts returns n distinct free loopback ports. It holds all listeners
// until every port is chosen, so the ports differ from each other.
func freePorts(n int) ([]int, error) {
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
