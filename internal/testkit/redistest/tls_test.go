package redistest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

func TestTLS(t *testing.T) {
	t.Parallel()
	ca := redistest.NewCA(t)
	cl := redistest.Start(t, 1, redistest.WithTLS(ca), redistest.WithPassword("pw"))
	n := cl.Nodes[0]
	if !strings.HasPrefix(n.TLSURL(), "rediss://:pw@127.0.0.1:") || n.TLSAddr() == n.Addr() {
		t.Fatalf("TLSURL %q, TLSAddr %q, Addr %q", n.TLSURL(), n.TLSAddr(), n.Addr())
	}
	ctx := ctxT(t, 20*time.Second)
	o, err := redis.ParseURL(n.TLSURL())
	if err != nil {
		t.Fatal(err)
	}
	o.TLSConfig.RootCAs = ca.ClientConfig().RootCAs
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Set(ctx, "k", "over tls", 0).Err(); err != nil {
		t.Fatalf("SET over TLS: %v", err)
	}
	if v, err := n.Client().Get(ctx, "k").Result(); err != nil || v != "over tls" {
		t.Errorf("GET on the plain port: %q, %v", v, err)
	}
	// Without the CA the server is not trusted.
	o2, _ := redis.ParseURL(n.TLSURL())
	o2.MaxRetries = -1
	c2 := redis.NewClient(o2)
	t.Cleanup(func() { _ = c2.Close() })
	if err := c2.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("PING over TLS without trusting the CA: %v", err)
	}
}
