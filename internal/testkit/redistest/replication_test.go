package redistest_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// TestReplicaOfPromoteFlushAll: ReplicaOf replaces a node's dataset with
// its master's while the process and run_id stay, Promote makes it a
// master with a new master_replid, and FlushAll empties it in place.
func TestReplicaOfPromoteFlushAll(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 2, redistest.WithArgs("--repl-diskless-sync-delay", "0"))
	x, src := cl.Nodes[0], cl.Nodes[1]
	ctx := ctxT(t, 30*time.Second)
	if err := x.Client().Set(ctx, "only-on-x", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := src.Client().Set(ctx, "from-src", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	field := func(section, name string) string {
		t.Helper()
		info, err := x.Client().Info(ctx, section).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
				return v
			}
		}
		t.Fatalf("INFO %s has no %s", section, name)
		return ""
	}
	runID, replID, pid := field("server", "run_id"), field("replication", "master_replid"), x.PID()
	x.ReplicaOf(src)
	x.Promote()
	if got := field("replication", "role"); got != "master" {
		t.Errorf("role after Promote = %s", got)
	}
	if got := field("server", "run_id"); got != runID || x.PID() != pid {
		t.Errorf("run_id %s -> %s, pid %d -> %d: want the same process", runID, got, pid, x.PID())
	}
	if got := field("replication", "master_replid"); got == replID {
		t.Error("master_replid unchanged by the sync and promotion")
	}
	if keys := x.Keys("*"); !slices.Equal(keys, []string{"from-src"}) {
		t.Errorf("keys after ReplicaOf = %v, want the master's [from-src]", keys)
	}
	x.FlushAll()
	if keys := x.Keys("*"); len(keys) != 0 {
		t.Errorf("keys after FlushAll = %v", keys)
	}
}
