package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// ctxT returns a context that ends after d or with the test.
func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// urlClient returns a client for a redis:// URL, closed at cleanup.
func urlClient(t testing.TB, u string, tweak func(*redis.Options)) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", u, err)
	}
	if tweak != nil {
		tweak(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// impatient makes a client give up after 200 ms, without retries.
func impatient(o *redis.Options) {
	o.DialTimeout = 200 * time.Millisecond
	o.ReadTimeout = 200 * time.Millisecond
	o.WriteTimeout = 200 * time.Millisecond
	o.MaxRetries = -1
}

// isTimeout reports whether err is a network or context timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func TestStartThreeNodes(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 3)
	if len(cl.Nodes) != 3 || len(cl.URLs()) != 3 || len(cl.Addrs()) != 3 {
		t.Fatalf("got %d nodes, %d URLs, %d addrs", len(cl.Nodes), len(cl.URLs()), len(cl.Addrs()))
	}
	seenAddr, seenPID := map[string]bool{}, map[int]bool{}
	for i, n := range cl.Nodes {
		if !strings.HasPrefix(n.Addr(), "127.0.0.1:") || seenAddr[n.Addr()] {
			t.Errorf("node %d: addr %q (duplicate or not loopback)", i, n.Addr())
		}
		if n.PID() <= 0 || seenPID[n.PID()] {
			t.Errorf("node %d: pid %d", i, n.PID())
		}
		seenAddr[n.Addr()], seenPID[n.PID()] = true, true
		if want := "redis://" + n.Addr() + "/0"; cl.URLs()[i] != want || n.URL() != want {
			t.Errorf("node %d: URL %q, want %q", i, n.URL(), want)
		}
		// Each node is its own server: write through the URL, read back
		// through Client.
		c := urlClient(t, n.URL(), nil)
		if err := c.Set(ctxT(t, 5*time.Second), "who", i, 0).Err(); err != nil {
			t.Fatalf("node %d: SET: %v", i, err)
		}
	}
	for i, n := range cl.Nodes {
		got, err := n.Client().Get(ctxT(t, 5*time.Second), "who").Result()
		if err != nil || got != fmt.Sprint(i) {
			t.Errorf("node %d: GET who = %q, %v", i, got, err)
		}
	}
}

func TestKillRestartLosesData(t *testing.T) {
	t.Parallel()
	n := redistest.Start(t, 1).Nodes[0]
	addr, pid := n.Addr(), n.PID()
	if err := n.Client().Set(ctxT(t, 5*time.Second), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	n.Kill()
	if n.PID() != 0 {
		t.Errorf("PID after Kill = %d, want 0", n.PID())
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d still exists after Kill: %v", pid, err)
	}
	if err := urlClient(t, n.URL(), impatient).Ping(ctxT(t, 5*time.Second)).Err(); err == nil {
		t.Error("PING answered by a killed node")
	}
	n.Kill() // killing twice is harmless

	n.Restart()
	if n.Addr() != addr {
		t.Errorf("restarted on %s, want the same %s", n.Addr(), addr)
	}
	if n.PID() <= 0 || n.PID() == pid {
		t.Errorf("PID after Restart = %d (before %d)", n.PID(), pid)
	}
	if err := n.Client().Get(ctxT(t, 5*time.Second), "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET k after restart without AOF: %v, want redis.Nil", err)
	}
	// Restart of a running node kills it first.
	n.Restart()
	if err := n.Client().Ping(ctxT(t, 5*time.Second)).Err(); err != nil {
		t.Errorf("PING after second Restart: %v", err)
	}
}

func TestAOFRestartKeepsData(t *testing.T) {
	t.Parallel()
	n := redistest.Start(t, 1, redistest.WithAOF()).Nodes[0]
	ctx := ctxT(t, 10*time.Second)
	for i := range 50 {
		if err := n.Client().Set(ctx, fmt.Sprintf("k:%02d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	n.Kill()
	n.Restart()
	if got := n.Keys("k:*"); len(got) != 50 {
		t.Fatalf("after AOF restart: %d keys, want 50", len(got))
	}
	if v, err := n.Client().Get(ctx, "k:49").Result(); err != nil || v != "49" {
		t.Errorf("GET k:49 = %q, %v", v, err)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	n := redistest.Start(t, 1).Nodes[0]
	c := urlClient(t, n.URL(), impatient)
	if err := c.Ping(ctxT(t, 5*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	n.Pause()
	n.Pause() // pausing twice is harmless
	err := c.Ping(ctxT(t, 5*time.Second)).Err()
	if !isTimeout(err) {
		t.Fatalf("PING to a paused node: %v, want a timeout", err)
	}
	n.Resume()
	n.Resume()
	if err := c.Ping(ctxT(t, 5*time.Second)).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

// TestKillPausedNode: Kill works on a stopped process (SIGCONT, SIGKILL).
func TestKillPausedNode(t *testing.T) {
	t.Parallel()
	n := redistest.Start(t, 1).Nodes[0]
	n.Pause()
	n.Kill()
	n.Restart()
	if err := n.Client().Ping(ctxT(t, 5*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestCleanupKillsNodes: when a test ends its processes are gone, also a
// paused one.
func TestCleanupKillsNodes(t *testing.T) {
	t.Parallel()
	var pids []int
	t.Run("inner", func(t *testing.T) {
		cl := redistest.Start(t, 2)
		cl.Nodes[1].Pause()
		pids = []int{cl.Nodes[0].PID(), cl.Nodes[1].PID()}
	})
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after cleanup: %v", pid, err)
		}
	}
}

func TestPassword(t *testing.T) {
	t.Parallel()
	const pw = "s3cret"
	n := redistest.Start(t, 1, redistest.WithPassword(pw)).Nodes[0]
	if want := "redis://:" + pw + "@" + n.Addr() + "/0"; n.URL() != want {
		t.Errorf("URL %q, want %q", n.URL(), want)
	}
	if err := urlClient(t, n.URL(), nil).Ping(ctxT(t, 5*time.Second)).Err(); err != nil {
		t.Errorf("PING with the URL's password: %v", err)
	}
	if err := n.Client().Ping(ctxT(t, 5*time.Second)).Err(); err != nil {
		t.Errorf("PING with Client: %v", err)
	}
	err := urlClient(t, "redis://"+n.Addr()+"/0", nil).Ping(ctxT(t, 5*time.Second)).Err()
	if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("PING without password: %v, want NOAUTH", err)
	}
}

func TestACLUser(t *testing.T) {
	t.Parallel()
	n := redistest.Start(t, 1, redistest.WithACLUser("leaser", "pw1")).Nodes[0]
	if want := "redis://leaser:pw1@" + n.Addr() + "/0"; n.URL() != want {
		t.Errorf("URL %q, want %q", n.URL(), want)
	}
	who, err := urlClient(t, n.URL(), nil).Do(ctxT(t, 5*time.Second), "ACL", "WHOAMI").Text()
	if err != nil || who != "leaser" {
		t.Errorf("ACL WHOAMI = %q, %v", who, err)
	}
	if err := n.Client().Set(ctxT(t, 5*time.Second), "k", "v", 0).Err(); err != nil {
		t.Errorf("SET as the ACL user: %v", err)
	}
	err = urlClient(t, "redis://leaser:wrong@"+n.Addr()+"/0", nil).Ping(ctxT(t, 5*time.Second)).Err()
	if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("PING with a wrong password: %v, want WRONGPASS", err)
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	n := redistest.Start(t, 1).Nodes[0]
	ctx := ctxT(t, 5*time.Second)
	for _, k := range []string{"a:2", "a:1", "b:1"} {
		if err := n.Client().Set(ctx, k, 1, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := n.Keys("a:*"), []string{"a:1", "a:2"}; !slices.Equal(got, want) {
		t.Errorf("Keys(a:*) = %v, want %v", got, want)
	}
	if got := n.Keys("nothing:*"); len(got) != 0 {
		t.Errorf("Keys(nothing:*) = %v", got)
	}
}

// TestFreePort: a port from FreePort was free a moment ago, so it can
// usually be bound. Another process may take it first (the parallel tests
// dial out from the same ephemeral range), which is why Start retries on a
// new port, and so does this test, a few times.
func TestFreePort(t *testing.T) {
	t.Parallel()
	var errs []error
	for range 5 {
		p := redistest.FreePort(t)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			_ = ln.Close()
			return
		}
		errs = append(errs, fmt.Errorf("port %d: %w", p, err))
	}
	t.Fatalf("5 ports in a row from FreePort could not be bound: %v", errors.Join(errs...))
}

// fatalTB records the first Fatalf and ends the goroutine like t.Fatalf.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestMissingRedisServer: without redis-server on PATH the test fails (not
// skips) and says how to install it. Not parallel: it changes PATH.
func TestMissingRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for name, start := range map[string]func(testing.TB){
		"Start":             func(tb testing.TB) { redistest.Start(tb, 1) },
		"StartRedisCluster": func(tb testing.TB) { redistest.StartRedisCluster(tb) },
	} {
		f := &fatalTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			start(f)
		}()
		<-done
		if !strings.Contains(f.msg, "apt-get install -y redis-server") {
			t.Errorf("%s without redis-server: Fatalf(%q), want install advice", name, f.msg)
		}
	}
}
