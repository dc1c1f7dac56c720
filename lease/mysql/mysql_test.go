package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/mysql"
)

// testTimeout is the per-request timeout of the tests' clients: short, so
// fault tests are quick, but far above a loaded machine's commit latency.
const testTimeout = 500 * time.Millisecond

func open(t testing.TB, dsn string, opts ...mysql.Option) *mysql.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := mysql.OpenWith(ctx, dsn, append([]mysql.Option{mysql.WithTimeout(testTimeout)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func try(t testing.TB, b lease.Backend, req lease.Request) (lease.Lease, error) {
	t.Helper()
	r := b.TryAcquireBatch(ctxT(t), []lease.Request{req})[0]
	return r.Lease, r.Err
}
