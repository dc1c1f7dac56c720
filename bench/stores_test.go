package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/leasecron/leasecron/internal/testkit/etcdtest"
	"github.com/leasecron/leasecron/internal/testkit/mysqltest"
	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/internal/testkit/zktest"
	"github.com/leasecron/leasecron/lease"
	etcdbe "github.com/leasecron/leasecron/lease/etcd"
	mysqlbe "github.com/leasecron/leasecron/lease/mysql"
	pgbe "github.com/leasecron/leasecron/lease/postgres"
	zkbe "github.com/leasecron/leasecron/lease/zookeeper"
)

// Peer locks on the other stores, as they appear in benchmark names.
const (
	libEtcdMutex = "etcd-concurrency-mutex"
	libZKLock    = "zk-lock"
)

// store is one started store: how to open leasecron's backend on it and
// the other implementations of Acquire+Release measured beside it.
type store struct {
	open  func(ctx context.Context) (lease.Backend, error)
	peers []peer
}

// peer is another implementation of Acquire+Release on the same store:
// start prepares it and returns one operation on key.
type peer struct {
	lib   string
	start func(b *testing.B) func(ctx context.Context, key string) error
}

// BenchmarkStoreAcquireRelease takes a lease and releases it on PostgreSQL
// (one server), MariaDB (one server), etcd (3 members) and ZooKeeper (3 servers), by 1 and 16
// goroutines, each on its own key; the floor is the store's two cheapest
// durable writes (insert and delete one row, key or znode), and the peer
// the lock users of that store would otherwise pick.
func BenchmarkStoreAcquireRelease(b *testing.B) {
	for _, name := range []string{"postgres", "mysql", "etcd", "zookeeper"} {
		b.Run("store="+name, func(b *testing.B) {
			s := startStore(b, name)
			be := openBackend(b, s)
			for _, conc := range []int{1, 16} {
				b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) {
					b.Run("lib="+libLease, func(b *testing.B) {
						measure(b, conc, nil, func(ctx context.Context, i int) error {
							l, err := be.Acquire(ctx, lease.Request{Key: fmt.Sprintf("ar-%d", i), TTL: lockTTL, Owner: "bench"})
							if err != nil {
								return err
							}
							return l.Release(ctx)
						})
					})
					for _, p := range s.peers {
						b.Run("lib="+p.lib, func(b *testing.B) {
							op := p.start(b)
							measure(b, conc, nil, func(ctx context.Context, i int) error {
								return op(ctx, fmt.Sprintf("%s-%d", p.lib, i))
							})
						})
					}
				})
			}
		})
	}
}

// BenchmarkStoreTick decides one tick of 10,000 jobs with one
// TryAcquireBatch on PostgreSQL and on MariaDB (one multi-row INSERT ... ON
// DUPLICATE KEY UPDATE in key order, then one SELECT of the outcome),
// against the floor of one raw multi-row upsert of the same keys.
func BenchmarkStoreTick(b *testing.B) {
	b.Run("store=postgres", func(b *testing.B) {
		srv := pgtest.Start(b)
		be := openBackend(b, store{open: func(ctx context.Context) (lease.Backend, error) { return pgbe.Open(ctx, pgbe.Config{URL: srv.URL()}) }})
		pool := pgPool(b, srv)
		benchTick(b, be, func(ctx context.Context, names []string) error {
			_, err := pool.Exec(ctx, "INSERT INTO bench_floor (key, v) SELECT k, 1 FROM unnest($1::text[]) AS k "+
				"ON CONFLICT (key) DO UPDATE SET v = bench_floor.v + 1", names)
			return err
		})
	})
	b.Run("store=mysql", func(b *testing.B) {
		srv := mysqltest.Start(b)
		be := openBackend(b, store{open: func(ctx context.Context) (lease.Backend, error) {
			return mysqlbe.Open(ctx, mysqlbe.Config{DSN: srv.DSN(), Timeout: 10 * time.Second})
		}})
		db := mysqlDB(b, srv)
		benchTick(b, be, func(ctx context.Context, names []string) error {
			args := make([]any, len(names))
			for i, n := range names {
				args[i] = n
			}
			_, err := db.ExecContext(ctx, "INSERT INTO bench_floor (k, v) VALUES "+
				strings.TrimSuffix(strings.Repeat("(?, 1), ", len(names)), ", ")+" ON DUPLICATE KEY UPDATE v = v + 1", args...)
			return err
		})
	})
}

