package scheduler

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// TestReviewHookGuardDropsOtherTick: the guard of a hook is one key per
// job and event (JOB@hook.failure) with the tick as its epoch. While host
// h2 still delivers tick T1's on_failure (a slow webhook with retries),
// h1's on_failure for the NEXT tick T2 finds the key held by another host
// and guard returns errGuardTaken: runHook drops T2's event silently
// (debug log), though nobody fires it. Likewise, once T2's guard is
// completed, a late T1 event gets ErrEpochDone and is dropped.
func TestReviewHookGuardDropsOtherTick(t *testing.T) {
	j := &Job{Name: "hooked", Schedule: "@every 1m", Shell: "true", Deadline: time.Second}
	s, _ := tickScheduler(t, j)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t1 := time.Now().Add(-2 * time.Minute).Truncate(time.Minute)
	t2 := t1.Add(time.Minute)
	key := s.hookKey("hooked", EventFailure)
	// h2 holds T1's hook guard (delivering it).
	res := s.be.TryAcquireBatch(ctx, []lease.Request{{Key: key, TTL: 30 * time.Second, Epoch: t1.Unix(),
		Owner: "hook failure tick=" + strconv.FormatInt(t1.Unix(), 10) + " host=h2"}})[0]
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	defer func() { _ = res.Lease.Release(context.Background()) }()
	_, err := s.guard(ctx, lease.Request{Key: key, TTL: 2 * time.Second, Epoch: t2.Unix(),
		Owner: "hook failure tick=" + strconv.FormatInt(t2.Unix(), 10) + " host=" + s.host}, log)
	if errors.Is(err, errGuardTaken) {
		t.Errorf("T2's on_failure is dropped as 'taken by another host' while h2 only delivers T1's: %v", err)
	}
}
