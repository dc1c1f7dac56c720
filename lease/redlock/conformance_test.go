package redlock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/leasetest"
	"github.com/leasecron/leasecron/lease/redlock"
)

// conformanceTimeout is the clients' per-node timeout: generous for a
// loaded 2-core machine, more so under the race detector. conformanceTTL
// is the suite's lease TTL, 10 × the timeout so that the fault tests are
// quick; the restart guard equals it, the longest TTL in use.
var (
	conformanceTimeout = map[bool]time.Duration{false: 150 * time.Millisecond, true: 200 * time.Millisecond}[raceEnabled]
	conformanceTTL     = 10 * conformanceTimeout
)

// TestConformance runs the backend conformance suite against a Redlock of
// three real redis-server nodes (no persistence: a restarted node comes
// back empty and must not vote for one restart guard).
func TestConformance(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, newHarness(t, 3))
}

// TestConformanceSingleNode runs the suite against one redis-server: the
// single-instance lock (quorum 1).
func TestConformanceSingleNode(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, newHarness(t, 1))
}

// harness starts the nodes and keeps track of the clients the suite has
// open, so that Ready can wait until each of them counts every node.
type harness struct {
	cl *redistest.Cluster

	mu        sync.Mutex
	clients   map[*redlock.Client]bool
	restarted time.Time // the last (re)start of a node
}

// newHarness starts k nodes for t and describes them to the suite.
func newHarness(t *testing.T, k int) leasetest.Harness {
	h := &harness{cl: redistest.Start(t, k), clients: map[*redlock.Client]bool{}, restarted: time.Now()}
	return leasetest.Harness{
		Name:    fmt.Sprintf("redis (%d nodes)", k),
		Servers: k,
		TTL:     conformanceTTL,
		Open:    h.open,
		// The client encodes and decodes 10,000 scripts per node; on a
		// loaded machine under the race detector that alone took up to
		// 10 s, past the batch round's decision timeout (the per-node
		// timeout plus 100 µs a key).
		OpenBatch: func(t testing.TB) lease.Backend { return h.openWith(t, batchTimeout) },
		OpenLossy: h.openLossy,
		Kill:      func(_ testing.TB, i int) { h.cl.Nodes[i].Kill() },
		Restart: func(_ testing.TB, i int) {
			h.cl.Nodes[i].Restart()
			h.mu.Lock()
			h.restarted = time.Now()
			h.mu.Unlock()
		},
		Pause:     func(_ testing.TB, i int) { h.cl.Nodes[i].Pause() },
		Resume:    func(_ testing.TB, i int) { h.cl.Nodes[i].Resume() },
		Ready:     h.ready,
		BadInputs: h.badInputs,
	}
}

// dial opens a client on urls with the suite's timeout and restart guard.
func dial(urls []string) (*redlock.Client, error) {
	return redlock.Open(context.Background(), redlock.Config{Nodes: urls, Prefix: "conformance", Options: []redlock.Option{redlock.WithTimeout(conformanceTimeout), redlock.WithRestartGuard(conformanceTTL)}})
}

// batchTimeout is the per-node timeout of the batch test's clients.
const batchTimeout = 10 * time.Second

func (h *harness) open(t testing.TB) lease.Backend {
	t.Helper()
	return h.openWith(t, conformanceTimeout)
}

