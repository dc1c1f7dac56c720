package faultsuite

import (
	"cmp"
	"time"
)

// Job is one recorder job in a fleet's schedule.
type Job struct {
	Name       string
	Every      time.Duration // schedule "@every Every"
	Sleep      time.Duration // how long one run takes
	Deadline   time.Duration // 0: the daemon's default (the next tick)
	Timeout    time.Duration // 0: none
	Overlap    string        // "": default (skip)
	IgnoreTerm bool          // the job ignores SIGTERM; only SIGKILL stops it
	// Escapee, when set, makes the job start a child in a session of its
	// own (setsid) that logs heartbeats as part of the run until Escapee
	// after the run's start, whatever happens to the job's process group.
	Escapee time.Duration

	// The fleet keys of the job (see FleetKeys); zero values are not
	// written.
	FleetKeys
	// What makes the recorder fail (exit non-zero at its end).
	Fail
	// Extra is added to the job's item as it is (YAML lines indented
	// by 4 spaces: hooks, say).
	Extra string
}

// Config describes a fleet. Zero fields take the defaults of DefaultConfig.
type Config struct {
	// Backend is the lease store: "redis" (default), or another of
	// Backends.
	Backend string
	Nodes   int // the store's servers (Redis nodes; 1 PostgreSQL server; etcd or ZooKeeper members)
	Daemons int // leasecron daemons (hosts h0, h1, ...)
	// AOFNodes of the nodes (the last ones) keep an append-only file
	// with appendfsync always, so they restart with every acknowledged
	// write; the others restart empty.
	AOFNodes int
	// ClockStep runs the PostgreSQL server with a wall clock the
	// ServerClockStep fault can step (see pgtest.WithClockStep).
	ClockStep bool

	TTL           time.Duration
	Renew         time.Duration
	KillGrace     time.Duration
	Timeout       time.Duration // per-node request timeout
	Drift         float64
	ShutdownGrace time.Duration // 0: not written (the daemon's default, 30s)

	Jobs []Job

	// Args returns extra command-line flags for daemon i (for example
	// --test-clock-offset); nil for none.
	Args func(i int) []string
	// Env is added to every daemon's environment.
	Env []string
	// Heartbeat is the top-level heartbeat (0: not written, the
	// daemon's default 5s).
	Heartbeat time.Duration
	// Labels returns daemon i's labels (passed as LEASECRON_LABELS); nil
	// for none.
	Labels func(i int) map[string]string
	// MaxParallel returns daemon i's max_parallel (passed as
	// LEASECRON_MAX_PARALLEL, which overrides the file's; 0: not passed);
	// nil for none.
	MaxParallel func(i int) int
	// Orphans allows recorder jobs that outlive their daemons (negative
	// controls that switch the supervisor's kill off); the cleanup kills
	// them instead of failing the test.
	Orphans bool
}

// DefaultConfig is a short-TTL fleet of 3 daemons on 5 nodes. The TTL
// satisfies the daemon's timing rule (docs/configuration.md#lease-timing-rules):
// ttl*(1-drift) >= renew + kill_grace + kill margin + 2*timeout
// (0.5 + 0.3 + 0.3 + 0.1 = 1.2s <= 1.98s).
func DefaultConfig() Config {
	return Config{
		Nodes: 5, Daemons: 3,
		TTL: 2 * time.Second, Renew: 500 * time.Millisecond, KillGrace: 300 * time.Millisecond,
		Timeout: 50 * time.Millisecond, Drift: 0.01, ShutdownGrace: time.Second,
	}
}

// DefaultConfigFor is DefaultConfig on backend: Redis as DefaultConfig;
// PostgreSQL and MariaDB (1 server, timeout 200ms), etcd (3 members, 250ms) and
// ZooKeeper (3 servers, 250ms) with a 3 s TTL, so that the daemon's rules
// hold: timeout < ttl/10, and ttl >= 0.5 + 0.3 + 2*0.25 + 0.03 + 0.002 + 1
// = 2.332s. (ZooKeeper's session timeout is the TTL, within the test
// servers' 200ms..60s.)
func DefaultConfigFor(backend string) Config {
	c := DefaultConfig()
	c.Backend = backend
	switch backend {
	case "postgres", "mysql":
		c.Nodes, c.TTL, c.Timeout = 1, 3*time.Second, 200*time.Millisecond
	case "etcd", "zookeeper":
		c.Nodes, c.TTL, c.Timeout = 3, 3*time.Second, 250*time.Millisecond
	}
	return c
}

func (c *Config) fill() {
	d := DefaultConfigFor(c.Backend)
	c.Nodes = cmp.Or(c.Nodes, d.Nodes)
	c.Daemons = cmp.Or(c.Daemons, d.Daemons)
	c.TTL = cmp.Or(c.TTL, d.TTL)
	c.Renew = cmp.Or(c.Renew, d.Renew)
	c.KillGrace = cmp.Or(c.KillGrace, d.KillGrace)
	c.Timeout = cmp.Or(c.Timeout, d.Timeout)
	c.Drift = cmp.Or(c.Drift, d.Drift)
}
