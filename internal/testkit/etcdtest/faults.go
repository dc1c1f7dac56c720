package etcdtest

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

// Kill SIGKILLs member i (SIGCONT first if paused) and waits until it is
// reaped. Killing a dead member does nothing.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	if err := c.members[i].kill(); err != nil {
		c.t.Fatalf("%v", err)
	}
}

func (m *member) kill() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return nil
	}
	cmd, done, paused := m.cmd, m.done, m.paused
	m.cmd, m.paused = nil, false
	select {
	case <-done:
		return nil
	default:
	}
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("etcdtest: killing %s (pid %d): %w", m.name, cmd.Process.Pid, err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(killTimeout):
		return fmt.Errorf("etcdtest: %s (pid %d) not reaped %s after SIGKILL", m.name, cmd.Process.Pid, killTimeout)
	}
}

func (c *Cluster) killAll() {
	for _, m := range c.members {
		if err := m.kill(); err != nil {
			c.t.Errorf("etcdtest: cleanup: %v", err)
		}
	}
}

// Restart starts killed member i again on its ports from its data
// directory; it rejoins the cluster. With waitHealthy it waits until the
// member knows a leader (which needs a quorum of members running).
func (c *Cluster) Restart(i int, waitHealthy bool) {
	c.t.Helper()
	m := c.members[i]
	m.mu.Lock()
	running := m.cmd != nil
	m.mu.Unlock()
	if running {
		c.t.Fatalf("etcdtest: restart %s: still running", m.name)
	}
	if err := c.spawn(m); err != nil {
		c.t.Fatalf("%v", err)
	}
	if waitHealthy {
		if err := c.waitHealthy(m); err != nil {
			c.t.Fatalf("%v", err)
		}
	}
}

// WaitHealthy waits until member i knows a leader.
func (c *Cluster) WaitHealthy(i int) {
	c.t.Helper()
	if err := c.waitHealthy(c.members[i]); err != nil {
		c.t.Fatalf("%v", err)
	}
}

// Pause sends SIGSTOP to member i and waits until it is stopped.
func (c *Cluster) Pause(i int) { c.t.Helper(); c.signal(i, syscall.SIGSTOP, true) }

// Resume sends SIGCONT to member i.
func (c *Cluster) Resume(i int) { c.t.Helper(); c.signal(i, syscall.SIGCONT, false) }

func (c *Cluster) signal(i int, sig syscall.Signal, pause bool) {
	c.t.Helper()
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		c.t.Fatalf("etcdtest: %v to %s: not running", sig, m.name)
	}
	if err := m.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("etcdtest: %v to %s (pid %d): %v", sig, m.name, m.cmd.Process.Pid, err)
	}
	m.paused = pause
	if pause {
		if err := proctest.WaitStopped(m.cmd.Process.Pid, 5*time.Second); err != nil {
			c.t.Fatalf("etcdtest: %s: %v", m.name, err)
		}
	}
}

// PID returns member i's process id, 0 while killed.
func (c *Cluster) PID(i int) int {
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}
