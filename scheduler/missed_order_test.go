package scheduler

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestMissedRecordedInAnyOrder: two ticks of a job missed (say for want
// of a quorum) may be recorded in any order, by this host or others: the
// earlier tick recorded after the later one still gets its record (the
// guard's done mark is per tick), with the guard and without it.
func TestMissedRecordedInAnyOrder(t *testing.T) {
	for _, unguarded := range []bool{false, true} {
		j := &Job{Name: "order", Schedule: "@every 1m", Shell: "true", Deadline: time.Second}
		s, _ := tickScheduler(t, j)
		s.noMissGuard = unguarded
		j = s.cfg.Load().Jobs[0]
		ctx := context.Background()
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		t1 := time.Now().Add(-10 * time.Minute).Truncate(time.Minute)
		t2 := t1.Add(time.Minute)
		for _, tk := range []time.Time{t2, t1} { // the later tick wins the race
			if done, err := s.tryRecordMiss(ctx, j, tk, MissNoQuorum, log); !done || err != nil {
				t.Fatalf("unguarded=%v tick %v: done=%v err=%v", unguarded, tk, done, err)
			}
		}
		recs, err := ReadHistory(ctx, s.be, j.Name, 100)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int64]bool{}
		for _, r := range recs {
			seen[r.Tick.Unix()] = true
		}
		if !seen[t1.Unix()] || !seen[t2.Unix()] {
			t.Errorf("unguarded=%v: missed records for ticks %v: want both %d and %d", unguarded, seen, t1.Unix(), t2.Unix())
		}
	}
}
