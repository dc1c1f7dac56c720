package proctest_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

// helperEnv makes the test binary, started as a child, act as a server:
// it listens on the port in the variable, or exits at once when the port
// is taken, as a real server does.
const helperEnv = "PROCTEST_HELPER_PORT"

func TestMain(m *testing.M) {
	if port := os.Getenv(helperEnv); port != "" {
		ln, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			fmt.Println(err) // "bind: address already in use"
			os.Exit(1)
		}
		fmt.Println("listening")
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(0)
			}
			_ = c.Close()
		}
	}
	os.Exit(m.Run())
}

// startHelper starts the helper server on port and waits until it says
// it listens; an exit while starting is proctest.ErrPortTaken.
func startHelper(t *testing.T, port int) (*proctest.Proc, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+strconv.Itoa(port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p, err := proctest.Start(cmd, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = p.Kill(10 * time.Second) })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "listening\n" {
		<-p.Done()
		return nil, fmt.Errorf("%w: helper on %d exited while starting: %s", proctest.ErrPortTaken, port, line)
	}
	return p, nil
}

// TestStartOnFreePortsRetriesTakenPort: the first set of ports is taken
// (by this test) between FreePorts and the server's bind; the server exits
// at start, and StartOnFreePorts starts it again on new ports, where it
// serves. Pause, Resume and Kill then act on that process.
func TestStartOnFreePortsRetriesTakenPort(t *testing.T) {
	var tried []int
	var p *proctest.Proc
	err := proctest.StartOnFreePorts(1, func(ports []int) error {
		tried = append(tried, ports[0])
		if len(tried) == 1 {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(ports[0]))
			if err != nil {
				t.Fatalf("taking port %d: %v", ports[0], err)
			}
			defer ln.Close()
		}
		var err error
		p, err = startHelper(t, ports[0])
		return err
	})
	if err != nil {
		t.Fatalf("StartOnFreePorts: %v (ports tried: %v)", err, tried)
	}
	if len(tried) != 2 || tried[0] == tried[1] {
		t.Fatalf("ports tried: %v; want the taken one, then another", tried)
	}
	if err := p.Pause(); err != nil || !p.Paused() {
		t.Fatalf("pause: %v (paused %v)", err, p.Paused())
	}
	if err := p.Resume(); err != nil || p.Paused() {
		t.Fatalf("resume: %v", err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(10 * time.Second); err != nil || !p.Exited() {
		t.Fatalf("kill of a paused process: %v (exited %v)", err, p.Exited())
	}
}

// TestStartOnFreePortsOtherError: an error that is not a taken port is
// returned at once, without another attempt.
func TestStartOnFreePortsOtherError(t *testing.T) {
	calls := 0
	boom := errors.New("boom")
	err := proctest.StartOnFreePorts(2, func([]int) error { calls++; return boom })
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("err %v after %d calls; want boom after 1", err, calls)
	}
}

// TestFreePortsBelowEphemeralRange: the ports are distinct and, where the
// kernel's ephemeral range leaves room below it, outside it, so neither an
// outgoing connection nor a listener on port 0 can take them meanwhile.
func TestFreePortsBelowEphemeralRange(t *testing.T) {
	ps, err := proctest.FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	var lo int
	_, _ = fmt.Sscan(string(b), &lo)
	seen := map[int]bool{}
	for _, p := range ps {
		if seen[p] {
			t.Fatalf("port %d twice in %v", p, ps)
		}
		seen[p] = true
		if lo > 11000 && p >= lo {
			t.Errorf("port %d in the ephemeral range from %d", p, lo)
		}
	}
}
