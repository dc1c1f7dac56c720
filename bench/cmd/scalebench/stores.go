package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/backend"
	pgbackend "github.com/leasecron/leasecron/backend/postgres"
	redisbackend "github.com/leasecron/leasecron/backend/redis"
	"github.com/leasecron/leasecron/lease"
)

// store is one backend under test: how each simulated host opens its own
// client, the config section the schedulers get, and how the servers
// count the requests they executed.
type store interface {
	// name is "redis" or "postgres".
	name() string
	// servers describes the servers for the report ("5 redis-server 7.0").
	servers() string
	// open opens one host's own client; space separates the runs of
	// different scenarios (a key prefix, a table); timeout, when not 0,
	// replaces the store's request timeout.
	open(ctx context.Context, space string, timeout time.Duration) (backend.Backend, error)
	// section is the config file's backend section for space.
	section(space string, timeout time.Duration) string
	// requests returns the requests the servers executed so far,
	// excluding the reads of this counter itself.
	requests(ctx context.Context) (int64, error)
	// settle is how long after a burst the counter needs to show all of
	// it.
	settle() time.Duration
	// unit names what requests counts, for the report.
	unit() string
	close()
}

// redisStore is K redis-server nodes.
type redisStore struct {
	addrs   []string
	admin   []*redis.Client
	version string
	// guard is the clients' restart guard: the daemon uses lease.ttl;
	// shorter here so that the fresh nodes vote soon.
	guard time.Duration
	// timeout is the per-node request timeout (the daemon's default is
	// lease.DefaultTimeout, 50 ms).
	timeout time.Duration
	// reads counts the INFO calls of requests and work (one per node
	// each). Only the main goroutine reads the counters.
	reads int64
}

func (r *redisStore) name() string { return "redis" }

func (r *redisStore) servers() string {
	return fmt.Sprintf("%d × redis-server %s", len(r.addrs), r.version)
}

func (r *redisStore) urls() []string {
	u := make([]string, len(r.addrs))
	for i, a := range r.addrs {
		u[i] = "redis://" + a + "/0"
	}
	return u
}

// open opens a Redlock client as cmd/leasecron's openRedis does, with the
// default go-redis pools, but a restart guard of r.guard instead of
// lease.ttl, and the per-node timeout timeout (0: r.timeout).
func (r *redisStore) open(_ context.Context, space string, timeout time.Duration) (backend.Backend, error) {
	if timeout == 0 {
		timeout = r.timeout
	}
	be, err := redisbackend.Open(r.urls(), space,
		lease.WithTimeout(timeout), lease.WithDrift(0.01), lease.WithRestartGuard(r.guard))
	if err != nil {
		return nil, fmt.Errorf("open redis backend: %w", err)
	}
	return be, nil
}

func (r *redisStore) section(space string, timeout time.Duration) string {
	if timeout == 0 {
		timeout = r.timeout
	}
	var b strings.Builder
	b.WriteString("redis:\n  prefix: " + space + "\n  timeout: " + timeout.String() + "\n  nodes:\n")
	for _, u := range r.urls() {
		b.WriteString("    - " + u + "\n")
	}
	return b.String()
}

// clientCommands are the commands a client sends itself; every other
// command in INFO commandstats was called by a script (the lease
// client's acquire, complete, entries, log... scripts) and is counted in
// work, not in requests.
var clientCommands = map[string]bool{
	"evalsha": true, "eval": true, "evalsha_ro": true, "eval_ro": true, "ping": true, "info": true,
	"script": true, "hello": true, "client": true, "select": true, "auth": true, "command": true,
}

// requests sums the commands the clients sent to every node (INFO
// commandstats: script calls and the few plain commands), leaving out
// this counter's INFO calls.
func (r *redisStore) requests(ctx context.Context) (int64, error) {
	by, err := r.byCommand(ctx)
	if err != nil {
		return 0, err
	}
	r.reads += int64(len(r.admin))
	var total int64
	for name, n := range by {
		if base, _, _ := strings.Cut(name, "|"); clientCommands[base] {
			total += n
		}
	}
	return total - r.reads, nil
}

