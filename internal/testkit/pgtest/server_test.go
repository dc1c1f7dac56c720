package pgtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasecron/leasecron/internal/testkit/pgtest"
)

func connect(t *testing.T, url string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return pgx.Connect(ctx, url)
}

// TestServerLifecycle: the role logs in with its password and not without
// it; a committed row survives Kill+Restart on the same port; Pause makes
// queries time out and Resume answers them; Terminate ends the role's
// connections.
func TestServerLifecycle(t *testing.T) {
	s := pgtest.Start(t)
	if _, err := connect(t, s.URLFor(pgtest.User, "wrong")); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("wrong password: %v, want password authentication failed", err)
	}
	c, err := connect(t, s.URL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	ctx := context.Background()
	if _, err := c.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if n := s.Terminate(t); n != 1 {
		t.Fatalf("Terminate ended %d connections, want 1", n)
	}
	if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("query on a terminated connection succeeded")
	}
	pid, addr := s.PID(), s.Addr()
	s.Kill()
	if _, err := connect(t, s.URL()); err == nil {
		t.Fatal("connected to a killed server")
	}
	s.Restart()
	if s.PID() == pid || s.Addr() != addr {
		t.Fatalf("restart: pid %d->%d, addr %s->%s", pid, s.PID(), addr, s.Addr())
	}
	var v int
	s.QueryRow("SELECT v FROM t", nil, &v)
	if v != 42 {
		t.Fatalf("after restart v = %d, want 42", v)
	}
	c2, err := connect(t, s.URL())
	if err != nil {
		t.Fatal(err)
	}
	s.Pause()
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = c2.Exec(qctx, "SELECT 1")
	cancel()
	if err == nil {
		t.Fatal("query answered by a paused server")
	}
	s.Resume()
	c3, err := connect(t, s.ProxiedURL())
	if err != nil {
		t.Fatalf("connect after resume, through the proxy: %v", err)
	}
	s.Proxy().Cut()
	if _, err := c3.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("query through a cut proxy succeeded")
	}
}
