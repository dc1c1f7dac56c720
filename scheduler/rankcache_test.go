package scheduler

import (
	"github.com/leasecron/leasecron/config"

	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRankForCache: rankFor gives exactly what rankJobs gives, reuses the
// last ranking only for the same config, live hosts and jobs, and
// recomputes when any of them changed (a cache that ignored one of them
// would give a stale ranking and fail the comparison).
func TestRankForCache(t *testing.T) {
	jobs := make([]*Job, 200)
	for i := range jobs {
		jobs[i] = &Job{Name: fmt.Sprintf("job-%03d", i), Candidates: 3}
	}
	hosts := func(names ...string) []HostBeat {
		out := make([]HostBeat, len(names))
		for i, n := range names {
			out[i] = HostBeat{Host: n}
		}
		return out
	}
	cfg := &Config{Jobs: jobs}
	s := &Scheduler{host: "b"}
	check := func(what string, cfg *Config, jobs []*Job, hs []HostBeat, wantReuse bool) {
		t.Helper()
		before := s.ranked.Load()
		got := s.rankFor(cfg, jobs, hs)
		if want := rankJobs(jobs, hs, s.host, cfg.Labels); !reflect.DeepEqual(got.rank, want.rank) {
			t.Fatalf("%s: rankFor differs from rankJobs", what)
		}
		reused := before != nil && reflect.ValueOf(got.rank).Pointer() == reflect.ValueOf(before.ranked.rank).Pointer()
		if reused != wantReuse {
			t.Errorf("%s: reused the last ranking = %v, want %v", what, reused, wantReuse)
		}
	}
	check("first", cfg, jobs, hosts("a", "b", "c"), false)
	check("same inputs", cfg, jobs, hosts("a", "b", "c"), true)
	check("a host more", cfg, jobs, hosts("a", "b", "c", "d"), false)
	labelled := hosts("a", "b", "c", "d")
	labelled[0].Labels = map[string]string{"role": "db"}
	check("a host's labels changed", cfg, jobs, labelled, false)
	check("fewer jobs", cfg, jobs[:150], labelled, false)
	check("other jobs, as many", cfg, jobs[50:], labelled, false)
	check("no view", cfg, jobs[50:], nil, false)
	check("a reloaded config", &Config{Jobs: jobs}, jobs[50:], nil, false)
}

// TestRankForReloadedJob: a reload that changes a job's run_on but not its
// name gives new *Job values; a ranking of the old ones under the new
// config (standby of a tick from before the reload) must not be served
// for the new ones (the host would skip a job it may now run, on every
// tick).
func TestRankForReloadedJob(t *testing.T) {
	old := &Job{Name: "x", Candidates: 3, RunOn: config.RunOn{Hosts: []string{"c"}}}
	cur := &Job{Name: "x", Candidates: 3, RunOn: config.RunOn{Hosts: []string{"b"}}}
	cfg := &Config{Jobs: []*Job{cur}}
	hs := []HostBeat{{Host: "a"}, {Host: "b"}, {Host: "c"}}
	s := &Scheduler{host: "b"}
	if r := s.rankFor(cfg, []*Job{old}, hs); r.rank["x"] != -1 {
		t.Fatalf("old run_on: rank %d, want -1", r.rank["x"])
	}
	if r := s.rankFor(cfg, []*Job{cur}, hs); r.rank["x"] != 0 {
		t.Errorf("new run_on after the old one was ranked under the same config: rank %d, want 0", r.rank["x"])
	}
}

// TestWarmRanking: the tick loop's warm-up computes the ranking that fire
// then asks for, leaving out paused jobs as fire does.
func TestWarmRanking(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	jobs := []*Job{{Name: "a", Candidates: 3}, {Name: "b", Candidates: 3}, {Name: "later", Candidates: 3}, {Name: "held", Candidates: 3}}
	cfg := &Config{Jobs: jobs, Heartbeat: time.Second}
	s := &Scheduler{host: "h1"}
	s.cfg.Store(cfg)
	s.view.Store(&fleetView{hosts: []HostBeat{{Host: "h1"}, {Host: "h2"}}, read: time.Now()})
	p := pauses{"held": {Paused: true}}
	s.pauses.Store(&p)
	next := map[string]time.Time{"a": at, "b": at, "later": at.Add(time.Minute), "held": at}
	s.warmRanking(cfg, newTickQueue(cfg, next).due(at))
	c := s.ranked.Load()
	if c == nil || !slices.Equal(c.jobs, jobs[:2]) {
		t.Fatalf("warmRanking ranked %+v, want jobs a and b", c)
	}
	if r := s.rankFor(cfg, jobs[:2], s.liveHosts(cfg)); reflect.ValueOf(r.rank).Pointer() != reflect.ValueOf(c.ranked.rank).Pointer() {
		t.Error("fire's ranking of the same tick was computed again")
	}
}

// TestNotePaused: the paused gauge is right for every job after each read,
// is set for every job on the first read and after a reload, and between
// them only for jobs whose state changed.
func TestNotePaused(t *testing.T) {
	cfg := &Config{Jobs: []*Job{{Name: "a"}, {Name: "b"}}}
	m := NewMetrics(prometheus.NewRegistry())
	s := &Scheduler{opts: Options{Metrics: m}}
	s.cfg.Store(cfg)
	gauge := func(job string) float64 { return testutil.ToFloat64(m.fleet.paused.WithLabelValues(job)) }
	series := func() int { return testutil.CollectAndCount(m.fleet.paused) }
	s.notePaused(pauses{})
	if series() != 2 || gauge("a") != 0 || gauge("b") != 0 {
		t.Fatalf("first read: %d series, a=%v b=%v; want both present at 0", series(), gauge("a"), gauge("b"))
	}
	s.notePaused(pauses{"b": {Paused: true}})
	if gauge("a") != 0 || gauge("b") != 1 {
		t.Errorf("b paused: a=%v b=%v", gauge("a"), gauge("b"))
	}
	s.notePaused(pauses{PauseAll: {Paused: true, Version: 5}, "b": {Paused: true, Version: 1}})
	if gauge("a") != 1 || gauge("b") != 1 {
		t.Errorf("all paused: a=%v b=%v", gauge("a"), gauge("b"))
	}
	// A gauge reset behind notePaused's back shows whether it was set: a
	// read without changes leaves it, a reload sets every job again.
	m.fleet.paused.WithLabelValues("a").Set(7)
	s.notePaused(pauses{PauseAll: {Paused: true}})
	if gauge("a") != 7 {
		t.Errorf("a read without changes set the gauge again (a=%v)", gauge("a"))
	}
	reloaded := &Config{Jobs: cfg.Jobs}
	s.cfg.Store(reloaded)
	s.notePaused(pauses{PauseAll: {Paused: true}})
	if gauge("a") != 1 {
		t.Errorf("after a reload: a=%v, want 1", gauge("a"))
	}
}
