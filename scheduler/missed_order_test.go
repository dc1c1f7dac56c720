package scheduler

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
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

// TestMissedHookAfterLostAppend: a host appended a tick's missed record
// but its answer was lost (or it died) before it fired on_missed and
// wrote the tick's done mark. The next host to record the tick finds the
// record: it appends no second one, and fires on_missed — once; a third
// attempt finds the done mark and fires nothing.
func TestMissedHookAfterLostAppend(t *testing.T) {
	var mu sync.Mutex
	var events []HookEvent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev HookEvent
		if json.NewDecoder(r.Body).Decode(&ev) == nil {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
	}))
	defer srv.Close()
	j := &Job{Name: "lost", Schedule: "@every 1m", Shell: "true", Deadline: time.Second,
		Hooks: Hooks{OnMissed: &Hook{URL: srv.URL, Timeout: 5 * time.Second}}}
	s, _ := tickScheduler(t, j)
	j = s.cfg.Load().Jobs[0]
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tick := time.Now().Add(-5 * time.Minute).Truncate(time.Minute)
	if err := s.appendMiss(ctx, j, tick, MissNoEligibleHost); err != nil {
		t.Fatal(err)
	}
	stop := s.startHooks()
	for range 2 {
		if done, err := s.tryRecordMiss(ctx, j, tick, MissNoEligibleHost, log); !done || err != nil {
			t.Fatalf("done=%v err=%v", done, err)
		}
	}
	stop()
	recs, err := ReadHistory(ctx, s.be, j.Name, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Result != "missed" {
		t.Errorf("records of the tick: %+v; want its one missed record", recs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 || events[0].Event != EventMissed || !events[0].Tick.Equal(tick) {
		t.Errorf("on_missed deliveries: %+v; want one for tick %s", events, tick)
	}
}
