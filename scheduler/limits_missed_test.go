package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestUnlimitableJobRecordedMissed: a job with limits on a fleet where no
// host can apply them (cgroup v1, no delegation) never runs; each of its
// ticks is recorded missed with the reason cannot_limit (and fires
// on_missed), so that it does not go silently unrun.
func TestUnlimitableJobRecordedMissed(t *testing.T) {
	j := &Job{Name: "limited", Schedule: "@every 2s", Shell: "true", Deadline: time.Second, MemoryMax: 64 << 20}
	s, _ := tickScheduler(t, j)
	forceProcessTree(s) // this host cannot apply limits
	if s.CannotLimit(s.cfg.Load().Jobs[0]) == nil {
		t.Skip("host can apply limits")
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = s.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	var recs []RunRecord
	for end := time.Now().Add(25 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		recs, _ = ReadHistory(context.Background(), s.be, "limited", 100)
		if len(recs) > 0 {
			break
		}
	}
	if len(recs) == 0 {
		t.Errorf("no run and no missed record for any tick in 25s of an @every 2s job no host can limit")
	}
	for _, r := range recs {
		if r.Result != "missed" || r.Reason != MissCannotLimit {
			t.Errorf("record %+v: want missed, %s", r, MissCannotLimit)
		}
	}
}
