package scheduler

import (
	"github.com/leasecron/leasecron/config"

	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease/redlock"
)

// TestStandbyWithoutView: at the standby time a host whose view of the
// hosts has expired (heartbeats unreadable) keeps the ranks of the tick's
// view. A host ranked beyond the standby hosts at the tick does not try
// the job (at 100 hosts × 10,000 jobs, every host trying every job it
// stood back from was a storm of 150,000 attempts within seconds), and a
// host ranked among the standby hosts still does. Negative control: with
// the old ranking (no view: every host tries) the far host tries too.
func TestStandbyWithoutView(t *testing.T) {
	t.Parallel()
	rc := redistest.Start(t, 1)
	j := config.DefaultJob()
	j.Name, j.Schedule, j.Shell = "standby", "@every 1h", "true"
	j.StandbyDelay = 10 * time.Millisecond // the first look soon after the test's tick
	cfg := tickConfig(t, rc.URLs(), &j)
	jobs := []*Job{&j}

	// A view of 20 hosts; pick this host's name so that its rank at the
	// tick is beyond the standby hosts (far) or among them (near).
	var hosts []HostBeat
	for i := range 20 {
		hosts = append(hosts, HostBeat{Host: fmt.Sprintf("peer%02d", i)})
	}
	pick := func(ok func(rank int) bool) string {
		for i := range 1000 {
			name := fmt.Sprintf("self%03d", i)
			if r := rankJobs(jobs, hosts, name, nil).rank[j.Name]; ok(r) {
				return name
			}
		}
		t.Fatal("no host name with the wanted rank")
		return ""
	}
	far := pick(func(r int) bool { return r >= 2*j.Candidates })
	near := pick(func(r int) bool { return r >= j.Candidates && r < 2*j.Candidates })

	for i, c := range []struct {
		host      string
		oldRanks  bool // the negative control
		wantTries bool
	}{
		{host: far, wantTries: false},
		{host: near, wantTries: true},
		{host: far, oldRanks: true, wantTries: true},
	} {
		// A short restart guard: the fresh node votes for a tick of now.
		be, err := redlock.Open(context.Background(), redlock.Config{Nodes: rc.URLs(), Prefix: fmt.Sprintf("sb%d", i), Options: []redlock.Option{redlock.WithRestartGuard(20 * time.Millisecond)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := be.Warm(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		hc := *cfg
		hc.ID = c.host
		reg := prometheus.NewRegistry()
		s, err := New(&hc, Options{DryRun: true, Self: "/nonexistent", Backend: be, Metrics: NewMetrics(reg)})
		if err != nil {
			t.Fatal(err)
		}
		s.setTestHooks(func(h *testHooks) { h.standbyWithoutView = c.oldRanks })
		// The tick's ranks came from the 20-host view; no view now.
		atTick := rankJobs(jobs, hosts, c.host, nil)
		if s.liveHosts(cfg) != nil {
			t.Fatal("the scheduler has a view of the hosts; want none")
		}
		tick := time.Now()
		// The attempt itself need not win: what counts is whether the
		// host tried at all.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var wg sync.WaitGroup
		s.standby(ctx, ctx, &wg, tick, jobs, jobs, atTick)
		wg.Wait()
		cancel()
		_ = s.Close()
		g := gather(t, reg)
		tried := g["leasecron_standby_attempts_total"][""] > 0
		ran := g["leasecron_runs_total"]["job=standby,result=dry_run"]
		switch {
		case c.oldRanks && !tried:
			t.Errorf("negative control: with the old ranking host %s (rank %d at the tick) did not try; the test cannot see the storm",
				c.host, atTick.rank[j.Name])
		case !c.oldRanks && tried != c.wantTries:
			t.Errorf("host %s, rank %d at the tick, no view now: tried %v, want %v", c.host, atTick.rank[j.Name], tried, c.wantTries)
		case !tried && ran != 0:
			t.Errorf("host %s did not try the tick but recorded %v dry runs", c.host, ran)
		}
	}
}
