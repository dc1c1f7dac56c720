package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

const (
	// startTimeout bounds how long one start (or restart) of a node may
	// take until it answers PING, including retries on a busy port.
	startTimeout = 20 * time.Second
	// killTimeout bounds the wait for a SIGKILLed process to be reaped.
	killTimeout = 10 * time.Second
	// logTailLines is how much of a node's log a failure message quotes.
	logTailLines = 30
)

// errAddrInUse marks a start that failed because the port was taken.
var errAddrInUse = fmt.Errorf("redistest: %w", proctest.ErrPortTaken)

// Node is one redis-server process owned by a test: started by Start,
// StartRedisCluster or StartSentinelGroup, killed by the test's cleanup. Its methods that can
// fail call t.Fatalf, so call them from the test's goroutine. A Node is
// safe for concurrent use otherwise.
type Node struct {
	t       testing.TB
	bin     string
	cfg     config
	cluster bool
	// sentinelConf is the config file of a Sentinel process ("" for a
	// data node); it is the first argument and the Sentinel rewrites it.
	sentinelConf string
	dir          string
	logPath      string // redis-server --logfile
	outPath      string // the process's stdout and stderr (errors before logging starts)

	// port, busPort and tlsPort are fixed once the first start succeeded.
	port    int
	busPort int // cluster bus port, 0 outside a Redis Cluster
	tlsPort int // TLS port, 0 without WithTLS

	mu     sync.Mutex
	proc   *proctest.Proc // nil while killed
	client *redis.Client
	proxy  *netproxy.Proxy
}

// newNode prepares a node in a fresh temporary directory and registers the
// cleanup that kills its process. It does not start the process.
func newNode(t testing.TB, bin string, cfg config, cluster bool) *Node {
	t.Helper()
	dir := t.TempDir()
	n := &Node{
		t:       t,
		bin:     bin,
		cfg:     cfg,
		cluster: cluster,
		dir:     dir,
		logPath: filepath.Join(dir, "redis.log"),
		outPath: filepath.Join(dir, "redis.out"),
	}
	t.Cleanup(n.cleanup)
	return n
}

// cleanup kills the process (resuming it first if paused) and closes the
// node's client.
func (n *Node) cleanup() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.client != nil {
		_ = n.client.Close()
		n.client = nil
	}
	if err := n.killLocked(); err != nil {
		n.t.Errorf("redistest: cleanup: %v", err)
	}
}

// firstStart starts the node on a fresh free port, trying another port when
// the chosen one was taken before redis-server could bind it.
func (n *Node) firstStart() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	want := 1
	if n.cluster {
		want++
	}
	if n.cfg.tls != nil {
		want++
	}
	return proctest.StartOnFreePorts(want, func(ports []int) error {
		n.port, ports = ports[0], ports[1:]
		if n.cluster {
			n.busPort, ports = ports[0], ports[1:]
		}
		if n.cfg.tls != nil {
			n.tlsPort = ports[0]
		}
		return n.spawnLocked()
	})
}

// args is the redis-server command line for the node's configuration.
func (n *Node) args() []string {
	process := []string{
		"--port", strconv.Itoa(n.port),
		"--bind", "127.0.0.1",
		"--dir", n.dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", n.logPath,
	}
	if n.sentinelConf != "" {
		return append([]string{n.sentinelConf, "--sentinel"}, process...)
	}
	aof := "no"
	if n.cfg.aof {
		aof = "yes"
	}
	args := append(process, "--save", "", "--appendonly", aof)
	if n.cfg.aof {
		args = append(args, "--appendfsync", "always")
	}
	if n.cfg.password != "" {
		args = append(args, "--requirepass", n.cfg.password)
	}
	if n.cfg.aclUser != "" {
		args = append(args, "--user", n.cfg.aclUser, "on", ">"+n.cfg.aclPass, "+@all", "~*", "&*")
	}
	if ca := n.cfg.tls; ca != nil {
		args = append(args,
			"--tls-port", strconv.Itoa(n.tlsPort),
			"--tls-cert-file", ca.certFile,
			"--tls-key-file", ca.keyFile,
			"--tls-ca-cert-file", ca.CAFile,
			"--tls-auth-clients", "no",
		)
	}
	if n.cluster {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(n.busPort),
			"--cluster-node-timeout", "5000",
		)
	}
	return append(args, n.cfg.extra...)
}

