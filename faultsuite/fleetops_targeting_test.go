package faultsuite

import (
	"bytes"
	"encoding/json"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// hostsOf returns the hosts that ran job, sorted.
func hostsOf(h *History, job string) []string {
	seen := map[string]bool{}
	for _, r := range h.Job(job) {
		seen[r.Host] = true
	}
	var out []string
	for host := range seen {
		out = append(out, host)
	}
	sort.Strings(out)
	return out
}

// awaitMostTicks waits (until slack after to) for at least atLeast of the
// ticks of job in [from, to] to have a run that ended, and fails the test
// if they do not. It is the liveness check of the tests whose point is
// where runs go: on a machine loaded far beyond its cores a job can start
// after its tick's deadline (the next tick, 1-2s here), and the tick is
// then rightly not run. That no tick runs twice is Safety's to check.
func awaitMostTicks(f *Fleet, job string, every time.Duration, from, to time.Time, atLeast int, slack time.Duration) *History {
	f.t.Helper()
	ticks := Ticks(every, from, to)
	ran := func(h *History) int {
		n := 0
		for _, tk := range ticks {
			for _, r := range h.Tick(job, tk.Unix()) {
				if r.Ended() {
					n++
					break
				}
			}
		}
		return n
	}
	end := to.Add(slack)
	for {
		h := f.History()
		n := ran(h)
		if n >= atLeast {
			if n < len(ticks) {
				f.t.Logf("%s ran %d of its %d ticks in [%s, %s] (a loaded machine misses some)", job, n, len(ticks), fmtT(from), fmtT(to))
			}
			return h
		}
		if time.Now().After(end) {
			f.t.Errorf("%s ran only %d of its %d ticks in [%s, %s], want at least %d; runs:\n%s", job, n, len(ticks), fmtT(from), fmtT(to), atLeast, h)
			return h
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// jobTick is one tick of one job.
type jobTick struct {
	job  string
	tick int64
}

// leftTicks returns the ticks daemon d had no run slot for when it was to
// try them because it ran max_parallel jobs already (from its log: one
// line per group of jobs, naming up to 20).
func leftTicks(t *testing.T, d *Daemon) []jobTick {
	t.Helper()
	b, err := os.ReadFile(d.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []jobTick
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.Contains(line, []byte("this host runs max_parallel jobs already")) {
			continue
		}
		var e struct {
			Jobs []string  `json:"first_jobs"`
			Tick time.Time `json:"tick"`
		}
		if json.Unmarshal(line, &e) == nil && !e.Tick.IsZero() {
			for _, j := range e.Jobs {
				out = append(out, jobTick{j, e.Tick.Unix()})
			}
		}
	}
	return out
}

// maxConcurrent returns the largest number of runs in runs alive at once,
// and such a set of runs.
func maxConcurrent(runs []Run) (int, []Run) {
	best, bestSet := 0, []Run(nil)
	for _, a := range runs {
		var set []Run
		for _, b := range runs {
			// b is alive when a starts.
			if !b.Start.After(a.Start) && b.Until().After(a.Start) {
				set = append(set, b)
			}
		}
		if len(set) > best {
			best, bestSet = len(set), set
		}
	}
	return best, bestSet
}

// TestMaxParallel: h0 has max_parallel 1; six 1.2s jobs every 2s may run
// on h0 or h2, and three only on h1. h0 never runs two jobs at once (from
// the recorder's log); the ticks it had no slot for (from its log) run,
// on h2 or on h0 once its slot freed up, and the jobs run (most ticks: a
// loaded machine misses some; none runs twice). Control: h1, without
// max_parallel, runs its jobs at the same time, and the same check finds
// it.
func TestMaxParallel(t *testing.T) {
	t.Parallel()
	cfg := opsConfig("redis")
	cfg.MaxParallel = func(i int) int {
		if i == 0 {
			return 1
		}
		return 0
	}
	var jobs []string
	for _, n := range []string{"p0", "p1", "p2", "p3", "p4", "p5", "solo0", "solo1", "solo2"} {
		k := FleetKeys{RunOnHosts: []string{"h0", "h2"}}
		if strings.HasPrefix(n, "solo") {
			k = FleetKeys{RunOnHosts: []string{"h1"}}
		}
		cfg.Jobs = append(cfg.Jobs, Job{Name: n, Every: 2 * time.Second, Sleep: 1200 * time.Millisecond, FleetKeys: k})
		jobs = append(jobs, n)
	}
	f := startVoting(t, cfg)

	from := f.ScheduleFrom().Add(time.Second)
	to := from.Add(6 * time.Second)
	for _, j := range jobs {
		awaitMostTicks(f, j, 2*time.Second, from, to, 2, 10*time.Second)
	}
	h := f.CheckAudit()
	byHost := map[string][]Run{}
	for _, r := range h.Runs {
		byHost[r.Host] = append(byHost[r.Host], r)
	}
	if n, set := maxConcurrent(byHost["h0"]); n > 1 {
		t.Errorf("h0 (max_parallel 1) ran %d jobs at once:\n%s", n, (&History{Runs: set}).String())
	}
	if len(byHost["h0"]) == 0 {
		t.Errorf("h0 ran nothing")
	}
	left := leftTicks(t, f.Daemon("h0"))
	if len(left) == 0 {
		t.Errorf("h0 never lacked a run slot for a tick (is it ever offered two at once?)")
	}
	taken, later := 0, 0
	for _, lt := range left {
		for _, r := range h.Tick(lt.job, lt.tick) {
			switch {
			case !r.Ended():
			case r.Host == "h0":
				later++
			default:
				taken++
			}
		}
	}
	if len(left) > 0 && taken+later == 0 {
		t.Errorf("none of the %d ticks h0 had no slot for ran", len(left))
	}
	t.Logf("h0 had no slot for %d ticks; other hosts ran %d of them, h0 %d once its slot freed up", len(left), taken, later)
	n, _ := maxConcurrent(byHost["h1"])
	if n < 2 {
		t.Errorf("control: h1 (no max_parallel) never ran two of its 3 jobs at once; the check cannot fail")
	}
	t.Logf("runs: h0 %d (at most 1 at once), h1 %d (up to %d at once), h2 %d", len(byHost["h0"]), len(byHost["h1"]), n, len(byHost["h2"]))
}
