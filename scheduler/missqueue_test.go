package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestMissQueueBounded: a host noting a miss every tick of a job whose
// deadline is far away keeps at most maxPendingMisses of them, in one
// recorder, which ends with its context.
func TestMissQueueBounded(t *testing.T) {
	j := &Job{Name: "flood", Schedule: "@every 1s", Shell: "true", Deadline: time.Hour}
	s, _ := tickScheduler(t, j)
	j = s.cfg.Load().Jobs[0]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t0 := time.Now().Truncate(time.Second)
	for i := range 2 * maxPendingMisses {
		s.noteMiss(ctx, &wg, j, t0.Add(time.Duration(i)*time.Second), MissNoQuorum)
	}
	s.misses.mu.Lock()
	n := len(s.misses.jobs[j.Name].ticks)
	s.misses.mu.Unlock()
	if n != maxPendingMisses {
		t.Errorf("%d ticks pending, want %d", n, maxPendingMisses)
	}
	cancel()
	wg.Wait()
	s.misses.mu.Lock()
	defer s.misses.mu.Unlock()
	if len(s.misses.jobs) != 0 {
		t.Errorf("pending ticks left after the recorder ended: %v", s.misses.jobs)
	}
}
