package redistest_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

func TestSentinelGroup(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinelGroup(t)
	ctx := ctxT(t, 60*time.Second)
	if got := g.MasterAddr(); got != g.Master.Addr() {
		t.Fatalf("Sentinel names %s as master, want %s", got, g.Master.Addr())
	}
	// A client that finds the master through the Sentinel writes to it,
	// and the replica follows.
	fc := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    redistest.SentinelMasterName,
		SentinelAddrs: []string{g.Sentinel.Addr()},
	})
	t.Cleanup(func() { _ = fc.Close() })
	if err := fc.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatalf("SET through the Sentinel: %v", err)
	}
	if v, err := g.Master.Client().Get(ctx, "k").Result(); err != nil || v != "before" {
		t.Errorf("GET on the master: %q, %v", v, err)
	}
	if err := g.Master.Client().Wait(ctx, 1, 5*time.Second).Err(); err != nil {
		t.Fatalf("WAIT for the replica: %v", err)
	}
	if v, err := g.Replica.Client().Get(ctx, "k").Result(); err != nil || v != "before" {
		t.Errorf("GET on the replica: %q, %v", v, err)
	}

	oldMaster, oldReplica := g.Master, g.Replica
	g.Failover()
	if g.Master != oldReplica || g.Replica != oldMaster {
		t.Fatal("Failover did not swap Master and Replica")
	}
	if got := g.MasterAddr(); got != oldReplica.Addr() {
		t.Errorf("after Failover the Sentinel names %s, want %s", got, oldReplica.Addr())
	}
	// The promoted replica kept the data and takes writes.
	if v, err := g.Master.Client().Get(ctx, "k").Result(); err != nil || v != "before" {
		t.Errorf("GET on the new master: %q, %v", v, err)
	}
	// The old master is made a replica of it; until then it still takes
	// writes (Sentinel's known window), so write only after that.
	g.WaitDemoted()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := fc.Set(ctx, "k", "after", 0).Err()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SET through the Sentinel after the failover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v, err := g.Master.Client().Get(ctx, "k").Result(); err != nil || v != "after" {
		t.Errorf("the write after the failover is not on the new master: %q, %v", v, err)
	}
}
