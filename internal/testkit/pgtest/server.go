package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

const (
	// startTimeout bounds one start or restart (crash recovery included).
	startTimeout = 60 * time.Second
	// killTimeout bounds the wait for the killed processes to be gone.
	killTimeout = 10 * time.Second
	// User and Database are the role and database tests connect as.
	User     = "leasecron"
	Database = "leasecron"
)

// Server is one PostgreSQL server owned by a test. Its methods that can
// fail call t.Fatalf, so call them from the test's goroutine; it is safe
// for concurrent use otherwise.
type Server struct {
	t        testing.TB
	bin      string
	who      *runAs
	dir      string // socket directory, log, data/
	password string
	port     int

	// clockStep and clockFile: see WithClockStep.
	clockStep bool
	clockFile string
	// maxConns is the server's max_connections (WithMaxConnections).
	maxConns int

	mu    sync.Mutex
	proc  *proctest.Proc // nil while killed
	proxy *netproxy.Proxy
}

// Start starts a PostgreSQL server on a free 127.0.0.1 port with a fresh
// copy of the template cluster, gives the role User a random password
// and returns once the server accepts connections. t.Cleanup kills it
// (SIGKILL of the postmaster and its children, resumed if paused), waits
// for its processes and removes its directory.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin := binDir(t)
	who, err := serverUser()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	tmpl, err := template(bin, who)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := who.chown(dir); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := copyTree(tmpl, filepath.Join(dir, "data"), who); err != nil {
		t.Fatalf("pgtest: copying the template cluster: %v", err)
	}
	pw := make([]byte, 12)
	_, _ = rand.Read(pw)
	s := &Server{t: t, bin: bin, who: who, dir: dir, password: hex.EncodeToString(pw), maxConns: 60}
	for _, o := range opts {
		o(s)
	}
	if s.clockStep {
		if err := s.buildClockShim(); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	t.Cleanup(s.cleanup)
	err = proctest.StartOnFreePorts(1, func(ports []int) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.port = ports[0]
		return s.spawnLocked()
	})
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	s.Exec("ALTER ROLE " + User + " PASSWORD '" + s.password + "'")
	return s
}

// errAddrInUse marks a start that failed because the port was taken.
var errAddrInUse = fmt.Errorf("pgtest: %w", proctest.ErrPortTaken)

func (s *Server) logPath() string { return filepath.Join(s.dir, "postgres.log") }

// spawnLocked starts the postmaster and waits until it accepts
// connections. s.mu must be held.
func (s *Server) spawnLocked() error {
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	off, _ := logf.Seek(0, 2)
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.dir, "data"),
		"-k", s.dir, "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=on", "-c", "max_connections="+strconv.Itoa(s.maxConns),
		"-c", "shared_buffers=16MB", "-c", "logging_collector=off", "-c", "unix_socket_permissions=0777")
	cmd.Dir = s.dir
	cmd.Env = append(serverEnv(), s.clockEnv()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	p, err := proctest.StartTree(cmd, s.who.cred())
	_ = logf.Close()
	if err != nil {
		return err
	}
	s.proc = p
	c, err := waitConnect(socketDSN(s.dir, s.port, Database), p.Done(), startTimeout)
	if err == nil {
		c.Close(context.Background())
		err = dial(s.Addr())
	}
	if err != nil {
		kerr := s.killLocked()
		b, _ := os.ReadFile(s.logPath())
		fresh := string(b[min(int(off), len(b)):])
		err = errors.Join(fmt.Errorf("pgtest: server %s (pid %d): %w\n--- %s:\n%s", s.Addr(), p.PID(), err, s.logPath(), fresh), kerr)
		if proctest.AddrInUse(fresh) {
			err = errors.Join(errAddrInUse, err)
		}
		return err
	}
	return nil
}

func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

func (s *Server) cleanup() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.killLocked(); err != nil {
		s.t.Errorf("pgtest: cleanup: %v", err)
	}
}

