package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasecron/leasecron/backend"
	etcdbe "github.com/leasecron/leasecron/backend/etcd"
	pgbe "github.com/leasecron/leasecron/backend/postgres"
	zkbe "github.com/leasecron/leasecron/backend/zookeeper"
	"github.com/leasecron/leasecron/bench/internal/storeproc"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Implementations other than leasecron's.
const (
	implSelect1    = "SELECT 1"
	implRawUpsert  = "raw INSERT ... ON CONFLICT"
	implEtcdGet    = "Get"
	implEtcdMutex  = "concurrency.Mutex"
	implEtcdKeep   = "KeepAliveOnce"
	implZKExists   = "Exists"
	implZKLock     = "zk.Lock"
	rawUpsertTable = "leasebench_raw"
)

func (b *bench) pgKit(p *storeproc.Proc) *storeKit {
	k := &storeKit{name: storePG, proc: p}
	k.open = func(ctx context.Context) (backend.Backend, error) { return pgbe.Open(ctx, p.URL()) }
	k.cases = append(b.commonCases(storePG), storeCase{storePG, opRaw, implRawUpsert, 1})
	k.prepare = func(ctx context.Context, c storeCase, prefix string) (prepared, error) {
		// The backend's pool settings: pgx defaults, exec mode Exec, no ping.
		cfg, err := pgxpool.ParseConfig(p.URL())
		if err != nil {
			return prepared{}, err
		}
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return prepared{}, err
		}
		done := func() error { pool.Close(); return nil }
		switch c.op {
		case opFloor:
			return prepared{op: func(ctx context.Context, _ int) error {
				var n int
				return pool.QueryRow(ctx, "SELECT 1").Scan(&n)
			}, done: done}, nil
		case opWFloor:
			if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+rawUpsertTable+" (key text PRIMARY KEY, v bigint NOT NULL)"); err != nil {
				pool.Close()
				return prepared{}, err
			}
			return prepared{op: func(ctx context.Context, i int) error {
				_, err := pool.Exec(ctx, "INSERT INTO "+rawUpsertTable+" (key, v) VALUES ($1, 1) ON CONFLICT (key) DO UPDATE SET v = "+rawUpsertTable+".v + 1",
					fmt.Sprintf("%s-w%d", prefix, i))
				return err
			}, done: done}, nil
		case opRaw:
			if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+rawUpsertTable+" (key text PRIMARY KEY, v bigint NOT NULL)"); err != nil {
				pool.Close()
				return prepared{}, err
			}
			keys := make([]string, b.cfg.batchKeys)
			for i := range keys {
				keys[i] = fmt.Sprintf("%s-j%d", prefix, i)
			}
			return prepared{op: func(ctx context.Context, _ int) error {
				tag, err := pool.Exec(ctx, "INSERT INTO "+rawUpsertTable+" (key, v) SELECT k, 1 FROM unnest($1::text[]) AS k "+
					"ON CONFLICT (key) DO UPDATE SET v = "+rawUpsertTable+".v + 1", keys)
				if err == nil && tag.RowsAffected() != int64(len(keys)) {
					err = fmt.Errorf("raw upsert: %d rows, want %d", tag.RowsAffected(), len(keys))
				}
				return err
			}, done: done}, nil
		}
		pool.Close()
		return prepared{}, fmt.Errorf("no %s case %s", storePG, c.id())
	}
	return k
}

