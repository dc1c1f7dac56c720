// Package storeproc starts throw-away PostgreSQL, etcd and ZooKeeper
// servers (one process each, Debian binaries) on free loopback ports for
// the benchmarks, modelled on the project's internal/testkit/{pgtest,
// etcdtest,zktest}, and stops them by PID.
package storeproc

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

// Proc is one running server process.
type Proc struct {
	// Addr is host:port on 127.0.0.1 where clients connect.
	Addr string
	// Version is the server's version string, as far as known.
	Version string

	cmd  *exec.Cmd
	dir  string
	log  string
	done chan struct{}
	once sync.Once
	sig  syscall.Signal // first signal of Stop (SIGKILL, or SIGQUIT for postgres)
}

// PID returns the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Stop signals the process by its PID, waits for it (SIGKILL after 5 s)
// and removes its directory. Safe to call more than once.
func (p *Proc) Stop() error {
	var err error
	p.once.Do(func() {
		pid := p.cmd.Process.Pid
		if kerr := syscall.Kill(pid, p.sig); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
			err = fmt.Errorf("storeproc: kill %d: %w", pid, kerr)
		}
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(pid, syscall.SIGKILL)
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
				err = errors.Join(err, fmt.Errorf("storeproc: pid %d did not exit", pid))
			}
		}
		_ = os.RemoveAll(p.dir)
	})
	return err
}

// spawn starts cmd with its output in p.log and a Pdeathsig fallback.
func (p *Proc) spawn(cmd *exec.Cmd, cred *syscall.Credential) error {
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("storeproc: %w", err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("storeproc: start %s: %w", cmd.Path, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.done) }()
	return nil
}

// wait calls ready until it succeeds, the process exits or timeout passes.
func (p *Proc) wait(ctx context.Context, what string, timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("storeproc: %s not ready within %s: %w\n%s", what, timeout, errors.Join(err, ctx.Err()), tail(p.log))
		}
		select {
		case <-p.done:
			return fmt.Errorf("storeproc: %w: %s exited at start:\n%s", proctest.ErrPortTaken, what, tail(p.log))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// freePort returns a loopback port that was free a moment ago (see
// proctest.FreePorts).
func freePort() (int, error) {
	ps, err := proctest.FreePorts(1)
	if err != nil {
		return 0, fmt.Errorf("storeproc: %w", err)
	}
	return ps[0], nil
}

// retry calls start again, on new ports, while the server exits at start
// (a port taken before it bound it), up to proctest.StartAttempts times.
func retry(start func() (*Proc, error)) (*Proc, error) {
	var err error
	for range proctest.StartAttempts {
		var p *Proc
		if p, err = start(); err == nil || !errors.Is(err, proctest.ErrPortTaken) {
			return p, err
		}
	}
	return nil, err
}

// tcpRequest sends req to addr and returns what comes back until EOF.
func tcpRequest(addr, req string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(req)); err != nil {
		return "", err
	}
	var out []byte
	buf := make([]byte, 512)
	for {
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return string(out), nil
		}
	}
}

func version(bin string, args ...string) string {
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return "unknown"
	}
	s := string(out)
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}

func itoa(i int) string { return strconv.Itoa(i) }
