// Package redisproc starts throw-away redis-server processes on free
// loopback ports for benchmarks, much like a test helper would, and stops
// them by PID. Nothing is persisted (--save "" --appendonly no).
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

// Server is one running redis-server process.
type Server struct {
	// Addr is host:port on 127.0.0.1.
	Addr string

	cmd  *exec.Cmd
	dir  string
	done chan struct{}
	once sync.Once
}

// Start launches bin (e.g. "redis-server") on a free 127.0.0.1 port with
// persistence off and waits up to 10 s until it accepts connections. The
// child also gets SIGKILL if this process dies (Linux Pdeathsig), as a
// fallback to Stop.
func Start(ctx context.Context, bin string) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		s, err := start(ctx, bin)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func start(ctx context.Context, bin string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "leasebench-redis-")
	if err != nil {
		return nil, fmt.Errorf("redisproc: temp dir: %w", err)
	}
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--daemonize", "no", "--logfile", "", "--loglevel", "warning")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("redisproc: start %s: %w", bin, err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := ping(s.Addr); err == nil {
			return s, nil
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			_ = s.Stop()
			return nil, fmt.Errorf("redisproc: %s not ready: %w", s.Addr, errors.Join(err, ctx.Err()))
		}
		select {
		case <-s.done:
			_ = s.Stop()
			return nil, fmt.Errorf("redisproc: redis-server on port %d exited at start (port taken?)", port)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// PID returns the process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop kills the process by its PID (SIGKILL: nothing to save), waits for
// it and removes its directory. It is safe to call more than once and from
// several goroutines.
func (s *Server) Stop() error {
	var err error
	s.once.Do(func() {
		if kerr := syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
			err = fmt.Errorf("redisproc: kill %d: %w", s.cmd.Process.Pid, kerr)
		}
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			err = errors.Join(err, fmt.Errorf("redisproc: pid %d did not exit", s.cmd.Process.Pid))
		}
		_ = os.RemoveAll(s.dir)
	})
	return err
}

// freePort returns a loopback port that was free a moment ago (see
// proctest.FreePorts).
func freePort() (int, error) {
	ps, err := proctest.FreePorts(1)
	if err != nil {
		return 0, fmt.Errorf("redisproc: %w", err)
	}
	return ps[0], nil
}

// ping sends an inline PING and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 7)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "+PONG\r\n" {
		return fmt.Errorf("unexpected reply %q", buf[:n])
	}
	return nil
}