// work sums every command the nodes executed, those the scripts called
// included, leaving out this counter's INFO calls.
func (r *redisStore) work(ctx context.Context) (int64, error) {
	by, err := r.byCommand(ctx)
	if err != nil {
		return 0, err
	}
	r.reads += int64(len(r.admin))
	var total int64
	for _, n := range by {
		total += n
	}
	return total - r.reads, nil
}

// byCommand is requests by command name.
func (r *redisStore) byCommand(ctx context.Context) (map[string]int64, error) {
	by := map[string]int64{}
	for _, c := range r.admin {
		s, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return nil, fmt.Errorf("INFO commandstats on %s: %w", c.Options().Addr, err)
		}
		for _, line := range strings.Split(s, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") {
				continue
			}
			calls, _, _ := strings.Cut(rest, ",")
			n, err := strconv.ParseInt(strings.TrimPrefix(calls, "calls="), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("INFO commandstats on %s: %q: %w", c.Options().Addr, line, err)
			}
			by[strings.TrimPrefix(name, "cmdstat_")] += n
		}
	}
	return by, nil
}

func (r *redisStore) settle() time.Duration { return 200 * time.Millisecond }

func (r *redisStore) unit() string {
	return "the commands the clients sent, summed over the nodes (INFO commandstats: EVALSHA and the few plain commands such as PING; " +
		"the commands the scripts call inside the server are not requests, see Redis work)"
}

func (r *redisStore) close() {
	for _, c := range r.admin {
		_ = c.Close()
	}
}

// pgStore is one PostgreSQL server.
type pgStore struct {
	url     string
	admin   *pgx.Conn
	version string
	// poolMax bounds each host's pool of connections; 0: pgxpool's
	// default, max(4, CPUs), as the daemon has it.
	poolMax int
	// reads counts the reads of pg_stat_database, which are transactions
	// themselves. Only the main goroutine reads the counters.
	reads int64
}

func (p *pgStore) name() string { return "postgres" }

func (p *pgStore) servers() string { return "1 × " + p.version }

// open opens the PostgreSQL backend as cmd/leasecron's openBackend does
// (per-request timeout 2 s), with a pool of at most poolMax connections.
func (p *pgStore) open(ctx context.Context, space string, timeout time.Duration) (backend.Backend, error) {
	if timeout == 0 {
		timeout = pgbackend.DefaultTimeout
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u := p.url
	if p.poolMax > 0 {
		u += "&pool_max_conns=" + strconv.Itoa(p.poolMax)
	}
	be, err := pgbackend.Open(octx, u, pgbackend.WithTable(space), pgbackend.WithTimeout(timeout))
	if err != nil {
		return nil, fmt.Errorf("open postgres backend: %w", err)
	}
	return be, nil
}

func (p *pgStore) section(space string, timeout time.Duration) string {
	if timeout == 0 {
		timeout = pgbackend.DefaultTimeout
	}
	return "postgres:\n  url: " + p.url + "\n  table: " + space + "\n  timeout: " + timeout.String() + "\n"
}

// requests is the transactions the database committed or rolled back
// (pg_stat_database); every statement of the backend is one, and so is
// each read of this counter (subtracted).
func (p *pgStore) requests(ctx context.Context) (int64, error) {
	var n int64
	err := p.admin.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read pg_stat_database: %w", err)
	}
	p.reads++
	return n - p.reads, nil
}

// settle: a backend reports its transactions to pg_stat_database at most
// once a second while busy, and within 10 s once idle.
func (p *pgStore) settle() time.Duration { return 11 * time.Second }

func (p *pgStore) unit() string {
	return "transactions (statements) the server executed (pg_stat_database xact_commit + xact_rollback)"
}

func (p *pgStore) close() { _ = p.admin.Close(context.Background()) }