// killLocked SIGKILLs the postmaster and its children (after SIGCONT if
// paused) and waits until its processes are gone. s.mu must be held.
func (s *Server) killLocked() error {
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	shmid, shm := s.sysvSegment()
	if err := p.Kill(killTimeout); err != nil {
		return fmt.Errorf("pgtest: server %s: %w", s.Addr(), err)
	}
	if shm {
		// A postmaster killed by SIGKILL leaves its System V segment
		// behind (a restart on the same directory removes it, a test's
		// end does not): over many runs they fill the kernel's table
		// (kernel.shmmni) and every later postgres fails to start.
		_, _ = unix.SysvShmCtl(shmid, unix.IPC_RMID, nil)
	}
	return nil
}

// sysvSegment returns the System V shared memory segment the running
// postmaster names in its postmaster.pid (line 7: key and ID).
func (s *Server) sysvSegment() (id int, ok bool) {
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		return 0, false
	}
	f := strings.Fields(lines[6])
	if len(f) != 2 {
		return 0, false
	}
	id, err = strconv.Atoi(f[1])
	return id, err == nil
}

// Addr returns "127.0.0.1:port"; the port stays the same across Restart.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Password returns the password of the role User.
func (s *Server) Password() string { return s.password }

// URL returns postgres://leasecron:PASSWORD@127.0.0.1:port/leasecron?sslmode=disable.
func (s *Server) URL() string { return s.URLFor(User, s.password) }

// URLFor returns the URL for another role (see Exec to create one).
func (s *Server) URLFor(user, password string) string { return s.url(s.Addr(), user, password) }

func (s *Server) url(addr, user, password string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: addr,
		Path: "/" + Database, RawQuery: "sslmode=disable"}
	return u.String()
}

// Proxy returns the TCP proxy in front of the server (started on first
// use); connect through ProxiedURL to be affected by its faults. It keeps
// working across Restart.
func (s *Server) Proxy() *netproxy.Proxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proxy == nil {
		s.proxy = netproxy.New(s.t, s.Addr())
	}
	return s.proxy
}

// ProxiedURL is URL through Proxy.
func (s *Server) ProxiedURL() string { return s.url(s.Proxy().Addr(), User, s.password) }

// PID returns the postmaster's PID, 0 while killed.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Kill SIGKILLs the postmaster and all its backends, like a crash of the
// machine's PostgreSQL, and waits until they are gone.
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
		s.t.Fatalf("pgtest: restart: %v", err)
	}
}

// Pause sends SIGSTOP to the postmaster and all its backends, like a frozen VM: connections stay open, nothing is answered.
func (s *Server) Pause() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		s.t.Fatalf("pgtest: Pause: server %s is not running", s.Addr())
	}
	if err := s.proc.Pause(); err != nil {
		s.t.Fatalf("pgtest: server %s: %v", s.Addr(), err)
	}
}

// Resume sends SIGCONT to the paused server and all its backends.
func (s *Server) Resume() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	if err := s.proc.Resume(); err != nil {
		s.t.Fatalf("pgtest: server %s: %v", s.Addr(), err)
	}
}

// admin connects as the superuser over the Unix socket.
func (s *Server) admin(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, socketDSN(s.dir, s.port, Database))
}

// Exec runs sql as the superuser in the database Database, failing the
// test on error (for setting up roles, grants and tables).
func (s *Server) Exec(sql string, args ...any) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := s.admin(ctx)
	if err != nil {
		s.t.Fatalf("pgtest: connecting as superuser: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		s.t.Fatalf("pgtest: %s: %v", sql, err)
	}
}

// QueryRow runs sql as the superuser and scans its one row into dest.
func (s *Server) QueryRow(sql string, args []any, dest ...any) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := s.admin(ctx)
	if err != nil {
		s.t.Fatalf("pgtest: connecting as superuser: %v", err)
	}
	defer c.Close(ctx)
	if err := c.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
		s.t.Fatalf("pgtest: %s: %v", sql, err)
	}
}

// Terminate runs pg_terminate_backend on every connection of the role
// User (the application's), waiting up to 5 s for each to end, and returns
// how many it ended.
func (s *Server) Terminate(t testing.TB) int {
	t.Helper()
	var n int
	s.QueryRow(`SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000))
	            FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()`, []any{User}, &n)
	return n
}
