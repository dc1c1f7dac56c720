package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// TestMarkerCheckedAfterUnwrappedScript: a round whose last call is a
// script without a marker-checking variant (one not listed in
// roundScripts) still checks the data marker, on its own after it: a
// FLUSHALL before the round is detected by that round. The same round
// with a listed script (note.lua) detects it through the variant.
func TestMarkerCheckedAfterUnwrappedScript(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		c    func(rdb *redis.Client) call
	}{
		{"unlisted script", func(rdb *redis.Client) call {
			s := redis.NewScript("return 1")
			if err := rdb.ScriptLoad(context.Background(), "return 1").Err(); err != nil {
				t.Fatal(err)
			}
			return call{script: s}
		}},
		{"listed script", func(*redis.Client) call {
			return call{script: noteScript, keys: []string{leaseKey("x")}, args: []any{"1", "n"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cl := redistest.Start(t, 1)
			c, err := New(cl.URLs(), WithTimeout(time.Second), WithRestartGuard(time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			if err := c.Warm(ctx); err != nil {
				t.Fatal(err)
			}
			rdb := cl.Nodes[0].Client()
			ca := tc.c(rdb)
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			var val any
			if !c.nodes[0].submit(&op{calls: []call{ca}, reply: func(res []*redis.Cmd, err error) {
				if err == nil && len(res) == 1 {
					val, err = res[0].Val(), res[0].Err()
				}
				done <- err
			}}) {
				t.Fatal("client closed")
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("round failed: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no reply")
			}
			if toInt64(val) != 1 && tc.name == "unlisted script" {
				t.Errorf("reply %v, want the script's own 1", val)
			}
			c.nodes[0].mu.Lock()
			restarted := c.nodes[0].restartedAt
			c.nodes[0].mu.Unlock()
			if restarted.IsZero() {
				t.Error("the FLUSHALL before the round was not detected by it")
			}
		})
	}
}
