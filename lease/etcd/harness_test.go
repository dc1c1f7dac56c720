package etcd_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/etcdtest"
	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/etcd"
	"github.com/leasecron/leasecron/lease/leasetest"
)

// Test timings: a 2 s TTL (the etcd lease is granted 2 s) and a 200 ms
// request timeout, 10× shorter as the Harness asks.
const (
	testTTL     = 2 * time.Second
	testTimeout = 200 * time.Millisecond
)

// open returns a backend on eps with a fresh prefix per test; Cleanup
// closes it.
func open(t testing.TB, eps []string, prefix string) *etcd.Backend {
	t.Helper()
	return openT(t, eps, prefix, testTimeout)
}

// openT is open with another request timeout.
func openT(t testing.TB, eps []string, prefix string, timeout time.Duration) *etcd.Backend {
	t.Helper()
	b, err := etcd.Open(context.Background(), etcd.Config{Endpoints: eps, Prefix: prefix, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = b.Warm(ctx)
	return b
}

// Conformance timings: every etcd write goes through raft and an fsync
// on three members, which a loaded 2-core machine (8 test runs at once)
// stretches to hundreds of milliseconds; the suite's TTL is 10 × that.
const (
	conformanceTimeout = 400 * time.Millisecond
	conformanceTTL     = 10 * conformanceTimeout
)

// harness is the conformance suite's Harness on a real 3-member cluster.
func harness(t testing.TB, c *etcdtest.Cluster) leasetest.Harness {
	prefix := "/t/" + filepath.Base(t.TempDir()) + "/"
	return leasetest.Harness{
		Name:    "etcd",
		Servers: etcdtest.Members,
		TTL:     conformanceTTL,
		Open: func(t testing.TB) lease.Backend {
			return openT(t, c.Endpoints(), prefix, conformanceTimeout)
		},
		OpenLossy: func(t testing.TB) (lease.Backend, func(bool)) {
			eps := c.Endpoints()
			targets := make([]string, len(eps))
			for i, ep := range eps {
				_, targets[i], _ = strings.Cut(ep, "://")
			}
			g := netproxy.NewGroup(t, targets...)
			b := openT(t, g.Rewrite(eps...), prefix, conformanceTimeout)
			t.Cleanup(g.Cut)
			return b, g.DropReplies
		},
		Kill:    func(t testing.TB, i int) { c.Kill(i) },
		Restart: func(t testing.TB, i int) { c.Restart(i, false) },
		Pause:   func(t testing.TB, i int) { c.Pause(i) },
		Resume:  func(t testing.TB, i int) { c.Resume(i) },
		Ready: func(t testing.TB) {
			for i := range etcdtest.Members {
				if c.PID(i) != 0 {
					c.WaitHealthy(i)
				}
			}
		},
		BadInputs: func(t testing.TB) []leasetest.BadInput {
			return badInputs(t, c)
		},
	}
}

// badInputs opens the backend with bad configurations.
func badInputs(t testing.TB, c *etcdtest.Cluster) []leasetest.BadInput {
	var out []leasetest.BadInput
	try := func(name string, cfg etcd.Config, mustName, secret string) {
		if cfg.Timeout == 0 {
			cfg.Timeout = testTimeout
		}
		b, err := etcd.Open(context.Background(), cfg)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = b.Acquire(ctx, lease.Request{Key: "bad", TTL: testTTL})
			cancel()
			_ = b.Close()
		}
		out = append(out, leasetest.BadInput{Name: name, Err: err, MustName: mustName, Secret: secret})
	}
	try("no scheme", etcd.Config{Endpoints: []string{"127.0.0.1:2379"}}, "etcd.endpoints[0]", "")
	try("bad port", etcd.Config{Endpoints: []string{"http://127.0.0.1:99999"}}, "99999", "")
	try("credentials in URL", etcd.Config{Endpoints: []string{"http://u:s3cret-pw@127.0.0.1:1"}}, "etcd.endpoints[0]", "s3cret-pw")
	try("prefix without slash", etcd.Config{Endpoints: c.Endpoints(), Prefix: "leasecron"}, "etcd.prefix", "")
	try("missing CA file", etcd.Config{Endpoints: []string{"https://127.0.0.1:1"}, CAFile: "/nonexistent/ca.pem"}, "etcd.ca_file", "")
	try("password without user", etcd.Config{Endpoints: c.Endpoints(), Password: "s3cret-pw"}, "etcd.username", "s3cret-pw")
	try("nothing listening", etcd.Config{Endpoints: []string{"http://127.0.0.1:1"}}, "127.0.0.1:1", "")
	return out
}

// TestBadInputs: every bad configuration fails, names its culprit and
// never quotes the password.
func TestBadInputs(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	for _, bi := range badInputs(t, c) {
		if bi.Err == nil {
			t.Errorf("%s: no error", bi.Name)
			continue
		}
		msg := bi.Err.Error()
		if !contains(msg, bi.MustName) {
			t.Errorf("%s: error %q does not name %q", bi.Name, msg, bi.MustName)
		}
		if bi.Secret != "" && contains(msg, bi.Secret) {
			t.Errorf("%s: error %q contains the secret", bi.Name, msg)
		}
	}
}

// TestHarness exercises the conformance Harness until leasetest.Run
// lands: two clients of one Harness see each other's leases, and a
// member killed and restarted through it is Ready again.
func TestHarness(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	h := harness(t, c)
	a, b := h.Open(t), h.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.Acquire(ctx, lease.Request{Key: "k", TTL: h.TTL, Owner: "a"}); err != nil {
		t.Fatal(err)
	}
	if r := b.TryAcquireBatch(ctx, []lease.Request{{Key: "k", TTL: h.TTL}})[0]; !errors.Is(r.Err, lease.ErrHeld) {
		t.Fatalf("second client of the harness: %v", r.Err)
	}
	h.Kill(t, 0)
	h.Restart(t, 0)
	h.Ready(t)
	for _, s := range b.Health(ctx) {
		if s.Err != nil || !s.Voting {
			t.Fatalf("health after restart: %+v", s)
		}
	}
}

// TestConformance runs the backend conformance suite on a real 3-member
// cluster.
func TestConformance(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, harness(t, etcdtest.Start(t)))
}
