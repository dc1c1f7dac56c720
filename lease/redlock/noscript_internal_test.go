package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// TestNoScriptRetryKeepsOrder: a round whose calls failed with NOSCRIPT is
// resent after the scripts are loaded again, except a call on a lease that
// a later call of the round reached anyway (another connection had loaded
// that script meanwhile): resending it would apply it after the later
// call. Here an acquire fails (NOSCRIPT) and the release queued behind it
// succeeds: the acquire must not be resent, or its lock would be left
// behind its own release. An acquire of another lease in the same round is
// resent and granted.
func TestNoScriptRetryKeepsOrder(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 1)
	c, err := New(cl.URLs(), WithoutRestartDetection(), WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	rdb := cl.Nodes[0].Client()
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptLoad(ctx, genHead+releaseSrc).Err(); err != nil {
		t.Fatal(err)
	}
	acquire := func(key, value string) call {
		return call{script: acquireBatchScript, keys: []string{leaseKey(key)}, args: []any{"0", int64(5000), value, int64(5000), int64(0)}}
	}
	release := call{script: releaseScript, keys: []string{leaseKey("a")}, args: []any{"va x"}}
	got := make(chan []*redis.Cmd, 1)
	if !c.nodes[0].submit(&op{
		calls: []call{acquire("a", "va x"), release, acquire("b", "vb x")},
		reply: func(res []*redis.Cmd, err error) {
			if err != nil {
				t.Errorf("round failed: %v", err)
			}
			got <- res
		},
	}) {
		t.Fatal("client closed")
	}
	var res []*redis.Cmd
	select {
	case res = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no reply")
	}
	if !isNoScript(res[0].Err()) {
		t.Errorf("acquire a: %v, want NOSCRIPT (not resent)", res[0].Err())
	}
	if res[1].Err() != nil || res[2].Err() != nil {
		t.Errorf("release a: %v, acquire b (resent): %v", res[1].Err(), res[2].Err())
	}
	if n := rdb.Exists(ctx, leaseKey("a")).Val(); n != 0 {
		t.Error("the acquire of a was resent after its release: lock left behind")
	}
	if v := rdb.HGet(ctx, leaseKey("b"), "h").Val(); v != "vb x" {
		t.Errorf("lock b = %q, want the resent acquire's value", v)
	}
}
