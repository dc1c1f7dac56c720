// Package proctest holds what every server test kit needs to run real
// server processes for tests (redistest, pgtest, etcdtest, zktest): free
// loopback ports, a parent-death signal so that a test binary that dies
// leaves no server behind, and a wait for SIGSTOP to take effect.
package proctest

import (
	"errors"
	"fmt"
	"net"
	"time"
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

// RestartOnSamePort calls spawn until it succeeds, for up to timeout while
// it fails with busy (the server's port, just freed by a killed process,
// is briefly still taken), 100 ms apart. It returns spawn's last error.
func RestartOnSamePort(timeout time.Duration, busy error, spawn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := spawn()
		if err == nil || !errors.Is(err, busy) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
