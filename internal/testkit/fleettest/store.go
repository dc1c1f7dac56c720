package fleettest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// Server is one process of the fleet's lease store: a Redis node, the
// PostgreSQL server, an etcd member or a ZooKeeper server. The nemesis
// kills, restarts and pauses it; Restart brings it back on the same
// address (with its data when Durable).
type Server interface {
	Addr() string
	Kill()
	Restart()
	Pause()
	Resume()
}

// Store is the fleet's lease store: its servers, and the backend section
// of a daemon's config that reaches them through that daemon's links.
type Store struct {
	Backend string // "redis", "postgres", "etcd" or "zookeeper"
	Servers []Server
	// Durable reports whether server i keeps every acknowledged write
	// across a restart.
	Durable func(i int) bool
	// Section renders the config's backend section (YAML, at the top
	// level) for a daemon whose links to the servers listen on addrs (in
	// the order of Servers).
	Section func(addrs []string, timeout time.Duration) string
}

// Backends lists the backends a fleet can run on.
var Backends = []string{"redis"}

// startStore starts the servers of cfg.Backend.
func startStore(t testing.TB, cfg Config) (*Store, *redistest.Cluster) {
	t.Helper()
	switch cfg.Backend {
	case "", "redis":
		var c *redistest.Cluster
		switch {
		case cfg.AOFNodes <= 0:
			c = redistest.Start(t, cfg.Nodes)
		case cfg.AOFNodes >= cfg.Nodes:
			c = redistest.Start(t, cfg.Nodes, redistest.WithAOF())
		default:
			plain := redistest.Start(t, cfg.Nodes-cfg.AOFNodes)
			aof := redistest.Start(t, cfg.AOFNodes, redistest.WithAOF())
			c = &redistest.Cluster{Nodes: append(plain.Nodes, aof.Nodes...)}
		}
		s := &Store{Backend: "redis", Durable: aofDurable(cfg),
			Section: func(addrs []string, timeout time.Duration) string {
				var b strings.Builder
				b.WriteString("redis:\n  nodes:\n")
				for _, a := range addrs {
					fmt.Fprintf(&b, "    - %q\n", "redis://"+a+"/0")
				}
				fmt.Fprintf(&b, "  prefix: leasecron\n  timeout: %s\n", timeout)
				return b.String()
			}}
		for _, n := range c.Nodes {
			s.Servers = append(s.Servers, n)
		}
		return s, c
	}
	t.Fatalf("fleettest: unknown backend %q (have %v)", cfg.Backend, Backends)
	return nil, nil
}

// aofDurable reports, for a Redis fleet, whether node i keeps an
// append-only file (the last cfg.AOFNodes nodes do).
func aofDurable(cfg Config) func(i int) bool {
	return func(i int) bool { return i >= cfg.Nodes-cfg.AOFNodes }
}
