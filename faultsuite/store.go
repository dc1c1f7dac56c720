package faultsuite

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/etcdtest"
	"github.com/leasecron/leasecron/internal/testkit/mysqltest"
	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/internal/testkit/zktest"
)

// Server is one process of the fleet's lease store: a Redis node, the
// PostgreSQL or MariaDB server, an etcd member or a ZooKeeper server. The nemesis
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
	Backend string // "redis", "postgres", "mysql", "etcd" or "zookeeper"
	Servers []Server
	// Durable reports whether server i keeps every acknowledged write
	// across a restart.
	Durable func(i int) bool
	// Section renders the config's backend section (YAML, at the top
	// level) for a daemon whose links to the servers listen on addrs (in
	// the order of Servers).
	Section func(addrs []string, timeout time.Duration) string
	// Leader returns the index of the ensemble's leader (nil for a store
	// without one: Redis, PostgreSQL).
	Leader func() int
	// ReadTerms reads etcd's raft terms (nil for other stores): a new
	// leader restarts every lease's countdown (promotions.go).
	ReadTerms func() etcdtest.Terms
	// ClockStep sets the offset of the servers' wall clock (nil where it
	// cannot be stepped).
	ClockStep func(offset time.Duration)
}

// Backends lists the backends a fleet can run on.
var Backends = []string{"redis", "postgres", "mysql", "etcd", "zookeeper"}

// startStore starts the servers of cfg.Backend.
func startStore(t testing.TB, cfg Config) (*Store, *redistest.Cluster) {
	t.Helper()
	switch cfg.Backend {
	case "", "redis":
		return startRedis(t, cfg)
	case "postgres":
		return startPostgres(t, cfg), nil
	case "mysql":
		my := mysqltest.Start(t)
		return &Store{Backend: "mysql", Servers: []Server{my}, Durable: always,
			Section: func(addrs []string, timeout time.Duration) string {
				return fmt.Sprintf("mysql:\n  dsn: %q\n  timeout: %s\n", my.DSNAt(addrs[0]), timeout)
			}}, nil
	case "etcd":
		// The etcd client of lease/etcd does not sync its endpoints
		// from the cluster (no AutoSyncInterval): a daemon reaches the
		// members only through the proxied URLs of its section.
		c := etcdtest.Start(t)
		s := &Store{Backend: "etcd", Durable: always, Leader: c.Leader,
			ReadTerms: func() etcdtest.Terms { return c.ReadTerms(200 * time.Millisecond) },
			Section:   listSection("etcd:\n  endpoints:\n", "http://", "  prefix: /leasecron/\n")}
		for i := range c.Endpoints() {
			s.Servers = append(s.Servers, etcdMember{c: c, i: i})
		}
		return s, nil
	case "zookeeper":
		e := zktest.Start(t, cfg.Nodes)
		s := &Store{Backend: "zookeeper", Durable: always, Leader: e.Leader,
			Section: listSection("zookeeper:\n  servers:\n", "", "  root: /leasecron\n")}
		for _, srv := range e.Servers {
			s.Servers = append(s.Servers, zkServer{srv})
		}
		return s, nil
	}
	t.Fatalf("faultsuite: unknown backend %q (have %v)", cfg.Backend, Backends)
	return nil, nil
}

// listSection returns a Store.Section writing head, one list item per
// address (scheme before it), then tail and the timeout.
func listSection(head, scheme, tail string) func(addrs []string, timeout time.Duration) string {
	return func(addrs []string, timeout time.Duration) string {
		var b strings.Builder
		b.WriteString(head)
		for _, a := range addrs {
			fmt.Fprintf(&b, "    - %q\n", scheme+a)
		}
		fmt.Fprintf(&b, "%s  timeout: %s\n", tail, timeout)
		return b.String()
	}
}

// startRedis starts cfg.Nodes redis-server nodes, the last cfg.AOFNodes
// of them with an append-only file.
func startRedis(t testing.TB, cfg Config) (*Store, *redistest.Cluster) {
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
			urls := make([]string, len(addrs))
			for i, a := range addrs {
				urls[i] = a + "/0"
			}
			return listSection("redis:\n  nodes:\n", "redis://", "  prefix: leasecron\n")(urls, timeout)
		}}
	for _, n := range c.Nodes {
		s.Servers = append(s.Servers, n)
	}
	return s, c
}

// startPostgres starts one PostgreSQL server (with a steppable clock
// when cfg.ClockStep).
func startPostgres(t testing.TB, cfg Config) *Store {
	var opts []pgtest.Option
	if cfg.ClockStep {
		opts = append(opts, pgtest.WithClockStep())
	}
	pg := pgtest.Start(t, opts...)
	var step func(time.Duration)
	if cfg.ClockStep {
		step = pg.StepClock
	}
	return &Store{Backend: "postgres", Servers: []Server{pg}, Durable: always, ClockStep: step,
		Section: func(addrs []string, timeout time.Duration) string {
			u := url.URL{Scheme: "postgres", User: url.UserPassword(pgtest.User, pg.Password()), Host: addrs[0],
				Path: "/" + pgtest.Database, RawQuery: "sslmode=disable"}
			return fmt.Sprintf("postgres:\n  url: %q\n  timeout: %s\n", u.String(), timeout)
		}}
}

// aofDurable reports, for a Redis fleet, whether node i keeps an
// append-only file (the last cfg.AOFNodes nodes do).
func aofDurable(cfg Config) func(i int) bool {
	return func(i int) bool { return i >= cfg.Nodes-cfg.AOFNodes }
}

// always is Durable for a store whose every server keeps its
// acknowledged writes (fsync on commit) across a restart.
func always(int) bool { return true }

// etcdMember is member i of an etcd cluster as a Server. Restart does not
// wait for the member to be healthy: after a majority was killed, the
// first member back cannot be until a quorum is.
type etcdMember struct {
	c *etcdtest.Cluster
	i int
}

func (m etcdMember) Addr() string { return strings.TrimPrefix(m.c.Endpoint(m.i), "http://") }
func (m etcdMember) Kill()        { m.c.Kill(m.i) }
func (m etcdMember) Restart()     { m.c.Restart(m.i, false) }
func (m etcdMember) Pause()       { m.c.Pause(m.i) }
func (m etcdMember) Resume()      { m.c.Resume(m.i) }

// zkServer is a ZooKeeper server as a Server. Restart does not wait for
// it to serve, for the same reason as etcdMember's.
type zkServer struct{ *zktest.Server }

func (s zkServer) Restart() { s.Server.Start() }