// spawnLocked starts redis-server and waits until it answers PING. On
// failure the process is killed and the error quotes the end of its log;
// it wraps errAddrInUse when the port was busy. n.mu must be held.
func (n *Node) spawnLocked() error {
	logStart := fileSize(n.logPath)
	outStart := fileSize(n.outPath)
	out, err := os.OpenFile(n.outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("redistest: node %s: %w", n.Addr(), err)
	}
	cmd := exec.Command(n.bin, n.args()...)
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = out, out
	p, err := proctest.Start(cmd, nil)
	_ = out.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("redistest: node %s: %w", n.Addr(), err)
	}
	n.proc = p

	if err := n.waitReady(p); err != nil {
		kerr := n.killLocked()
		fresh := readFrom(n.logPath, logStart) + readFrom(n.outPath, outStart)
		err = fmt.Errorf("redistest: node %s (pid %d): %w\n%s", n.Addr(), cmd.Process.Pid, err, n.logTail())
		if kerr != nil {
			err = errors.Join(err, kerr)
		}
		if proctest.AddrInUse(fresh) {
			err = errors.Join(errAddrInUse, err)
		}
		return err
	}
	return nil
}

// waitReady polls PING until it succeeds, the process exits or
// startTimeout passes.
func (n *Node) waitReady(p *proctest.Proc) error {
	c := redis.NewClient(&redis.Options{
		Addr:         n.Addr(),
		Username:     n.cfg.user(),
		Password:     n.cfg.pass(),
		DialTimeout:  500 * time.Millisecond,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		MaxRetries:   -1,
		PoolSize:     1,
	})
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-p.Done():
			return fmt.Errorf("redis-server exited during start: %v", p.Err())
		default:
		}
		// A plain dial first: go-redis logs its failed dials, and a server
		// that is still starting refuses many.
		err := dialCheck(n.Addr())
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err = c.Ping(ctx).Err()
			cancel()
		}
		if err == nil {
			// Another test's server may answer on a port we were handed
			// at the same moment: only our own process counts.
			var pid int
			pid, err = serverPID(c)
			if err == nil && pid != p.PID() {
				return fmt.Errorf("port answered by another redis-server (pid %d): %w", pid, errAddrInUse)
			}
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING within %s: %w", startTimeout, err)
		}
		select {
		case <-p.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// serverPID is the process_id the server behind c reports in INFO server.
func serverPID(c *redis.Client) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// dialCheck reports whether something accepts TCP connections at addr.
func dialCheck(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return err
	}
	return c.Close()
}

// killLocked SIGKILLs the process, resuming it first if it is paused, and
// waits until it is reaped. It does nothing if the node is not running.
// n.mu must be held.
func (n *Node) killLocked() error {
	p := n.proc
	if p == nil {
		return nil
	}
	n.proc = nil
	if err := p.Kill(killTimeout); err != nil {
		return fmt.Errorf("redistest: node %s: %w", n.Addr(), err)
	}
	return nil
}

// Addr returns the node's "127.0.0.1:port". The port stays the same across
// Restart.
func (n *Node) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port))
}

// TLSAddr returns "127.0.0.1:tlsport", the node's TLS port (WithTLS), or
// "" without TLS.
func (n *Node) TLSAddr() string {
	if n.tlsPort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.tlsPort))
}

// TLSURL returns URL for the TLS port with the scheme rediss://, or ""
// without TLS.
func (n *Node) TLSURL() string {
	if n.tlsPort == 0 {
		return ""
	}
	return "rediss" + strings.TrimPrefix(n.cfg.url(n.TLSAddr()), "redis")
}

// URL returns "redis://127.0.0.1:port/0", with the credentials of
// WithACLUser ("redis://user:pw@...") or else of WithPassword
// ("redis://:pw@...") if one was given.
func (n *Node) URL() string {
	return n.cfg.url(n.Addr())
}

// PID returns the process ID of the running redis-server, or 0 while the
// node is killed. It changes on every Restart. Never pass 0 to kill(2).
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return 0
	}
	return n.proc.PID()
}

// Kill sends SIGKILL to the node (SIGCONT first if it is paused) and waits
// until the process is gone. Killing a killed node does nothing.
func (n *Node) Kill() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.killLocked(); err != nil {
		n.t.Fatalf("%v", err)
	}
}

