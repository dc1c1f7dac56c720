package etcdtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

const (
	// Members is the size of the cluster Start launches unless
	// WithMembers says otherwise.
	Members = 3
	// HeartbeatMS and ElectionMS are the members' raft timings.
	HeartbeatMS, ElectionMS = 50, 500
	// startTimeout bounds a (re)start until the member reports healthy.
	startTimeout = 30 * time.Second
	// killTimeout bounds the wait for a SIGKILLed member to be reaped.
	killTimeout = 10 * time.Second
)

// Cluster is a running etcd cluster (Members members, or WithMembers)
// owned by a test. Methods that can fail call t.Fatalf: call them from
// the test's goroutine.
type Cluster struct {
	t       testing.TB
	bin     string
	size    int // members to start
	members []*member
	tlsOn   bool
	tls     *TLS

	// termMu guards termConns, one connection per member for ReadTerms.
	termMu    sync.Mutex
	termConns []pb.MaintenanceClient
}

// member is one etcd process and its fixed ports and directory.
type member struct {
	name, dir, log   string
	client, peer     int
	mu               sync.Mutex
	proc             *proctest.Proc // nil while killed
	initialCluster   string
	initialClusterTk string
}

// Binary returns the path of etcd, failing the test when it is missing.
func Binary(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/etcd"); err == nil {
		return "/usr/bin/etcd"
	}
	p, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("etcdtest: no etcd binary at /usr/bin/etcd or on PATH (apt-get install etcd-server): %v", err)
	}
	return p
}

// WithMembers makes Start launch a cluster of n members (at least 1)
// instead of Members: one serves a test that faults no member and only
// needs an etcd to talk to, at a third of the processes.
func WithMembers(n int) Option { return func(c *Cluster) { c.size = max(n, 1) } }

// Start launches a cluster (Members members unless WithMembers) and
// waits until every member is healthy (knows a leader). t.Cleanup kills every member.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{t: t, bin: Binary(t), size: Members}
	for _, o := range opts {
		o(c)
	}
	if c.tlsOn {
		c.tls = newTLS(t)
	}
	_ = t.TempDir() // its removal runs after killAll (see zktest.StartWith)
	t.Cleanup(c.killAll)
	if err := proctest.StartOnFreePorts(2*c.size, c.tryStart); err != nil {
		t.Fatalf("etcdtest: starting the cluster: %v", err)
	}
	return c
}

