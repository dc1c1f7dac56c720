// Package proctest holds what every server test kit needs to run real
// server processes for tests (redistest, pgtest, etcdtest, zktest): free
// loopback ports and a start that retries on new ports when one was taken,
// start slots that keep the machine's test processes from booting more
// servers at once than it has CPUs (StartSlot), a process handle
// (parent-death signal, pause and resume, kill and reap), and the tail of
// a server's log for failure messages.
package proctest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// portFloor is the lowest port FreePorts picks: above the well-known and
// registered services a test machine may run.
const portFloor = 10000

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago. It picks them at random below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), where neither outgoing connections nor
// listeners on port 0 ever land, so the usual thief of a released port is
// ruled out; it holds every listener until all n are chosen, so the ports
// differ from each other. Another test process using this package may
// still pick the same port before the caller binds it: start servers with
// StartOnFreePorts, which retries on new ports.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	lo, hi := portFloor, ephemeralLow()
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if hi-lo >= 1000 && tries < 100*n {
			addr = "127.0.0.1:" + strconv.Itoa(lo+rand.IntN(hi-lo))
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if addr != "127.0.0.1:0" {
				continue // taken: try another
			}
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ephemeralLow returns the first port of the kernel's ephemeral range
// (0 when it cannot be read: FreePorts then asks the kernel for ports).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return lo
}

// ErrPortTaken marks a start that failed because a port chosen for the
// server was taken before it could bind it: its log says "Address already
// in use", or it exited while starting (on ports that were free a moment
// before, a taken port is what makes a server exit at start).
var ErrPortTaken = errors.New("a port was taken before the server bound it")

// StartAttempts is how many sets of fresh ports StartOnFreePorts tries.
const StartAttempts = 5

// StartOnFreePorts calls start with n fresh free ports (see FreePorts),
// again with new ports for as long as start fails with ErrPortTaken, up to
// StartAttempts times. start must stop whatever it started before it
// returns an error. It returns start's last error.
func StartOnFreePorts(n int, start func(ports []int) error) error {
	var err error
	for range StartAttempts {
		var ports []int
		if ports, err = FreePorts(n); err != nil {
			return err
		}
		if err = start(ports); err == nil || !errors.Is(err, ErrPortTaken) {
			return err
		}
	}
	return fmt.Errorf("%d sets of ports tried: %w", StartAttempts, err)
}

// AddrInUse reports whether a server's log says a port was taken.
func AddrInUse(log string) bool {
	return strings.Contains(log, "Address already in use") || strings.Contains(log, "address already in use")
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

// Tail returns the last n lines of the files at paths, one after the
// other (a file that cannot be read adds nothing).
func Tail(n int, paths ...string) string {
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		b.WriteString(strings.Join(lines[max(0, len(lines)-n):], "\n") + "\n")
	}
	return b.String()
}
