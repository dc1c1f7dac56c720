package redistest

import (
	"errors"
	"os/exec"
	"sync"
	"testing"
)

// Cluster is a set of independent redis-server masters started by Start
// (not a Redis Cluster; see StartRedisCluster for that). Nodes[i] is the
// i-th node; kill, restart or pause them to inject faults.
type Cluster struct {
	Nodes []*Node
}

// Start starts k redis-server processes in parallel, each on a free
// 127.0.0.1 port and in its own t.TempDir(), and returns once every one
// answers PING. Without options a node has no persistence (--save "",
// --appendonly no), so a restarted node comes back empty.
//
// t.Cleanup kills exactly the processes started here (SIGCONT first if
// paused, then SIGKILL) and waits for them. If redis-server is not on PATH
// or a node does not come up, the test fails (never skips) with a message
// that says how to install redis-server or quotes the end of the node's log.
func Start(t testing.TB, k int, opts ...Option) *Cluster {
	t.Helper()
	if k < 1 {
		t.Fatalf("redistest: Start(%d): need at least one node", k)
	}
	bin := lookPath(t, "redis-server")
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	nodes := make([]*Node, k)
	for i := range nodes {
		nodes[i] = newNode(t, bin, cfg, false)
	}
	if err := startAll(nodes); err != nil {
		t.Fatalf("%v", err)
	}
	return &Cluster{Nodes: nodes}
}

// startAll starts the nodes in parallel and joins their errors.
func startAll(nodes []*Node) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.firstStart() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// URLs returns every node's URL (see Node.URL), in the order of Nodes.
func (c *Cluster) URLs() []string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.URL()
	}
	return urls
}

// TLSURLs returns every node's TLSURL (WithTLS), in the order of Nodes.
func (c *Cluster) TLSURLs() []string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.TLSURL()
	}
	return urls
}

// ProxiedURLs returns every node's URL through its Proxy (started on first
// use), in the order of Nodes. Clients built from these URLs feel the
// proxies' delay, blackhole and cut; Node.Client does not.
func (c *Cluster) ProxiedURLs() []string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.ProxiedURL()
	}
	return urls
}

// Addrs returns every node's "127.0.0.1:port", in the order of Nodes.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// lookPath finds a Redis binary or fails the test saying how to install it.
func lookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("redistest: %s not found on PATH (%v): these tests run real Redis servers; "+
			"install them with `apt-get install -y redis-server` (Debian/Ubuntu, provides redis-server and redis-cli) "+
			"or your platform's redis package", name, err)
	}
	return p
}
