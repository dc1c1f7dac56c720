package scheduler

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
)

// TestFailedHostLeavesLeaseUntilItsTurn: the host whose attempt failed
// does not touch the tick's lease until its turn (the backoff, then a
// TTL and a second for the other hosts): a look at the lease earlier
// (won, found not due, released) would hold it for a moment, and another
// host that saw it held then would look again only at its TTL, after the
// failing host's turn, so the retry would come back to the failing host.
// Another live host (h2, a heartbeat only) may run the job. Control: the
// host that looks when the backoff ends (probeAtBackoff) is seen.
func TestFailedHostLeavesLeaseUntilItsTurn(t *testing.T) {
	t.Parallel()
	t.Run("turn", func(t *testing.T) {
		t.Parallel()
		if early := earlyLooks(t, false); len(early) > 0 {
			t.Errorf("the failing host tried the lease before its turn, at %v", early)
		}
	})
	t.Run("NegativeControl", func(t *testing.T) {
		t.Parallel()
		if early := earlyLooks(t, true); len(early) == 0 {
			t.Errorf("probeAtBackoff: no look at the lease before the failing host's turn was seen")
		}
	})
}

// acquireLog records when TryAcquireBatch was called.
type acquireLog struct {
	lease.Backend
	mu    sync.Mutex
	calls []time.Time
}

func (a *acquireLog) TryAcquireBatch(ctx context.Context, reqs []lease.Request) []lease.Result {
	a.mu.Lock()
	a.calls = append(a.calls, time.Now())
	a.mu.Unlock()
	return a.Backend.TryAcquireBatch(ctx, reqs)
}

// earlyLooks follows one tick of a job that always fails (retries 1) on
// one host and returns the times it tried the tick's lease between the
// failure's backoff and its turn; it fails the test unless attempt 2 ran.
func earlyLooks(t *testing.T, probeAtBackoff bool) []time.Time {
	cluster := redistest.Start(t, 1)
	j := &Job{Name: "flaky", Schedule: "@hourly", Shell: "exit 3", Retries: 1, RetryBackoff: 200 * time.Millisecond, Deadline: time.Minute}
	cfg := tickConfig(t, cluster.URLs(), j)
	// Timeouts a loaded machine meets: what is tested is when the host
	// looks, not how it copes with a slow store or the restart guard.
	var looks *acquireLog
	s, be := votingScheduler(t, cfg, 5*time.Second, 300*time.Millisecond, selfSupervisor(t), func(b lease.Backend) lease.Backend {
		looks = &acquireLog{Backend: b}
		return looks
	})
	s.setTestHooks(func(h *testHooks) { h.probeAtBackoff = probeAtBackoff })
	j = s.cfg.Load().Jobs[0]
	data, _ := json.Marshal(HostBeat{Host: "h2", Seen: time.Now().UTC()})
	if err := s.be.Put(ctxFor(t, 10*time.Second), lease.SpaceHosts, lease.Entry{Name: storeName("h2"), Version: 1, Data: data, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	s.view.Store(&fleetView{hosts: []HostBeat{{Host: s.host}, {Host: "h2"}}, read: time.Now()})

	ctx := context.Background()
	tick := time.Now().Truncate(time.Second) // its deadline a minute away
	l := acquireRetrying(t, be, lease.Request{Key: s.key(j.Name), TTL: cfg.Lease.TTL, Epoch: tick.Unix(), EpochTime: tick, Owner: owner(tick.Unix(), s.host)})
	s.followTick(ctx, ctx, cfg, j, tick, lease.Result{Lease: l}, 0)

	st, err := s.readRetry(ctxFor(t, 10*time.Second), j, tick, s.log)
	if err != nil || st == nil || st.Attempt != 1 || st.Host != s.host {
		t.Fatalf("retry state after the tick: %+v, %v; want attempt 1 failed on %s", st, err, s.host)
	}
	if _, rec := lastRun(t, s, j.Name); rec.Attempt != 2 {
		t.Fatalf("last run of the tick: %+v; want attempt 2", rec)
	}
	turn := st.NextAt.Add(s.otherHostsFirst())
	looks.mu.Lock()
	defer looks.mu.Unlock()
	var early []time.Time
	for _, at := range looks.calls {
		if at.Before(turn) {
			early = append(early, at)
		}
	}
	t.Logf("backoff ends %s, turn %s, looks at %v", st.NextAt.Format(time.StampMilli), turn.Format(time.StampMilli), looks.calls)
	return early
}
