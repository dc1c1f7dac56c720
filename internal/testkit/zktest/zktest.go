// Package zktest runs real ZooKeeper servers for tests, in the spirit of
// httptest.NewServer and of internal/testkit/redistest: a test asks for a
// standalone server or a 3-server ensemble, gets the client addresses, and
// everything is torn down by t.Cleanup.
//
// The servers come from Debian's zookeeper package (the JVM runs
// org.apache.zookeeper.server.quorum.QuorumPeerMain with
// /usr/share/java/zookeeper.jar), each on its own free 127.0.0.1 ports,
// with its config, data and log in its own t.TempDir(). tickTime is short
// (100 ms) so that elections and session timeouts are quick; the
// negotiable session timeout ranges from 2 ticks to 60 s (StartWith: to
// Options.MaxSessionTimeout). Servers can be killed, restarted on the
// same ports with their data, and paused with SIGSTOP (an ensemble frozen
// whole is resumed leader last: see freeze.go). ZooKeeper writes
// its transaction log to the operating system before it acknowledges a
// write; forceSync=no spares the flush to disk, which only a crash of the
// machine would need (the tests kill processes, never the machine) and
// whose stalls on a loaded machine stalled every store at once.
//
// Every process is started by this package and killed by its PID (SIGCONT
// first if paused, then SIGKILL), and also started with Pdeathsig=SIGKILL,
// so a test binary that dies without its cleanups leaves none behind.
// Without java or the zookeeper package the test fails with a message that
// says how to install it; tests are never skipped.
package zktest

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

// Jar is the ZooKeeper server jar of Debian's zookeeper package.
const Jar = "/usr/share/java/zookeeper.jar"

// TickTime is the ensemble's tick: sessions may be as short as 2 ticks.
const TickTime = 100 * time.Millisecond

// startTimeout bounds how long a server (or an ensemble's election) may
// take to serve clients; a loaded 2-core machine starts a JVM slowly.
const startTimeout = 60 * time.Second

// killTimeout bounds the wait for a SIGKILLed server to be reaped.
const killTimeout = 10 * time.Second

// Ensemble is a running standalone server (1) or quorum ensemble (3, 5).
type Ensemble struct {
	t       testing.TB
	Servers []*Server

	frozen freezeState // a freeze of the whole ensemble (freeze.go)
}

// Server is one ZooKeeper server process of an Ensemble.
type Server struct {
	t          testing.TB
	ID         int // its myid, 1-based
	dir        string
	clientPort int
	opts       Options
	e          *Ensemble // the ensemble the server belongs to

	mu   sync.Mutex
	proc *proctest.Proc // nil before the first start
}

// Options are settings of the servers that tests vary.
type Options struct {
	// MaxSessionTimeout is the servers' maxSessionTimeout, the longest
	// session they grant (rounded down to the millisecond); 0: 60 s.
	MaxSessionTimeout time.Duration
}

// Start starts n ZooKeeper servers (n = 1: standalone; otherwise a quorum
// ensemble) and waits until every one serves clients. When a server exits
// while starting (a chosen port was taken meanwhile), the whole ensemble
// starts again on new ports (see proctest.StartOnFreePorts).
func Start(t testing.TB, n int) *Ensemble {
	t.Helper()
	return StartWith(t, n, Options{})
}

// StartWith is Start with the servers configured by o.
func StartWith(t testing.TB, n int, o Options) *Ensemble {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil || fileMissing(Jar) {
		t.Fatalf("zktest: ZooKeeper is not installed (need java and %s): apt-get install zookeeper", Jar)
	}
	e := &Ensemble{t: t}
	// The test's temporary directory (the servers' directories are in it)
	// is removed by a cleanup registered at its first use; cleanups run
	// last in, first out, so it must be registered before killAll, or a
	// server still writing makes its removal fail.
	_ = t.TempDir()
	t.Cleanup(e.killAll)
	if err := proctest.StartOnFreePorts(3*n, func(ports []int) error { return e.tryStart(n, ports, o) }); err != nil {
		t.Fatalf("zktest: %v", err)
	}
	// Registered after the servers' directories: it runs before they go.
	t.Cleanup(e.logIfFailed)
	warnLogsLost(t)
	return e
}

// takePortsHook, set by this package's tests only, is called with the
// ports of each start attempt before the servers spawn; the function it
// returns is called when the attempt is over.
var takePortsHook func(ports []int) (release func())

// tryStart starts n servers on ports (3 a server: client, quorum,
// election), each in a start slot while its JVM boots (spawnInSlot), and
// waits until they serve; on failure it kills them.
func (e *Ensemble) tryStart(n int, ports []int, o Options) error {
	if takePortsHook != nil {
		defer takePortsHook(ports)()
	}
	var peers strings.Builder
	if n > 1 {
		for i := range n {
			fmt.Fprintf(&peers, "server.%d=127.0.0.1:%d:%d\n", i+1, ports[3*i+1], ports[3*i+2])
		}
	}
	e.Servers = nil
	for i := range n {
		s := &Server{t: e.t, e: e, ID: i + 1, dir: e.t.TempDir(), clientPort: ports[3*i], opts: o}
		if err := s.writeConfig(peers.String()); err != nil {
			return err
		}
		e.Servers = append(e.Servers, s)
	}
	var booting sync.WaitGroup
	defer booting.Wait()
	err := func() error {
		for _, s := range e.Servers {
			if err := s.spawnInSlot(&booting); err != nil {
				return err
			}
		}
		for _, s := range e.Servers {
			if err := s.waitServing(); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		e.killAll()
	}
	return err
}

func (e *Ensemble) killAll() {
	e.frozen.forget() // a leader left deferred is killed with the rest
	for _, s := range e.Servers {
		s.kill()
	}
}

// Addrs returns the servers' client addresses (host:port).
func (e *Ensemble) Addrs() []string {
	out := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		out[i] = s.Addr()
	}
	return out
}

