package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
)

// TestPromotionIsRestart: a master that is demoted and promoted again keeps
// its run_id; with a dataset that carries the same data marker (synced from
// a server that has it, as a replica of the old master would) only the new
// master_replid shows that the dataset was replaced. A new connection
// must then count as a restart.
func TestPromotionIsRestart(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 2, redistest.WithArgs("--repl-diskless-sync-delay", "0"))
	x, src := cl.Nodes[0], cl.Nodes[1]
	ctx := context.Background()
	n := newNode("x", nil, nil, func() time.Duration { return time.Millisecond })
	connect := func() {
		t.Helper()
		rdb := redis.NewClient(&redis.Options{Addr: x.Addr(), OnConnect: n.onConnect, Protocol: 2})
		defer rdb.Close()
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	connect()
	marker, err := x.Client().Get(ctx, birthKey).Result()
	if err != nil {
		t.Fatalf("no data marker after the first connection: %v", err)
	}
	if err := src.Client().Set(ctx, birthKey, marker, 0).Err(); err != nil {
		t.Fatal(err)
	}
	connect()
	if !n.restartedAt.IsZero() {
		t.Fatal("a second connection to the same server counted as a restart")
	}
	x.ReplicaOf(src)
	x.Promote()
	connect()
	if n.restartedAt.IsZero() || n.voting(time.Now(), time.Second) {
		t.Error("a master demoted and promoted again (same run_id, same data marker, new master_replid) was not treated as a restart")
	}
}

// TestVotesForDataYoungerFirst: a node whose data is younger than the
// epoch says so even within its restart guard (final for the epoch, so a
// caller can give it up), and ErrRestarted only for an epoch it will vote
// for once the guard ends.
func TestVotesForDataYoungerFirst(t *testing.T) {
	now := time.Now()
	guard := 2 * time.Second
	for _, c := range []struct {
		name  string
		birth time.Time
		epoch time.Time
		ok    bool
		want  error
	}{
		{"old epoch, in the guard", now, now.Add(-time.Hour), false, lease.ErrDataYounger},
		{"old epoch, after the guard", now.Add(-time.Minute), now.Add(-time.Hour), false, lease.ErrDataYounger},
		{"no epoch, in the guard", now, time.Time{}, false, lease.ErrRestarted},
		{"epoch after the guard, in the guard", now, now.Add(2 * guard), false, lease.ErrRestarted},
		{"epoch after the guard, after it", now.Add(-time.Minute), now, true, nil},
	} {
		ok, err := votesFor(c.birth, now, c.epoch, guard)
		if ok != c.ok || !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s: votes %v, %v; want %v, %v", c.name, ok, err, c.ok, c.want)
		}
	}
}
