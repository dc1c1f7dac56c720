package mysqltest

import (
	"context"
	"database/sql"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

// Addr returns "127.0.0.1:port"; the port stays the same across Restart.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Password returns the password of User.
func (s *Server) Password() string { return s.password }

// DSN returns leasecron:PASSWORD@tcp(127.0.0.1:port)/leasecron, the
// go-sql-driver/mysql data source name of User.
func (s *Server) DSN() string { return s.DSNFor(User, s.password) }

// DSNFor returns the DSN of another user (see Exec to create one).
func (s *Server) DSNFor(user, password string) string { return dsn(s.Addr(), user, password) }

func dsn(addr, user, password string) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, password, "tcp", addr, Database
	return c.FormatDSN()
}

// DSNAt is DSN through another address (a proxy of the caller's that
// forwards to Addr).
func (s *Server) DSNAt(addr string) string { return dsn(addr, User, s.password) }

// Proxy returns the TCP proxy in front of the server (started on first
// use); connect through ProxiedDSN to be affected by its faults. It keeps
// working across Restart.
func (s *Server) Proxy() *netproxy.Proxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proxy == nil {
		s.proxy = netproxy.New(s.t, s.Addr())
	}
	return s.proxy
}

// ProxiedDSN is DSN through Proxy.
func (s *Server) ProxiedDSN() string { return dsn(s.Proxy().Addr(), User, s.password) }

// PID returns the server's PID, 0 while killed.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Kill SIGKILLs the server, like a crash of the machine's MariaDB, and
// waits until it is gone.
func (s *Server) Kill() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.killLocked(); err != nil {
		s.t.Fatalf("%v", err)
	}
}

// Restart kills the server if it runs and starts it again on the same
// port and data directory; it returns once crash recovery is over and the
// server accepts connections.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.killLocked(); err != nil {
		s.t.Fatalf("%v", err)
	}
	if err := proctest.RestartOnSamePort(startTimeout, errAddrInUse, s.spawnLocked); err != nil {
		s.t.Fatalf("mysqltest: restart: %v", err)
	}
}

// Pause sends SIGSTOP to the server, like a frozen VM: connections stay
// open, nothing is answered.
func (s *Server) Pause() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		s.t.Fatalf("mysqltest: Pause: server %s is not running", s.Addr())
	}
	if err := s.proc.Pause(); err != nil {
		s.t.Fatalf("mysqltest: server %s: %v", s.Addr(), err)
	}
}

// Resume sends SIGCONT to the paused server.
func (s *Server) Resume() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	if err := s.proc.Resume(); err != nil {
		s.t.Fatalf("mysqltest: server %s: %v", s.Addr(), err)
	}
}

// admin connects as root over the Unix socket.
func (s *Server) admin() (*sql.DB, error) { return sql.Open("mysql", rootDSN(s.socket())) }

// Exec runs query as root, failing the test on error (for setting up
// users, grants and tables).
func (s *Server) Exec(query string, args ...any) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := s.admin()
	if err != nil {
		s.t.Fatalf("mysqltest: connecting as root: %v", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, query, args...); err != nil {
		s.t.Fatalf("mysqltest: %s: %v", query, err)
	}
}

// QueryRow runs query as root and scans its one row into dest.
func (s *Server) QueryRow(query string, args []any, dest ...any) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := s.admin()
	if err != nil {
		s.t.Fatalf("mysqltest: connecting as root: %v", err)
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, query, args...).Scan(dest...); err != nil {
		s.t.Fatalf("mysqltest: %s: %v", query, err)
	}
}

// KillConnections runs KILL CONNECTION on every session of User and
// returns how many it killed.
func (s *Server) KillConnections(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := s.admin()
	if err != nil {
		t.Fatalf("mysqltest: connecting as root: %v", err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE user = ?", User)
	if err != nil {
		t.Fatalf("mysqltest: processlist: %v", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatalf("mysqltest: processlist: %v", err)
		}
		ids = append(ids, id)
	}
	_ = rows.Close()
	n := 0
	for _, id := range ids {
		if _, err := db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10)); err == nil {
			n++
		}
	}
	return n
}