func (b *bench) etcdKit(p *storeproc.Proc) *storeKit {
	ep := "http://" + p.Addr
	k := &storeKit{name: storeEtcd, proc: p}
	k.open = func(ctx context.Context) (backend.Backend, error) {
		return etcdbe.Open(ctx, etcdbe.Config{Endpoints: []string{ep}, Prefix: "/leasebench/"})
	}
	k.cases = b.commonCases(storeEtcd, implEtcdMutex)
	for _, conc := range []int{1, 16} {
		k.cases = append(k.cases, storeCase{storeEtcd, opExtend, implEtcdKeep, conc})
	}
	ttlSec := int(b.cfg.ttl / time.Second)
	k.prepare = func(ctx context.Context, c storeCase, prefix string) (prepared, error) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
		if err != nil {
			return prepared{}, err
		}
		done := cli.Close
		switch {
		case c.op == opFloor:
			return prepared{op: func(ctx context.Context, _ int) error {
				_, err := cli.Get(ctx, "/leasebench-floor")
				return err
			}, done: done}, nil
		case c.op == opWFloor:
			return prepared{op: func(ctx context.Context, i int) error {
				_, err := cli.Put(ctx, fmt.Sprintf("/leasebench-wfloor/%s-w%d", prefix, i), "x")
				return err
			}, done: done}, nil
		case c.impl == implEtcdMutex:
			sess, err := concurrency.NewSession(cli, concurrency.WithTTL(ttlSec))
			if err != nil {
				_ = cli.Close()
				return prepared{}, err
			}
			return prepared{op: func(ctx context.Context, i int) error {
				m := concurrency.NewMutex(sess, fmt.Sprintf("/leasebench-mutex/%s-w%d", prefix, i))
				if err := m.Lock(ctx); err != nil {
					return err
				}
				return m.Unlock(ctx)
			}, done: func() error { return errors.Join(sess.Close(), cli.Close()) }}, nil
		case c.impl == implEtcdKeep:
			ids := make([]clientv3.LeaseID, c.conc)
			for i := range ids {
				g, err := cli.Grant(ctx, int64(ttlSec))
				if err != nil {
					_ = cli.Close()
					return prepared{}, err
				}
				ids[i] = g.ID
			}
			return prepared{op: func(ctx context.Context, i int) error {
				_, err := cli.KeepAliveOnce(ctx, ids[i])
				return err
			}, done: func() error {
				for _, id := range ids {
					_, _ = cli.Revoke(ctx, id)
				}
				return cli.Close()
			}}, nil
		}
		_ = cli.Close()
		return prepared{}, fmt.Errorf("no %s case %s", storeEtcd, c.id())
	}
	return k
}

// quietZK drops go-zookeeper's log lines.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

func (b *bench) zkKit(p *storeproc.Proc) *storeKit {
	k := &storeKit{name: storeZK, proc: p}
	k.open = func(ctx context.Context) (backend.Backend, error) {
		return zkbe.Open(ctx, zkbe.Config{Servers: []string{p.Addr}, Root: "/leasebench"})
	}
	k.cases = b.commonCases(storeZK, implZKLock)
	k.prepare = func(ctx context.Context, c storeCase, prefix string) (prepared, error) {
		conn, events, err := zk.Connect([]string{p.Addr}, 30*time.Second, zk.WithLogger(quietZK{}))
		if err != nil {
			return prepared{}, err
		}
		go func() {
			for range events { //nolint:revive // drained until Close
			}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for conn.State() != zk.StateHasSession {
			if time.Now().After(deadline) {
				conn.Close()
				return prepared{}, fmt.Errorf("zookeeper: no session after 10s (state %s)", conn.State())
			}
			time.Sleep(5 * time.Millisecond)
		}
		done := func() error { conn.Close(); return nil }
		switch {
		case c.op == opFloor:
			return prepared{op: func(context.Context, int) error {
				_, _, err := conn.Exists("/")
				return err
			}, done: done}, nil
		case c.op == opWFloor:
			paths := make([]string, c.conc)
			for i := range paths {
				paths[i] = fmt.Sprintf("/leasebench-wfloor-%s-w%d", strings.ReplaceAll(prefix, "/", "-"), i)
				if _, err := conn.Create(paths[i], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
					conn.Close()
					return prepared{}, err
				}
			}
			return prepared{op: func(_ context.Context, i int) error {
				_, err := conn.Set(paths[i], []byte("x"), -1)
				return err
			}, done: func() error {
				for _, p := range paths {
					_ = conn.Delete(p, -1)
				}
				conn.Close()
				return nil
			}}, nil
		case c.impl == implZKLock:
			locks := make([]*zk.Lock, c.conc)
			for i := range locks {
				locks[i] = zk.NewLock(conn, fmt.Sprintf("/leasebench-zklock/%s-w%d", strings.ReplaceAll(prefix, "/", "-"), i), zk.WorldACL(zk.PermAll))
			}
			return prepared{op: func(_ context.Context, i int) error {
				if err := locks[i].Lock(); err != nil {
					return err
				}
				return locks[i].Unlock()
			}, done: done}, nil
		}
		conn.Close()
		return prepared{}, fmt.Errorf("no %s case %s", storeZK, c.id())
	}
	return k
}
