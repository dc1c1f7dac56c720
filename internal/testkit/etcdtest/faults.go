package etcdtest

import (
	"fmt"

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
	p := m.proc
	m.proc = nil
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	if err := p.Kill(killTimeout); err != nil {
		return fmt.Errorf("etcdtest: %s: %w", m.name, err)
	}
	return nil
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
	running := m.proc != nil
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
func (c *Cluster) Pause(i int) {
	c.t.Helper()
	if err := c.running(i).Pause(); err != nil {
		c.t.Fatalf("etcdtest: %s: %v", c.members[i].name, err)
	}
}

// Resume sends SIGCONT to member i.
func (c *Cluster) Resume(i int) {
	c.t.Helper()
	if err := c.running(i).Resume(); err != nil {
		c.t.Fatalf("etcdtest: %s: %v", c.members[i].name, err)
	}
}

// running returns member i's process, failing the test while it is killed.
func (c *Cluster) running(i int) *proctest.Proc {
	c.t.Helper()
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		c.t.Fatalf("etcdtest: %s: not running", m.name)
	}
	return m.proc
}

// PID returns member i's process id, 0 while killed.
func (c *Cluster) PID(i int) int {
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return 0
	}
	return m.proc.PID()
}
