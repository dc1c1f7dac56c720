package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
	etcdbackend "github.com/leasecron/leasecron/lease/etcd"
	mysqlbackend "github.com/leasecron/leasecron/lease/mysql"
	pgbackend "github.com/leasecron/leasecron/lease/postgres"
	"github.com/leasecron/leasecron/lease/redlock"
	zkbackend "github.com/leasecron/leasecron/lease/zookeeper"
	"github.com/leasecron/leasecron/scheduler"
)

// backendOptions are what a command asks of the backend beyond the config.
type backendOptions struct {
	log     *slog.Logger       // restarts and failovers of servers (nil: none)
	metrics *scheduler.Metrics // votes and restarts (nil: none)
	// minTimeout raises the per-request timeout (status reads from a
	// terminal, where 50 ms would only make it fail on a busy node).
	minTimeout time.Duration
	// unsafeNoRestartDetection lets restarted Redis nodes vote at once:
	// only for the fault suite's negative control.
	unsafeNoRestartDetection bool
}

// openBackend opens the lease backend that cfg's one backend section names.
// It is the one place the daemon, trigger and status pick a backend; the
// scheduler sees only the lease.Backend interface.
func openBackend(ctx context.Context, cfg *scheduler.Config, o backendOptions) (lease.Backend, error) {
	switch cfg.Backend {
	case scheduler.BackendPostgres:
		pc := cfg.Postgres
		schema, table := pc.TableName()
		if schema != "" {
			table = schema + "." + table
		}
		octx, cancel := context.WithTimeout(ctx, max(pc.Timeout, o.minTimeout, 5*time.Second))
		defer cancel()
		be, err := pgbackend.Open(octx, pc.ConnString(), pgbackend.WithTable(table),
			pgbackend.WithTimeout(max(pc.Timeout, o.minTimeout)), pgbackend.WithDrift(cfg.Lease.Drift))
		if err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		return be, nil
	case scheduler.BackendMySQL:
		mc := cfg.MySQL
		octx, cancel := context.WithTimeout(ctx, max(mc.Timeout, o.minTimeout, 5*time.Second))
		defer cancel()
		be, err := mysqlbackend.Open(octx, mc.ConnString(), mysqlbackend.WithTable(mc.Table),
			mysqlbackend.WithTimeout(max(mc.Timeout, o.minTimeout)), mysqlbackend.WithDrift(cfg.Lease.Drift))
		if err != nil {
			return nil, fmt.Errorf("mysql: %w", err)
		}
		return be, nil
	case scheduler.BackendEtcd:
		ec := cfg.Etcd.BackendConfig()
		ec.Timeout = max(ec.Timeout, o.minTimeout)
		octx, cancel := context.WithTimeout(ctx, max(ec.Timeout, 5*time.Second))
		defer cancel()
		be, err := etcdbackend.Open(octx, ec, etcdbackend.WithDrift(cfg.Lease.Drift))
		if err != nil {
			return nil, fmt.Errorf("etcd %s: %w", strings.Join(cfg.Etcd.Endpoints, ","), err)
		}
		return be, nil
	case scheduler.BackendZooKeeper:
		// The session timeout is lease.ttl: the servers expire the
		// session, and with it the locks, that long after the daemon was
		// last heard from.
		zc := cfg.ZooKeeper.BackendConfig(cfg.Lease.TTL, cfg.Lease.Drift)
		if t := max(zc.Timeout, o.minTimeout); t < zc.SessionTimeout/3 {
			zc.Timeout = t
		}
		octx, cancel := context.WithTimeout(ctx, max(zc.SessionTimeout, 5*time.Second))
		defer cancel()
		be, err := zkbackend.Open(octx, zc)
		if err != nil {
			return nil, fmt.Errorf("zookeeper %s: %w", strings.Join(cfg.ZooKeeper.Servers, ","), err)
		}
		return be, nil
	case "", scheduler.BackendRedis:
		return openRedis(cfg, o)
	}
	return nil, fmt.Errorf("backend %q: not built into this leasecron", cfg.Backend)
}

// openRedis opens the Redlock over cfg's Redis nodes.
func openRedis(cfg *scheduler.Config, o backendOptions) (lease.Backend, error) {
	m, log := o.metrics, o.log
	lopts := []redlock.Option{
		redlock.WithTimeout(max(cfg.Redis.Timeout, o.minTimeout)),
		redlock.WithDrift(cfg.Lease.Drift),
		redlock.WithRestartGuard(cfg.Lease.TTL),
		redlock.WithObserver(redlock.Observer{
			OnVote: func(e redlock.VoteEvent) { m.Vote(e.Node, e.Op, e.Vote.String(), e.Latency) },
			OnRestart: func(node string, at time.Time) {
				m.NodeRestart(node)
				if log != nil {
					log.Warn("redis node restarted or failed over; it does not vote until the restart guard passed",
						"node", node, "votes_again_in", time.Until(at).Round(time.Second))
				}
			},
		}),
	}
	if o.unsafeNoRestartDetection {
		lopts = append(lopts, redlock.WithoutRestartDetection())
	}
	be, err := redlock.Open(cfg.Redis.NodeURLs(), cfg.Redis.Prefix, lopts...)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return be, nil
}
