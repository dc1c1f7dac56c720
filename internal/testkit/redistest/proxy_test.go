package redistest_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

func TestProxyForwards(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 2, redistest.WithPassword("pw"))
	urls := cl.ProxiedURLs()
	for i, n := range cl.Nodes {
		if want := "redis://:pw@" + n.Proxy().Addr() + "/0"; urls[i] != want {
			t.Errorf("proxied URL %q, want %q", urls[i], want)
		}
		if n.Proxy().Addr() == n.Addr() || n.Proxy().Target() != n.Addr() {
			t.Errorf("proxy %s -> %s for node %s", n.Proxy().Addr(), n.Proxy().Target(), n.Addr())
		}
		c := urlClient(t, urls[i], nil)
		if err := c.Set(ctxT(t, 5*time.Second), "via", "proxy", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got := n.Keys("via"); len(got) != 1 {
			t.Errorf("node %d: key written through the proxy not found", i)
		}
	}
}

// TestProxyDelay: a request and its reply each wait out the delay.
func TestProxyDelay(t *testing.T) {
	t.Parallel()
	n := redistest.Start(t, 1).Nodes[0]
	c := urlClient(t, n.ProxiedURL(), nil)
	if err := c.Ping(ctxT(t, 5*time.Second)).Err(); err != nil { // warm connection
		t.Fatal(err)
	}
	const d = 100 * time.Millisecond
	n.Proxy().SetDelay(d)
	start := time.Now()
	if err := c.Ping(ctxT(t, 10*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < 2*d {
		t.Errorf("round trip through a %s proxy took %s, want >= %s", d, rtt, 2*d)
	}
	n.Proxy().SetDelay(0)
	if err := c.Ping(ctxT(t, 5*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestProxyDelayKeepsOrder: a large value (many chunks) and a deep pipeline
// come through a delaying proxy intact and in order.
func TestProxyDelayKeepsOrder(t *testing.T) {
	t.Parallel()
	n := redistest.Start(t, 1).Nodes[0]
	n.Proxy().SetDelay(10 * time.Millisecond)
	c := urlClient(t, n.ProxiedURL(), nil)
	ctx := ctxT(t, 20*time.Second)
	big := make([]byte, 2<<20)
	_, _ = rand.Read(big)
	if err := c.Set(ctx, "big", big, 0).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, "big").Bytes()
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("GET big through the proxy: %d bytes, equal=%v, err=%v", len(got), bytes.Equal(got, big), err)
	}
	pipe := c.Pipeline()
	cmds := make([]*redis.IntCmd, 500)
	for i := range cmds {
		cmds[i] = pipe.Incr(ctx, "counter")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if cmd.Val() != int64(i+1) {
			t.Fatalf("reply %d = %d: out of order", i, cmd.Val())
		}
	}
}

func TestProxyBlackhole(t *testing.T) {
	t.Parallel()
	n := redistest.Start(t, 1).Nodes[0]
	p := n.Proxy()
	c := urlClient(t, n.ProxiedURL(), impatient)
	if err := c.Ping(ctxT(t, 5*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	for _, heal := range []func(){func() { p.Blackhole(false) }, p.Heal} {
		p.Blackhole(true)
		if err := c.Ping(ctxT(t, 5*time.Second)).Err(); !isTimeout(err) {
			t.Fatalf("PING through a blackhole: %v, want a timeout", err)
		}
		// New connections are accepted but get nothing either.
		if err := urlClient(t, n.ProxiedURL(), impatient).Ping(ctxT(t, 5*time.Second)).Err(); !isTimeout(err) {
			t.Fatalf("PING on a new connection through a blackhole: %v, want a timeout", err)
		}
		// The node itself is fine.
		if err := n.Client().Ping(ctxT(t, 5*time.Second)).Err(); err != nil {
			t.Fatalf("direct PING during blackhole: %v", err)
		}
		heal()
		if err := c.Ping(ctxT(t, 5*time.Second)).Err(); err != nil {
			t.Fatalf("PING after the blackhole: %v", err)
		}
	}
}

func TestProxyCut(t *testing.T) {
	t.Parallel()
	n := redistest.Start(t, 1).Nodes[0]
	p := n.Proxy()
	raw, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	r := bufio.NewReader(raw)
	if _, err := raw.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING on a raw connection: %q, %v", line, err)
	}

	p.Cut()
	// The open connection is closed, not hung.
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadByte(); !closedNotTimeout(err) {
		t.Fatalf("read after Cut: %v, want EOF or reset", err)
	}
	// New connections are closed at once.
	again, err := net.Dial("tcp", p.Addr())
	if err == nil {
		_ = again.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = again.Write([]byte("PING\r\n"))
		_, err = again.Read(make([]byte, 16))
		_ = again.Close()
	}
	if !closedNotTimeout(err) {
		t.Fatalf("new connection during Cut: %v, want it closed", err)
	}
	c := urlClient(t, n.ProxiedURL(), impatient)
	if err := c.Ping(ctxT(t, 5*time.Second)).Err(); err == nil || isTimeout(err) {
		t.Fatalf("go-redis PING during Cut: %v, want a fast connection error", err)
	}

	p.Heal()
	if err := c.Ping(ctxT(t, 5*time.Second)).Err(); err != nil {
		t.Fatalf("PING after Heal: %v", err)
	}
}

// closedNotTimeout reports whether err says the connection was closed (EOF,
// reset, refused) rather than that a deadline passed.
func closedNotTimeout(err error) bool {
	return err != nil && !isTimeout(err) && (errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		isConnError(err))
}

// isConnError reports whether err is a connection-level network error.
func isConnError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// TestProxySurvivesRestart: the proxy keeps forwarding to a restarted node.
func TestProxySurvivesRestart(t *testing.T) {
	t.Parallel()
	n := redistest.Start(t, 1).Nodes[0]
	c := urlClient(t, n.ProxiedURL(), nil)
	if err := c.Set(ctxT(t, 5*time.Second), "k", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	n.Kill()
	n.Restart()
	// go-redis retries on the stale pooled connection and then redials.
	if err := c.Ping(ctxT(t, 10*time.Second)).Err(); err != nil {
		t.Fatalf("PING through the proxy after restart: %v", err)
	}
}

// TestNewProxy: a standalone proxy to any address.
func TestNewProxy(t *testing.T) {
	t.Parallel()
	n := redistest.Start(t, 1).Nodes[0]
	p := netproxy.New(t, n.Addr())
	c := urlClient(t, fmt.Sprintf("redis://%s/0", p.Addr()), nil)
	if err := c.Ping(ctxT(t, 5*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestProxyRewriteReplies: the target's replies are rewritten, also where
// a match is split between reads (a value larger than one read chunk, with
// the pattern across each 32 KiB boundary, comes back rewritten and of the
// same length); requests are not rewritten.
func TestProxyRewriteReplies(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 1)
	p := netproxy.New(t, cl.Nodes[0].Addr())
	p.RewriteReplies("run_id:", "run_no:")
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer c.Close()
	ctx := context.Background()
	info, err := c.Info(ctx, "server").Result()
	if err != nil || bytes.Contains([]byte(info), []byte("run_id:")) || !bytes.Contains([]byte(info), []byte("run_no:")) {
		t.Fatalf("INFO through the proxy (err %v):\n%s", err, info)
	}
	// A value with the pattern every 1000 bytes, over several chunks.
	var b bytes.Buffer
	for b.Len() < 200<<10 {
		b.WriteString(strings.Repeat("x", 993) + "run_id:")
	}
	if err := c.Set(ctx, "big", b.String(), 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Stored as sent (requests pass unchanged) ...
	if v := cl.Nodes[0].Client().Get(ctx, "big").Val(); v != b.String() {
		t.Fatal("the request was rewritten")
	}
	// ... and read back rewritten everywhere.
	got, err := c.Get(ctx, "big").Result()
	want := strings.ReplaceAll(b.String(), "run_id:", "run_no:")
	if err != nil || got != want {
		t.Fatalf("GET through the proxy: err %v, %d bytes, %d occurrences left", err, len(got), strings.Count(got, "run_id:"))
	}
}