// openWith opens a client with the given per-node timeout, known to Ready
// until t ends.
func (h *harness) openWith(t testing.TB, timeout time.Duration) lease.Backend {
	t.Helper()
	b, err := redlock.Open(context.Background(), redlock.Config{Nodes: h.cl.URLs(), Prefix: "conformance", Options: []redlock.Option{redlock.WithTimeout(timeout), redlock.WithRestartGuard(conformanceTTL)}})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	h.mu.Lock()
	h.clients[b] = true
	h.mu.Unlock()
	t.Cleanup(func() {
		h.mu.Lock()
		delete(h.clients, b)
		h.mu.Unlock()
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

// openLossy opens a client through proxies of its own (see
// leasetest.Harness.OpenLossy).
func (h *harness) openLossy(t testing.TB) (lease.Backend, func(bool)) {
	t.Helper()
	var addrs []string
	for _, n := range h.cl.Nodes {
		addrs = append(addrs, n.Addr())
	}
	g := netproxy.NewGroup(t, addrs...)
	b, err := redlock.Open(context.Background(), redlock.Config{Nodes: g.Rewrite(h.cl.URLs()...), Prefix: "conformance", Options: []redlock.Option{redlock.WithTimeout(conformanceTimeout), redlock.WithRestartGuard(conformanceTTL)}})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { g.Cut(); _ = b.Close() })
	return b, g.DropReplies
}

// readyTimeout bounds Ready: a restart guard plus a loaded machine.
const readyTimeout = 60 * time.Second

// ready waits until every open client, a fresh one and any opened later
// count every node (a node that restarted empty does not vote for a
// restart guard) and can take a fresh lease.
func (h *harness) ready(t testing.TB) {
	t.Helper()
	probe, err := dial(h.cl.URLs())
	if err != nil {
		t.Fatalf("ready: open: %v", err)
	}
	defer probe.Close()
	h.mu.Lock()
	clients := []*redlock.Client{probe}
	for c := range h.clients {
		clients = append(clients, c)
	}
	settled := h.restarted.Add(conformanceTTL + 2*time.Second)
	h.mu.Unlock()
	// An open client notices a restart, and starts its guard, when it
	// reconnects: have each one reconnect now.
	for _, c := range clients {
		_ = notReady(c)
	}
	// A client that meets a node for the first time dates the node's
	// start from INFO's uptime_in_seconds, to within 2 s (whole seconds,
	// rounded towards a later start, which is safe): only when the node
	// has been up for the guard plus 2 s does every new client count it.
	time.Sleep(time.Until(settled))
	// Ask every client each time: an open client notices a restart (and
	// starts its guard) only when it reconnects.
	deadline := time.Now().Add(readyTimeout)
	for {
		var why []string
		for _, c := range clients {
			if w := notReady(c); w != "" {
				why = append(why, w)
			}
		}
		if len(why) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ready: not every node counts after %s: %s", readyTimeout, strings.Join(why, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// notReady says why c cannot use every node yet ("" when it can).
func notReady(c *redlock.Client) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, st := range c.Health(ctx) {
		if st.Err != nil || !st.Voting {
			return fmt.Sprintf("%s: err %v, voting at %s", st.Server, st.Err, st.VotingAt.Format(time.StampMilli))
		}
	}
	// Health uses go-redis's pool; rounds use the client's lanes, whose
	// connections may still be cold.
	if in, err := c.Inspect(ctx, "ready"); err != nil || in.Answered < len(c.Servers()) {
		return fmt.Sprintf("inspect: %d answered: %v", in.Answered, err)
	}
	res := c.TryAcquireBatch(ctx, []lease.Request{{Key: "ready." + random(), TTL: conformanceTTL, Owner: "ready"}})[0]
	if res.Err != nil {
		return res.Err.Error()
	}
	_ = res.Lease.Release(ctx)
	return ""
}

// random returns 8 random hex digits.
func random() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// badInputs starts a node with a password and one with an ACL user, and
// returns what using wrong credentials and malformed URLs gives.
func (h *harness) badInputs(t testing.TB) []leasetest.BadInput {
	pw, aclPw, wrong := "pw-"+random(), "acl-"+random(), "wrong-"+random()
	pwNode := redistest.Start(t, 1, redistest.WithPassword(pw)).Nodes[0]
	aclNode := redistest.Start(t, 1, redistest.WithACLUser("leasecron", aclPw)).Nodes[0]
	closed := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	good := h.cl.URLs()
	firstErr := func(urls ...string) error {
		b, err := dial(urls)
		if err != nil {
			return err
		}
		defer b.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Warm(ctx); err != nil {
			return err
		}
		return b.TryAcquireBatch(ctx, []lease.Request{{Key: "bad-input", TTL: conformanceTTL}})[0].Err
	}
	return []leasetest.BadInput{
		{Name: "wrong password", Err: firstErr("redis://:" + wrong + "@" + pwNode.Addr() + "/0"), MustName: pwNode.Addr(), Secret: wrong},
		{Name: "missing password", Err: firstErr("redis://" + pwNode.Addr() + "/0"), MustName: pwNode.Addr()},
		{Name: "wrong ACL password", Err: firstErr("redis://leasecron:" + wrong + "@" + aclNode.Addr() + "/0"), MustName: aclNode.Addr(), Secret: wrong},
		{Name: "unknown ACL user", Err: firstErr("redis://nobody:" + aclPw + "@" + aclNode.Addr() + "/0"), MustName: aclNode.Addr(), Secret: aclPw},
		{Name: "nothing listening", Err: firstErr("redis://:" + pw + "@" + closed + "/0"), MustName: closed, Secret: pw},
		{Name: "port out of range", Err: firstErr("redis://:" + pw + "@127.0.0.1:99999/0"), MustName: "127.0.0.1:99999", Secret: pw},
		{Name: "unsupported scheme", Err: firstErr("http://:" + pw + "@127.0.0.1:6379/0"), MustName: `"http"`, Secret: pw},
		{Name: "no scheme", Err: firstErr("leasecron:" + pw + "@127.0.0.1:6379"), MustName: "127.0.0.1:6379", Secret: pw},
		{Name: "bad database", Err: firstErr("redis://:" + pw + "@" + pwNode.Addr() + "/db1"), MustName: pwNode.Addr(), Secret: pw},
		{Name: "third of three URLs bad", Err: firstErr(good[0], "redis://127.0.0.1:1/0", "redis://:"+pw+"@localhost:0"), MustName: "node 3", Secret: pw},
		{Name: "empty", Err: firstErr(), MustName: "no nodes"},
		{Name: "wrong password among good nodes", Err: wrongAmongGood(good, pwNode.Addr(), wrong), MustName: pwNode.Addr(), Secret: wrong},
	}
}

// wrongAmongGood opens a client on the good nodes plus a node with a wrong
// password, and returns Warm's error (the good nodes answer).
func wrongAmongGood(good []string, addr, wrong string) error {
	b, err := dial(append(append([]string(nil), good...), "redis://:"+wrong+"@"+addr+"/0"))
	if err != nil {
		return err
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = b.Warm(ctx)
	if err != nil && !strings.Contains(err.Error(), "WRONGPASS") {
		return fmt.Errorf("not an authentication error: %w", err)
	}
	return err
}