// tryStart starts the members on ports (client and peer port each) and
// waits until they are healthy; on failure it kills them.
func (c *Cluster) tryStart(ports []int) error {
	var peers []string
	c.members = nil
	for i := range c.size {
		m := &member{name: fmt.Sprintf("m%d", i), client: ports[2*i], peer: ports[2*i+1]}
		m.dir = filepath.Join(c.t.TempDir(), "data")
		m.log = filepath.Join(filepath.Dir(m.dir), "etcd.log")
		peers = append(peers, fmt.Sprintf("%s=http://127.0.0.1:%d", m.name, m.peer))
		c.members = append(c.members, m)
	}
	err := func() error {
		for _, m := range c.members {
			m.initialCluster = strings.Join(peers, ",")
			m.initialClusterTk = fmt.Sprintf("etcdtest-%d", c.members[0].client)
			if err := c.spawn(m); err != nil {
				return err
			}
		}
		for _, m := range c.members {
			if err := c.waitHealthy(m); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		c.killAll()
	}
	return err
}

func (c *Cluster) spawn(m *member) error {
	u := func(p int) string { return "http://127.0.0.1:" + strconv.Itoa(p) }
	cu := c.scheme() + "://127.0.0.1:" + strconv.Itoa(m.client)
	args := []string{"--name", m.name, "--data-dir", m.dir,
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", u(m.peer), "--initial-advertise-peer-urls", u(m.peer),
		"--initial-cluster", m.initialCluster, "--initial-cluster-state", "new",
		"--initial-cluster-token", m.initialClusterTk,
		"--heartbeat-interval", strconv.Itoa(HeartbeatMS), "--election-timeout", strconv.Itoa(ElectionMS),
		"--logger", "zap", "--log-level", "warn"}
	if c.tls != nil {
		args = append(args, "--cert-file", c.tls.CertFile, "--key-file", c.tls.KeyFile,
			"--trusted-ca-file", c.tls.CAFile, "--client-cert-auth")
	}
	out, err := os.OpenFile(m.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	p, err := proctest.Start(cmd, nil)
	if err != nil {
		return fmt.Errorf("etcdtest: %s: %w", m.name, err)
	}
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
	return nil
}

func (c *Cluster) scheme() string {
	if c.tls != nil {
		return "https"
	}
	return "http"
}

// TLS returns the CA and client certificate files of a WithTLS cluster
// (nil without WithTLS).
func (c *Cluster) TLS() *TLS { return c.tls }

// clientTLS is the TLS configuration of the kit's own clients.
func (c *Cluster) clientTLS() *tls.Config {
	if c.tls == nil {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(c.tls.CertFile, c.tls.KeyFile)
	if err != nil {
		c.t.Fatalf("etcdtest: %v", err)
	}
	pem, err := os.ReadFile(c.tls.CAFile)
	if err != nil {
		c.t.Fatalf("etcdtest: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

// waitHealthy polls the member's /health until it reports true.
func (c *Cluster) waitHealthy(m *member) error {
	hc := http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: c.clientTLS()}}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(startTimeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		m.mu.Lock()
		p := m.proc
		m.mu.Unlock()
		if p == nil || p.Exited() {
			return fmt.Errorf("etcdtest: %w: %s exited during start:\n%s", proctest.ErrPortTaken, m.name, tail(m.log))
		}
		resp, err := hc.Get(fmt.Sprintf("%s://127.0.0.1:%d/health", c.scheme(), m.client))
		if err == nil {
			var b [256]byte
			n, _ := resp.Body.Read(b[:])
			_ = resp.Body.Close()
			last = string(b[:n])
			if strings.Contains(last, `"health":"true"`) {
				return nil
			}
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	err := fmt.Errorf("etcdtest: %s not healthy within %s (last: %s):\n%s", m.name, startTimeout, last, tail(m.log))
	if proctest.AddrInUse(tail(m.log)) {
		err = fmt.Errorf("%w: %w", proctest.ErrPortTaken, err)
	}
	return err
}

func tail(path string) string { return proctest.Tail(20, path) }

// Endpoints returns the members' client URLs, http://127.0.0.1:port.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i := range c.members {
		eps[i] = c.Endpoint(i)
	}
	return eps
}

// Endpoint returns member i's client URL.
func (c *Cluster) Endpoint(i int) string {
	return c.scheme() + "://127.0.0.1:" + strconv.Itoa(c.members[i].client)
}

// Proxies starts one netproxy.Proxy per member and returns them with the
// client URLs that go through them: a client opened on those URLs can be
// cut off or blackholed alone, the cluster and other clients unaffected.
func (c *Cluster) Proxies() ([]*netproxy.Proxy, []string) {
	var ps []*netproxy.Proxy
	var eps []string
	for i := range c.members {
		p := netproxy.New(c.t, "127.0.0.1:"+strconv.Itoa(c.members[i].client))
		ps = append(ps, p)
		eps = append(eps, c.scheme()+"://"+p.Addr())
	}
	return ps, eps
}

// Client returns a client of every member (with the cluster's TLS files;
// user "" for none); t.Cleanup closes it.
func (c *Cluster) Client(user, password string) *clientv3.Client {
	c.t.Helper()
	cli := c.newClient(user, password)
	c.t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func (c *Cluster) newClient(user, password string) *clientv3.Client {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second,
		TLS: c.clientTLS(), Username: user, Password: password, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatalf("etcdtest: client: %v", err)
	}
	return cli
}

// EnableAuth creates the root user with password and turns etcd's
// authentication on: from then on clients must log in.
func (c *Cluster) EnableAuth(password string) {
	c.t.Helper()
	cli := c.newClient("", "")
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cli.UserAdd(ctx, "root", password); err != nil {
		c.t.Fatalf("etcdtest: add root: %v", err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		c.t.Fatalf("etcdtest: grant root: %v", err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		c.t.Fatalf("etcdtest: enable auth: %v", err)
	}
}

// Leader returns the index of the member that leads, polling up to 10 s
// (an election may be under way); it asks the running, unpaused members.
func (c *Cluster) Leader() int {
	c.t.Helper()
	cli := c.newClient("", "")
	defer cli.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ids := map[uint64]int{}
		var lead uint64
		for i, m := range c.members {
			if !m.up() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cli.Status(ctx, c.Endpoint(i))
			cancel()
			if err == nil {
				ids[st.Header.MemberId] = i
				if st.Leader != 0 {
					lead = st.Leader
				}
			}
		}
		if i, ok := ids[lead]; ok && lead != 0 {
			return i
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("etcdtest: no leader among the running members within 10s")
	return -1
}

// Terms is what the members said of their raft term at one read.
type Terms struct {
	// Highest is the highest term a member reported; Led the highest
	// term at which a member knew a leader (a candidate that never wins
	// raises the term, not Led).
	Highest, Led uint64
	// Answered is how many members answered.
	Answered int
}

// ReadTerms asks every running, unpaused member at once for its raft
// term and leader, within timeout each, through one connection per
// member kept for these reads (closed by t.Cleanup).
func (c *Cluster) ReadTerms(timeout time.Duration) Terms {
	c.termMu.Lock()
	if c.termConns == nil {
		for i := range c.members {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Endpoint(i)}, DialTimeout: 2 * time.Second,
				TLS: c.clientTLS(), Logger: zap.NewNop()})
			if err != nil {
				c.termMu.Unlock()
				c.t.Errorf("etcdtest: client of member %d: %v", i, err)
				return Terms{}
			}
			c.t.Cleanup(func() { _ = cli.Close() })
			c.termConns = append(c.termConns, pb.NewMaintenanceClient(cli.ActiveConnection()))
		}
	}
	conns := c.termConns
	c.termMu.Unlock()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var out Terms
	for i, m := range c.members {
		if !m.up() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			st, err := conns[i].Status(ctx, &pb.StatusRequest{})
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			out.Answered++
			out.Highest = max(out.Highest, st.Header.RaftTerm)
			if st.Leader != 0 {
				out.Led = max(out.Led, st.Header.RaftTerm)
			}
		}()
	}
	wg.Wait()
	return out
}

// up reports whether the member runs and is not paused.
func (m *member) up() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc != nil && !m.proc.Paused()
}
