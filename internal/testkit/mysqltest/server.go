package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

const (
	// startTimeout bounds one start or restart (crash recovery included).
	startTimeout = 90 * time.Second
	// killTimeout bounds the wait for the killed process to be gone.
	killTimeout = 10 * time.Second
	// User and Database are the user and database tests connect as.
	User     = "leasecron"
	Database = "leasecron"
)

// installHint is how to get the server binaries.
const installHint = "install the MariaDB server: apt-get install mariadb-server (scripts/deps.sh mysql)"

// innodbOpts keep a test server's files small, and write the log to the
// operating system at each commit without flushing it to disk (see the
// package documentation).
var innodbOpts = []string{"--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M",
	"--innodb-data-file-path=ibdata1:10M:autoextend", "--innodb-flush-log-at-trx-commit=2"}

// Server is one MariaDB server owned by a test. Its methods that can fail
// call t.Fatalf, so call them from the test's goroutine; it is safe for
// concurrent use otherwise.
type Server struct {
	t        testing.TB
	bin      string
	who      *runAs
	dir      string // socket, log, data/
	password string
	port     int

	mu    sync.Mutex
	proc  *proctest.Proc // nil while killed
	proxy *netproxy.Proxy
}

// runAs is the user the server runs as: nil when the tests are not root.
type runAs struct{ uid, gid int }

func (r *runAs) cred() *syscall.Credential {
	if r == nil {
		return nil
	}
	return &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid)}
}

func (r *runAs) chown(path string) error {
	if r == nil {
		return nil
	}
	return os.Lchown(path, r.uid, r.gid)
}

// serverUser picks the unprivileged user to run the server as when root.
func serverUser() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"mysql", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &runAs{uid: uid, gid: gid}, nil
	}
	return nil, errors.New("running as root, and neither a mysql nor a nobody user exists to run the server as (mysqld refuses root)")
}

// binaries finds the server and its installer.
func binaries(t testing.TB) (server, install string) {
	t.Helper()
	for _, pair := range [][2]string{{"mariadbd", "mariadb-install-db"}, {"mysqld", "mysql_install_db"}} {
		s, err1 := lookPath(pair[0])
		i, err2 := lookPath(pair[1])
		if err1 == nil && err2 == nil {
			return s, i
		}
	}
	t.Fatalf("mysqltest: no mariadbd/mariadb-install-db on PATH nor in /usr/sbin; %s", installHint)
	return "", ""
}

func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join("/usr/sbin", name)
	if _, err := os.Stat(p); err != nil {
		p = filepath.Join("/usr/bin", name)
	}
	_, err := os.Stat(p)
	return p, err
}

// Start starts a MariaDB server on a free 127.0.0.1 port with a fresh data
// directory, creates the database Database and the user User with a
// random password, and returns once the server accepts connections.
// t.Cleanup kills it (SIGKILL, resumed first if paused), waits for it and
// removes its directory.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, install := binaries(t)
	who, err := serverUser()
	if err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	dir, err := os.MkdirTemp("", "mysqltest-")
	if err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// A temporary directory of its own: servers installed at once in the
	// shared /tmp collide on their temporary tables' names.
	for _, d := range []string{dir, filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatalf("mysqltest: %v", err)
		}
		if err := who.chown(d); err != nil {
			t.Fatalf("mysqltest: %v", err)
		}
	}
	args := append([]string{"--no-defaults", "--datadir=" + filepath.Join(dir, "data"), "--tmpdir=" + filepath.Join(dir, "tmp"),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"}, innodbOpts...)
	cmd := exec.Command(install, args...)
	cmd.SysProcAttr = proctest.SysProcAttr(who.cred())
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mysqltest: %s: %v\n%s", install, err, out)
	}
	pw := make([]byte, 12)
	_, _ = rand.Read(pw)
	s := &Server{t: t, bin: bin, who: who, dir: dir, password: hex.EncodeToString(pw)}
	t.Cleanup(s.cleanup)
	err = proctest.StartOnFreePorts(1, func(ports []int) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.port = ports[0]
		return s.spawnLocked()
	})
	if err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	s.Exec("CREATE DATABASE " + Database + " CHARACTER SET utf8mb4")
	s.Exec("CREATE USER '" + User + "'@'%' IDENTIFIED BY '" + s.password + "'")
	s.Exec("GRANT ALL ON " + Database + ".* TO '" + User + "'@'%'")
	return s
}

// errAddrInUse marks a start that failed because the port was taken.
var errAddrInUse = fmt.Errorf("mysqltest: %w", proctest.ErrPortTaken)

func (s *Server) logPath() string { return filepath.Join(s.dir, "mysqld.log") }
func (s *Server) socket() string  { return filepath.Join(s.dir, "mysqld.sock") }

// spawnLocked starts the server and waits until it accepts connections.
// s.mu must be held.
func (s *Server) spawnLocked() error {
	off := int64(0)
	if st, err := os.Stat(s.logPath()); err == nil {
		off = st.Size()
	}
	args := append([]string{"--no-defaults", "--datadir=" + filepath.Join(s.dir, "data"),
		"--tmpdir=" + filepath.Join(s.dir, "tmp"), "--socket=" + s.socket(), "--port=" + strconv.Itoa(s.port), "--bind-address=127.0.0.1",
		"--skip-networking=0", "--skip-name-resolve", "--pid-file=" + filepath.Join(s.dir, "mysqld.pid"),
		"--log-error=" + s.logPath(), "--max-connections=200", "--innodb-lock-wait-timeout=50"}, innodbOpts...)
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	p, err := proctest.Start(cmd, s.who.cred())
	if err != nil {
		return err
	}
	s.proc = p
	err = waitReady(s.socket(), s.Addr(), p.Done(), startTimeout)
	if err != nil {
		kerr := s.killLocked()
		b, _ := os.ReadFile(s.logPath())
		fresh := string(b[min(int(off), len(b)):])
		err = errors.Join(fmt.Errorf("mysqltest: server %s (pid %d): %w\n--- %s:\n%s", s.Addr(), p.PID(), err, s.logPath(), fresh), kerr)
		if proctest.AddrInUse(fresh) || strings.Contains(fresh, "Do you already have another") {
			err = errors.Join(errAddrInUse, err)
		}
		return err
	}
	return nil
}

// waitReady waits until root can run a statement over the socket and the
// TCP port accepts connections.
func waitReady(sock, addr string, done <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return errors.New("the server exited")
		default:
		}
		last = ping(sock)
		if last == nil {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err == nil {
				return c.Close()
			}
			last = err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %s: %w", timeout, last)
}

func ping(sock string) error {
	db, err := sql.Open("mysql", rootDSN(sock))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

func rootDSN(sock string) string {
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr = "root", "unix", sock
	c.Timeout = 5 * time.Second
	return c.FormatDSN()
}

func (s *Server) cleanup() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.killLocked(); err != nil {
		s.t.Errorf("mysqltest: cleanup: %v", err)
	}
}

// killLocked SIGKILLs the server (after SIGCONT if paused) and waits until
// it is gone. s.mu must be held.
func (s *Server) killLocked() error {
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	if err := p.Kill(killTimeout); err != nil {
		return fmt.Errorf("mysqltest: server %s: %w", s.Addr(), err)
	}
	return nil
}
