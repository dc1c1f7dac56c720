package redlock

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
)

// TestEntriesVersionGuardNegativeControl runs entries.lua as shipped and
// with its exact version comparison replaced by a comparison of Lua
// numbers (doubles), on a real server: with unix-nanosecond versions one
// apart, the shipped script stores the higher one and the variant keeps
// the lower, which is why versions travel as 20 digits.
func TestEntriesVersionGuardNegativeControl(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t, 1).Nodes[0].Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const exact = "local function newer(a, b)\n"
	if !strings.Contains(entriesSrc, exact) {
		t.Fatal("entries.lua no longer defines newer(a, b)")
	}
	numeric := strings.Replace(entriesSrc, exact, exact+"  do return tonumber(a) > tonumber(b) end\n", 1)
	v := int64(1_763_936_000_123_456_789)
	for _, c := range []struct {
		name   string
		src    string
		stored int64 // 1 if the Put of v+1 over v must be stored
	}{
		{"shipped", entriesSrc, 1},
		{"numeric (control)", numeric, 0},
	} {
		keys := entryKeys("control." + c.name)
		if err := rdb.Eval(ctx, c.src, keys, "put", "e", encodeVersion(v), 0, "old").Err(); err != nil {
			t.Fatalf("%s: put v: %v", c.name, err)
		}
		got, err := rdb.Eval(ctx, c.src, keys, "put", "e", encodeVersion(v+1), 0, "new").Int64()
		if err != nil {
			t.Fatalf("%s: put v+1: %v", c.name, err)
		}
		if got != c.stored {
			t.Errorf("%s: Put of version v+1 over v returned %d, want %d", c.name, got, c.stored)
		}
	}
}

// wedge stalls each of lanes with an op whose reply blocks until the
// returned function is called, as a store round that takes long (a large
// List or Log) would; it returns once every lane is stuck.
func wedge(t *testing.T, lanes []*node) (unwedge func()) {
	t.Helper()
	hold := make(chan struct{})
	stuck := make(chan struct{}, len(lanes))
	for _, n := range lanes {
		if !n.submit(&op{reply: func([]*redis.Cmd, error) { stuck <- struct{}{}; <-hold }}) {
			t.Fatal("client closed")
		}
	}
	for range lanes {
		select {
		case <-stuck:
		case <-time.After(10 * time.Second):
			t.Fatal("a lane never took the wedge")
		}
	}
	var once sync.Once
	return func() { once.Do(func() { close(hold) }) }
}

// TestStoreLanesApart: entries and logs travel on lanes of their own, so a
// store round that takes long does not hold up grants and renewals (and
// the other way round). With every store lane stuck, Acquire, Extend and
// Release go through while PutEntry times out; with every lease lane
// stuck, the store calls go through while Acquire fails. Negative control:
// with the store calls put on the lease lanes (as before storeLanes), a
// stuck store round makes Acquire fail.
func TestStoreLanesApart(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 3)
	for _, shared := range []bool{false, true} {
		c, err := New(cl.URLs(), WithoutRestartDetection(), WithTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if shared {
			for _, s := range c.stores {
				s.close()
				<-s.laneDone
			}
			c.stores = c.nodes
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := c.Warm(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.PutEntry(ctx, "apart.entries", Entry{Name: "e", Version: 1}); err != nil {
			t.Fatal(err)
		}
		unwedge := wedge(t, c.stores)
		l, err := c.Acquire(ctx, lease.Request{Key: "apart.lease", TTL: 10 * time.Second})
		switch {
		case shared && err == nil:
			t.Errorf("control (store calls on the lease lanes): Acquire succeeded behind a stuck store round")
		case !shared && err != nil:
			t.Errorf("Acquire with every store lane stuck: %v", err)
		case !shared:
			if err := l.Extend(ctx, 10*time.Second); err != nil {
				t.Errorf("Extend with every store lane stuck: %v", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Errorf("Release with every store lane stuck: %v", err)
			}
			short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
			if err := c.PutEntry(short, "apart.entries", Entry{Name: "e", Version: 2}); err == nil {
				t.Errorf("PutEntry went through a stuck store lane: the wedge does not hold")
			}
			stop()
		}
		unwedge()
		if !shared {
			unwedge = wedge(t, c.nodes)
			if err := c.PutEntry(ctx, "apart.entries", Entry{Name: "e", Version: 3}); err != nil {
				t.Errorf("PutEntry with every lease lane stuck: %v", err)
			}
			if _, err := c.ReadLog(ctx, "apart.log", 5); err != nil {
				t.Errorf("ReadLog with every lease lane stuck: %v", err)
			}
			if _, err := c.Acquire(ctx, lease.Request{Key: "apart.lease2", TTL: 10 * time.Second}); err == nil {
				t.Errorf("Acquire went through a stuck lease lane: the wedge does not hold")
			}
			unwedge()
		}
		cancel()
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}
}