// Restart starts the node again on the same port and directory and waits
// until it answers PING. A running node is killed first. Without WithAOF the
// node comes back empty (no RDB is saved, no AOF written); with WithAOF it
// reloads its append-only file. A port that is briefly busy is retried for
// up to 20 s; a failure fails the test with the end of the node's log.
func (n *Node) Restart() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.killLocked(); err != nil {
		n.t.Fatalf("%v", err)
	}
	if err := proctest.RestartOnSamePort(startTimeout, errAddrInUse, n.spawnLocked); err != nil {
		n.t.Fatalf("redistest: restart: %v", err)
	}
}

// Pause stops the node with SIGSTOP, like a long GC pause or a frozen VM:
// connections stay open but nothing is answered, so requests time out.
// It returns once the kernel reports the process stopped.
func (n *Node) Pause() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		n.t.Fatalf("redistest: Pause: node %s is not running", n.Addr())
	}
	if err := n.proc.Pause(); err != nil {
		n.t.Fatalf("redistest: node %s: %v", n.Addr(), err)
	}
}

// Resume continues a paused node with SIGCONT. Resuming a node that is not
// paused does nothing.
func (n *Node) Resume() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return
	}
	if err := n.proc.Resume(); err != nil {
		n.t.Fatalf("redistest: node %s: %v", n.Addr(), err)
	}
}

// Client returns a go-redis client connected directly to the node (with its
// credentials, database 0, go-redis default timeouts), for setting up and
// checking state in tests. It is the same client on every call, survives
// Restart (it reconnects) and is closed at cleanup.
func (n *Node) Client() *redis.Client {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.client == nil {
		n.client = redis.NewClient(&redis.Options{
			Addr:     n.Addr(),
			Username: n.cfg.user(),
			Password: n.cfg.pass(),
		})
	}
	return n.client
}

// Keys returns the keys matching pattern (SCAN MATCH syntax), sorted and
// without duplicates, for "no key left behind" assertions. Unlike KEYS it
// does not block the server. A failure fails the test.
func (n *Node) Keys(pattern string) []string {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys []string
	it := n.Client().Scan(ctx, 0, pattern, 1000).Iterator()
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		n.t.Fatalf("redistest: SCAN %q on %s: %v", pattern, n.Addr(), err)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// Proxy returns the TCP proxy in front of this node, starting it on its own
// free loopback port on first use. Connect through Proxy().Addr() (or
// Cluster.ProxiedURLs) to be affected by its faults; Client and URL bypass
// it. The proxy keeps working across Restart.
func (n *Node) Proxy() *netproxy.Proxy {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proxy == nil {
		n.proxy = netproxy.New(n.t, n.Addr())
	}
	return n.proxy
}

// ProxiedURL returns URL with the host replaced by the proxy's address,
// starting the proxy if needed.
func (n *Node) ProxiedURL() string {
	n.t.Helper()
	return n.cfg.url(n.Proxy().Addr())
}

// logTail returns the last lines of the node's log and output files.
func (n *Node) logTail() string {
	s := fmt.Sprintf("--- tail of %s:\n%s", n.logPath, tail(n.logPath, logTailLines))
	if out := tail(n.outPath, logTailLines); out != "" {
		s += fmt.Sprintf("--- tail of %s:\n%s", n.outPath, out)
	}
	return s
}

// user returns the username clients log in with ("" for the default user).
func (c config) user() string { return c.aclUser }

// pass returns the password clients log in with.
func (c config) pass() string {
	if c.aclUser != "" {
		return c.aclPass
	}
	return c.password
}

// url returns the redis:// URL for addr with the configured credentials.
func (c config) url(addr string) string {
	u := url.URL{Scheme: "redis", Host: addr, Path: "/0"}
	switch {
	case c.aclUser != "":
		u.User = url.UserPassword(c.aclUser, c.aclPass)
	case c.password != "":
		u.User = url.UserPassword("", c.password)
	}
	return u.String()
}

// fileSize returns the size of path, 0 if it does not exist.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns the contents of path from offset on ("" on error).
func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return string(b)
}

// tail returns the last n lines of path, or why it cannot be read.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)\n", err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, nil))
}
