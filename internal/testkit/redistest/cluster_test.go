package redistest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

func TestRedisCluster(t *testing.T) {
	t.Parallel()
	rc := redistest.StartRedisCluster(t)
	addrs := rc.Addrs()
	if len(addrs) != 3 || len(rc.Nodes) != 3 {
		t.Fatalf("addrs %v", addrs)
	}
	want := fmt.Sprintf("redis://%s?addr=%s&addr=%s", addrs[0], addrs[1], addrs[2])
	if rc.URL() != want {
		t.Errorf("URL %q, want %q", rc.URL(), want)
	}
	o, err := redis.ParseClusterURL(rc.URL())
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClusterClient(o)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t, 20*time.Second)

	// Keys in different slots land on different masters.
	slots := map[int64]bool{}
	for i := range 30 {
		k := fmt.Sprintf("key-%d", i)
		if err := c.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		slot, err := c.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
	}
	for i := range 30 {
		k := fmt.Sprintf("key-%d", i)
		if v, err := rc.Client().Get(ctx, k).Int(); err != nil || v != i {
			t.Errorf("GET %s = %d, %v", k, v, err)
		}
	}
	if len(slots) < 2 {
		t.Errorf("all keys in %d slot(s)", len(slots))
	}
	used := 0
	for _, n := range rc.Nodes {
		if size, err := n.Client().DBSize(ctx).Result(); err != nil {
			t.Fatal(err)
		} else if size > 0 {
			used++
		}
	}
	if used < 2 {
		t.Errorf("keys on %d master(s), want them spread", used)
	}
}
