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

// TestSkippedTicksKeepRuns: a job paused for long has more skipped ticks
// than history_limit; its runs stay on record (missed and skipped ticks
// are logged apart, each log keeping history_limit records), and the
// history merges both newest first.
func TestSkippedTicksKeepRuns(t *testing.T) {
	j := &Job{Name: "paused", Schedule: "@every 1m", Shell: "true", Deadline: time.Second, HistoryLimit: 3}
	s, _ := tickScheduler(t, j)
	j = s.cfg.Load().Jobs[0]
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	first := time.Now().Add(-time.Hour).Truncate(time.Minute)
	for i := range 3 {
		tk := first.Add(time.Duration(i) * time.Minute)
		s.appendHistory(j, RunRecord{Job: j.Name, Host: "h1", Tick: tk, Start: tk, End: tk.Add(time.Second), Result: "ok", Attempt: 1, Fence: int64(i + 1)}, log)
	}
	for i := range 5 {
		tk := first.Add(time.Duration(10+i) * time.Minute)
		if done, err := s.tryRecordMiss(ctx, j, tk, MissPaused, log); !done || err != nil {
			t.Fatalf("tick %v: done=%v err=%v", tk, done, err)
		}
	}
	recs, err := ReadHistory(ctx, s.be, j.Name, 100)
	if err != nil {
		t.Fatal(err)
	}
	var runs, skipped []time.Time
	for i, r := range recs {
		if i > 0 && r.Start.After(recs[i-1].Start) {
			t.Errorf("record %d (%s) is newer than the one above it: not newest first", i, r.Start)
		}
		if r.Result == "skipped" {
			skipped = append(skipped, r.Tick)
		} else {
			runs = append(runs, r.Tick)
		}
	}
	if len(runs) != 3 {
		t.Errorf("runs on record after 5 skipped ticks: %v; want the 3 runs (history_limit 3)", runs)
	}
	if len(skipped) != 3 || !skipped[0].Equal(first.Add(14*time.Minute)) {
		t.Errorf("skipped ticks on record: %v; want the newest 3", skipped)
	}
	if newest, err := ReadHistory(ctx, s.be, j.Name, 2); err != nil || len(newest) != 2 || newest[1].Result != "skipped" {
		t.Errorf("the 2 newest records: %+v, %v; want 2 skipped ticks", newest, err)
	}
}
