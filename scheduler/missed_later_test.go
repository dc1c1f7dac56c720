package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
)

// TestMissRecordedAfterALaterTickRan: a host that could record a missed
// tick only once a later tick completed, or while a later tick runs (the
// store answered again after the next tick started), still records the
// miss; a tick whose own lease completed or is held, or that has a run
// record, is not recorded missed (the controls: it ran, or runs), nor is
// one whose records may have left the log (the history_limit newest
// records all started after the tick).
func TestMissRecordedAfterALaterTickRan(t *testing.T) {
	t.Parallel()
	node := redistest.Start(t, 1)
	j := &Job{Name: "later", Schedule: "@every 2s", Shell: "true", Deadline: time.Second, Candidates: config.DefaultJob().Candidates,
		HistoryLimit: 2}
	s, be := oneNodeScheduler(t, node, j)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	base := time.Now().Truncate(2 * time.Second).Add(-20 * time.Second)
	tick := func(n int) time.Time { return base.Add(time.Duration(n) * 2 * time.Second) }
	take := func(n int) lease.Lease { // a fresh node votes after its restart guard
		var l lease.Lease
		waitUntil(t, 20*time.Second, fmt.Sprintf("the lease of tick %d", n), func() bool {
			var err error
			l, err = be.Acquire(ctx, lease.Request{Key: s.key(j.Name), TTL: 10 * time.Second, Epoch: tick(n).Unix(),
				Owner: fmt.Sprintf("tick=%d host=other", tick(n).Unix())})
			return err == nil
		})
		return l
	}
	record := func(n int) {
		t.Helper()
		if done, err := s.tryRecordMiss(ctx, j, tick(n), MissNoQuorum, log); !done || err != nil {
			t.Fatalf("recording tick %d missed: done %v, %v", n, done, err)
		}
	}
	if err := take(2).Complete(ctx); err != nil {
		t.Fatal(err)
	}
	record(0) // a later tick completed
	held := take(4)
	record(1) // a later tick runs
	record(4) // control: this tick runs
	if err := held.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	record(4)            // control: this tick completed
	ran := func(n int) { // a run record of tick n
		s.appendHistory(j, RunRecord{Job: j.Name, Tick: tick(n), Attempt: 1, Fence: int64(n), Host: "other",
			Start: tick(n).Add(100 * time.Millisecond), End: tick(n).Add(200 * time.Millisecond), Result: "ok"}, log)
	}
	ran(5)
	if err := take(6).Complete(ctx); err != nil {
		t.Fatal(err)
	}
	record(5) // control: a record of the tick, a later one completed
	ran(6)
	record(3) // the two newest records (history_limit) both after it

	recs, err := ReadHistory(ctx, be, DryRunJob(j.Name), 100)
	if err != nil {
		t.Fatal(err)
	}
	missed := map[int64]string{}
	for _, r := range recs {
		missed[r.Tick.Unix()] = r.Result
	}
	for n, want := range map[int]string{0: "missed", 1: "missed", 3: "", 4: "", 5: "ok"} {
		if got := missed[tick(n).Unix()]; got != want {
			t.Errorf("tick %d (%s): record %q, want %q", n, tick(n).Format(time.TimeOnly), got, want)
		}
	}
}