// Leader returns the index in Servers of the current leader (the only
// server of a standalone ensemble), or -1 if none answers as leader.
// Paused servers are not asked (they would not answer).
func (e *Ensemble) Leader() int {
	for i, s := range e.Servers {
		if s.paused() {
			continue
		}
		if m := s.Mode(); m == "leader" || m == "standalone" {
			return i
		}
	}
	return -1
}

// WaitLeader asks for the leader (see Leader) until one answers, for up
// to within: on a loaded machine a server can take more than the second
// a four-letter word is given to answer. It returns -1 if none did.
func (e *Ensemble) WaitLeader(within time.Duration) int {
	for end := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
		if l := e.Leader(); l >= 0 || time.Now().After(end) {
			return l
		}
	}
}

func (s *Server) writeConfig(peers string) error {
	data := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(s.ID)+"\n"), 0o644); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`tickTime=%d
initLimit=50
syncLimit=20
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
minSessionTimeout=%d
maxSessionTimeout=%d
4lw.commands.whitelist=srvr,ruok,mntr
admin.enableServer=false
forceSync=no
%s`, TickTime.Milliseconds(), data, s.clientPort, 2*TickTime.Milliseconds(), cmp.Or(s.opts.MaxSessionTimeout, time.Minute).Milliseconds(), peers)
	if err := os.WriteFile(filepath.Join(s.dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return err
	}
	return s.writeLogConfig()
}

// spawn starts the server process (the config is written already).
func (s *Server) spawn() error {
	out, err := os.OpenFile(filepath.Join(s.dir, "stdout.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	// A small heap, the serial GC and the client JIT: several servers on a
	// 2-core test machine start faster and stay small.
	cmd := exec.Command("java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.log.dir="+s.dir, "-cp", strings.Join([]string{s.dir, Jar, logBinding, log4jJar}, ":"),
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(s.dir, "zoo.cfg"))
	cmd.Stdout, cmd.Stderr = out, out
	p, err := proctest.Start(cmd, nil)
	if err != nil {
		return fmt.Errorf("zookeeper %d: %w", s.ID, err)
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

// waitServing waits until the server answers srvr with a mode (leader,
// follower or standalone): it has joined a quorum and serves clients. An
// exit while starting, or a log saying a port was taken, is
// proctest.ErrPortTaken.
func (s *Server) waitServing() error {
	end := time.Now().Add(startTimeout)
	for time.Now().Before(end) {
		if s.Mode() != "" {
			return nil
		}
		select {
		case <-s.exited():
			return fmt.Errorf("%w: server %d exited while starting; log:\n%s", proctest.ErrPortTaken, s.ID, s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
	err := fmt.Errorf("server %d not serving after %s; log:\n%s", s.ID, startTimeout, s.logTail())
	if proctest.AddrInUse(s.logTail()) {
		err = fmt.Errorf("%w: %w", proctest.ErrPortTaken, err)
	}
	return err
}

func (s *Server) exited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.proc.Done()
}

// Addr returns the client address, 127.0.0.1:PORT.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.clientPort) }

// PID returns the server's process ID (0 when it is not running).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.Exited() {
		return 0
	}
	return s.proc.PID()
}

// Mode asks the server (four-letter word srvr) for its mode: "leader",
// "follower", "standalone", or "" when it does not serve clients.
func (s *Server) Mode() string {
	for _, line := range s.fourLetter("srvr") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

// Kill SIGKILLs the server and waits for it to exit.
func (s *Server) Kill() {
	s.t.Helper()
	s.kill()
}

func (s *Server) kill() {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return
	}
	if err := p.Kill(killTimeout); err != nil {
		s.t.Errorf("zktest: server %d: %v", s.ID, err)
	}
	s.killed()
}

// Restart starts a killed server again on the same ports with its data,
// and waits until it serves clients (in an ensemble: until it rejoined a
// quorum, so restart a majority of a stopped ensemble with Start and wait
// with Ensemble.WaitServing instead).
func (s *Server) Restart() {
	s.t.Helper()
	s.Start()
	if err := s.waitServing(); err != nil {
		s.t.Fatalf("zktest: %v", err)
	}
}

// Start starts a killed server again on the same ports with its data,
// without waiting for it to serve.
func (s *Server) Start() {
	s.t.Helper()
	s.kill()
	if err := s.spawn(); err != nil {
		s.t.Fatalf("zktest: %v", err)
	}
}

// WaitServing waits until every server of the ensemble serves clients.
func (e *Ensemble) WaitServing() {
	e.t.Helper()
	for _, s := range e.Servers {
		if err := s.waitServing(); err != nil {
			e.t.Fatalf("zktest: %v", err)
		}
	}
}

func fileMissing(p string) bool {
	_, err := os.Stat(p)
	return err != nil
}
