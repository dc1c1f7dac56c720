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
	t.Parallel()
	recs := unlimitableRecords(t, false)
	if len(recs) == 0 {
		t.Errorf("no run and no missed record for any tick in 25s of an @every 2s job no host can limit")
	}
	for _, r := range recs {
		if r.Result != "missed" || r.Reason != MissCannotLimit {
			t.Errorf("record %+v: want missed, %s", r, MissCannotLimit)
		}
	}
}

// TestUnlimitableJobNegativeControl is TestUnlimitableJobRecordedMissed
// with the job dropped unnoted: no record at all.
func TestUnlimitableJobNegativeControl(t *testing.T) {
	t.Parallel()
	if recs := unlimitableRecords(t, true); len(recs) != 0 {
		t.Errorf("without noting the miss the job still has records %+v: the test cannot see it", recs)
	}
}

// unlimitableRecords runs, on a host that cannot apply limits, a job with
// limits for up to 25s and returns its history once it has any.
func unlimitableRecords(t *testing.T, unnoted bool) []RunRecord {
	j := &Job{Name: "limited", Schedule: "@every 2s", Shell: "true", Deadline: time.Second, MemoryMax: 64 << 20}
	s, _ := tickScheduler(t, j)
	forceProcessTree(s) // this host cannot apply limits
	if s.CannotLimit(s.cfg.Load().Jobs[0]) == nil {
		t.Fatal("with the process-tree fallback forced, the host still applies limits: the test cannot see a job nobody can limit")
	}
	s.setTestHooks(func(h *testHooks) { h.noCannotLimitMiss = unnoted })
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
	return recs
}
