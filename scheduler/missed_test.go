package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease/redlock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// missedEvents counts the on_missed events a test webhook got, by tick.
type missedEvents struct {
	mu      sync.Mutex
	byTick  map[int64]int
	reasons map[string]int
}

func (m *missedEvents) handler(w http.ResponseWriter, r *http.Request) {
	var ev HookEvent
	body, _ := io.ReadAll(r.Body)
	if json.Unmarshal(body, &ev) != nil || ev.Event != EventMissed {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byTick[ev.Tick.Unix()]++
	m.reasons[ev.Reason]++
}

func (m *missedEvents) count(tick int64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byTick[tick]
}

// missedFleet runs three dry-run schedulers (h1..h3) on three Redis nodes
// with a job no host may run (run_on: hosts [nobody]) every 2s, deadline
// 1s, whose on_missed posts to a webhook on loopback; unguarded switches
// the leases of the missed record and of the hook off. It returns the
// history of the job once at least four ticks were recorded, the
// webhook's counts and the missed metric summed over the hosts.
func missedFleet(t *testing.T, unguarded bool) ([]RunRecord, *missedEvents, float64) {
	t.Helper()
	cluster := redistest.Start(t, 3)
	got := &missedEvents{byTick: map[int64]int{}, reasons: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(got.handler))
	t.Cleanup(srv.Close)
	var metrics []*Metrics
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var be0 *Scheduler
	for i := range 3 {
		j := &Job{Name: "nowhere", Schedule: "@every 2s", Shell: "true", Deadline: time.Second,
			RunOn: config.RunOn{Hosts: []string{"nobody"}}, Candidates: config.DefaultJob().Candidates,
			Hooks: Hooks{OnMissed: &Hook{URL: srv.URL, Timeout: 5 * time.Second, Retries: 3}}}
		cfg := tickConfig(t, cluster.URLs(), j)
		cfg.ID, cfg.Heartbeat = fmt.Sprintf("h%d", i+1), time.Second
		be, err := redlock.Open(context.Background(), redlock.Config{Nodes: redisOf(cfg).Nodes, Prefix: redisOf(cfg).Prefix, Options: []redlock.Option{redlock.WithTimeout(200 * time.Millisecond), redlock.WithRestartGuard(cfg.Lease.TTL)}})
		if err != nil {
			t.Fatal(err)
		}
		m := NewMetrics(prometheus.NewRegistry())
		metrics = append(metrics, m)
		s, err := New(cfg, Options{Self: "/nonexistent/leasecron-supervisor", Backend: be, DryRun: true, Metrics: m,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		s.noMissGuard, s.noHookGuard = unguarded, unguarded
		if be0 == nil {
			be0 = s
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = s.Run(ctx); _ = s.Close() }()
	}
	var recs []RunRecord
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		r, err := ReadHistory(ctx, be0.be, DryRunJob("nowhere"), 100)
		if err == nil && len(r) >= 4 {
			recs = r
			break
		}
	}
	if len(recs) < 4 {
		t.Fatalf("fewer than 4 missed ticks recorded in 60s: %+v", recs)
	}
	// The hooks of the recorded ticks are delivered by now or soon.
	time.Sleep(2 * time.Second)
	sum := 0.0
	for _, m := range metrics {
		sum += testutil.ToFloat64(m.hooks.missed.WithLabelValues("nowhere", MissNoEligibleHost))
	}
	return recs, got, sum
}

// TestMissedTickRecordedOnce: three hosts, a job no live host may run.
// Every tick is recorded missed exactly once in the job's history, with
// the reason no_eligible_host, counted once across the hosts, and fires
// on_missed exactly once.
func TestMissedTickRecordedOnce(t *testing.T) {
	t.Parallel()
	recs, got, counted := missedFleet(t, false)
	seen := map[int64]int{}
	for _, r := range recs {
		seen[r.Tick.Unix()]++
		if r.Result != "missed" || r.Reason != MissNoEligibleHost || r.Job != DryRunJob("nowhere") && r.Job != "nowhere" {
			t.Errorf("record %+v: want missed, no_eligible_host", r)
		}
	}
	// The oldest ticks only: the newest may have hooks still in flight.
	for _, r := range recs[2:] {
		tk := r.Tick.Unix()
		if seen[tk] != 1 {
			t.Errorf("tick %d: %d records, want 1", tk, seen[tk])
		}
		if n := got.count(tk); n != 1 {
			t.Errorf("tick %d: on_missed fired %d times, want 1", tk, n)
		}
	}
	if counted < float64(len(seen)) {
		t.Errorf("leasecron_ticks_missed_total summed over the hosts: %v; want at least the %d ticks recorded", counted, len(seen))
	}
}

// TestMissedTickUnguardedNegativeControl is TestMissedTickRecordedOnce
// with the leases of the missed record and of the hook switched off:
// every host records the tick and fires on_missed, so some tick's hook
// fires more than once.
func TestMissedTickUnguardedNegativeControl(t *testing.T) {
	t.Parallel()
	recs, got, _ := missedFleet(t, true)
	dup := 0
	for _, r := range recs[2:] {
		if got.count(r.Tick.Unix()) > 1 {
			dup++
		}
	}
	if dup == 0 {
		t.Errorf("without the guards no tick fired on_missed more than once: the test cannot see a second firing")
	}
}