// benchTick runs the tick of 10,000 jobs through be (lib=lease) and through
// floor, the raw upsert of the same keys (lib=floor).
func benchTick(b *testing.B, be lease.Backend, floor func(ctx context.Context, names []string) error) {
	const keys = 10000
	// round numbers the ticks across the runs of a sub-benchmark (the
	// testing package calls it again with a larger b.N), so that every
	// tick has its own keys.
	round := 0
	names := func() []string {
		round++
		out := make([]string, keys)
		for i := range out {
			out[i] = fmt.Sprintf("tick%d-job-%05d", round, i)
		}
		return out
	}
	b.Run("lib="+libLease, func(b *testing.B) {
		for n := 0; n < b.N; n++ {
			ks := names()
			reqs := make([]lease.Request, keys)
			for i := range reqs {
				reqs[i] = lease.Request{Key: ks[i], TTL: 30 * time.Second, Epoch: 1, Owner: "bench"}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			for _, res := range be.TryAcquireBatch(ctx, reqs) {
				if res.Err != nil {
					b.Fatal(res.Err)
				}
			}
			cancel()
		}
	})
	b.Run("lib="+libFloor, func(b *testing.B) {
		for n := 0; n < b.N; n++ {
			ks := names()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := floor(ctx, ks)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// mysqlDB opens the floor's pool (one round trip per statement, like the
// backend: interpolateParams) with its table.
func mysqlDB(b *testing.B, srv *mysqltest.Server) *sql.DB {
	b.Helper()
	db, err := sql.Open("mysql", srv.DSN()+"?interpolateParams=true")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS bench_floor (k VARBINARY(255) PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB"); err != nil {
		b.Fatal(err)
	}
	return db
}

func openBackend(b *testing.B, s store) lease.Backend {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	be, err := s.open(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = be.Close() })
	return be
}

// startStore starts the servers of the named store.
func startStore(b *testing.B, name string) store {
	b.Helper()
	switch name {
	case "postgres":
		srv := pgtest.Start(b)
		s := store{open: func(ctx context.Context) (lease.Backend, error) { return pgbe.Open(ctx, pgbe.Config{URL: srv.URL()}) }}
		s.peers = []peer{
			{libFloor, func(b *testing.B) func(context.Context, string) error {
				pool := pgPool(b, srv)
				return func(ctx context.Context, key string) error {
					if _, err := pool.Exec(ctx, "INSERT INTO bench_floor (key, v) VALUES ($1, 1) ON CONFLICT (key) DO UPDATE SET v = bench_floor.v + 1", key); err != nil {
						return err
					}
					_, err := pool.Exec(ctx, "DELETE FROM bench_floor WHERE key = $1", key)
					return err
				}
			}},
		}
		return s
	case "mysql":
		srv := mysqltest.Start(b)
		s := store{open: func(ctx context.Context) (lease.Backend, error) {
			return mysqlbe.Open(ctx, mysqlbe.Config{DSN: srv.DSN()})
		}}
		s.peers = []peer{
			{libFloor, func(b *testing.B) func(context.Context, string) error {
				db := mysqlDB(b, srv)
				return func(ctx context.Context, key string) error {
					if _, err := db.ExecContext(ctx, "INSERT INTO bench_floor (k, v) VALUES (?, 1) ON DUPLICATE KEY UPDATE v = v + 1", key); err != nil {
						return err
					}
					_, err := db.ExecContext(ctx, "DELETE FROM bench_floor WHERE k = ?", key)
					return err
				}
			}},
		}
		return s
	case "etcd":
		cl := etcdtest.Start(b)
		eps := cl.Endpoints()
		s := store{open: func(ctx context.Context) (lease.Backend, error) {
			return etcdbe.Open(ctx, etcdbe.Config{Endpoints: eps, Prefix: "/bench/"})
		}}
		s.peers = []peer{
			{libEtcdMutex, func(b *testing.B) func(context.Context, string) error {
				cli := etcdClient(b, eps)
				sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(lockTTL/time.Second)))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = sess.Close() })
				return func(ctx context.Context, key string) error {
					m := concurrency.NewMutex(sess, "/bench-mutex/"+key)
					if err := m.Lock(ctx); err != nil {
						return err
					}
					return m.Unlock(ctx)
				}
			}},
			{libFloor, func(b *testing.B) func(context.Context, string) error {
				cli := etcdClient(b, eps)
				return func(ctx context.Context, key string) error {
					if _, err := cli.Put(ctx, "/bench-floor/"+key, "x"); err != nil {
						return err
					}
					_, err := cli.Delete(ctx, "/bench-floor/"+key)
					return err
				}
			}},
		}
		return s
	case "zookeeper":
		e := zktest.Start(b, 3)
		addrs := e.Addrs()
		s := store{open: func(ctx context.Context) (lease.Backend, error) {
			return zkbe.Open(ctx, zkbe.Config{Servers: addrs, Root: "/bench"})
		}}
		s.peers = []peer{
			{libZKLock, func(b *testing.B) func(context.Context, string) error {
				conn := zkConn(b, addrs)
				return func(_ context.Context, key string) error {
					l := zk.NewLock(conn, "/bench-zklock-"+key, zk.WorldACL(zk.PermAll))
					if err := l.Lock(); err != nil {
						return err
					}
					return l.Unlock()
				}
			}},
			{libFloor, func(b *testing.B) func(context.Context, string) error {
				conn := zkConn(b, addrs)
				return func(_ context.Context, key string) error {
					p, err := conn.Create("/bench-floor-"+key, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
					if err != nil {
						return err
					}
					return conn.Delete(p, -1)
				}
			}},
		}
		return s
	}
	b.Fatalf("unknown store %s", name)
	return store{}
}

// pgPool opens a pool with the floor's table.
func pgPool(b *testing.B, srv *pgtest.Server) *pgxpool.Pool {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS bench_floor (key text PRIMARY KEY, v bigint NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	return pool
}

func etcdClient(b *testing.B, eps []string) *clientv3.Client {
	b.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: opTimeout})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	return cli
}

// quietZK drops go-zookeeper's log lines.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

func zkConn(b *testing.B, addrs []string) *zk.Conn {
	b.Helper()
	conn, events, err := zk.Connect(addrs, 30*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for range events { // drained until Close
		}
	}()
	b.Cleanup(conn.Close)
	deadline := time.Now().Add(10 * time.Second)
	for conn.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			b.Fatalf("zookeeper: no session after 10s (state %s)", conn.State())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return conn
}
