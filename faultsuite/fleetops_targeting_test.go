package faultsuite

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// awaitMostTicks waits for a window of the jobs' ticks (every apart), as
// long as [from, to], in which each job has a run that ended for at least
// atLeast of the window's ticks, and returns the history and the window.
// The window is the first from `from` on that has them, starting no later
// than within after from; the test fails when none does (after the last
// window's ticks had slack to end). It is the liveness check of the tests
// whose point is where runs go: on a machine loaded far beyond its cores
// (other test packages booting servers: a load of 16 on 2 cores for
// seconds) a job can start after its tick's deadline (the next tick,
// 1-2s here), and the tick is then rightly not run; such a peak moves the
// window on instead of deciding the test, while a fleet that stops
// running a job fails it. That no tick runs twice is CheckAudit's to
// check; that every tick runs while a daemon and a quorum are up, the
// liveness oracle's, in the fault tests (TestExactlyOnce, the nemesis).
func awaitMostTicks(f *Fleet, jobs []string, every time.Duration, from, to time.Time, atLeast int, within, slack time.Duration) (h *History, wfrom, wto time.Time) {
	f.t.Helper()
	h, wfrom, wto, err := mostTicksWindow(f, jobs, every, from, to, atLeast, within, slack)
	if err != nil {
		f.t.Errorf("%v; runs:\n%s", err, h)
	}
	return h, wfrom, wto
}

// mostTicksWindow is awaitMostTicks without failing the test: err says
// what no window had.
func mostTicksWindow(f *Fleet, jobs []string, every time.Duration, from, to time.Time, atLeast int, within, slack time.Duration) (h *History, wfrom, wto time.Time, err error) {
	f.t.Helper()
	span := to.Sub(from)
	ran := func(h *History, job string, ticks []time.Time) int {
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
	holds := func(h *History, wfrom time.Time) bool {
		ticks := Ticks(every, wfrom, wfrom.Add(span))
		for _, j := range jobs {
			if ran(h, j, ticks) < atLeast {
				return false
			}
		}
		return true
	}
	end := from.Add(within).Add(span).Add(slack)
	for {
		h := f.History()
		for wfrom := from; !wfrom.After(from.Add(within)); wfrom = wfrom.Add(every) {
			if holds(h, wfrom) {
				if wfrom != from {
					f.t.Logf("%v ran fewer than %d of their ticks in [%s, %s] (a loaded machine misses some); they did in [%s, %s]",
						jobs, atLeast, fmtT(from), fmtT(to), fmtT(wfrom), fmtT(wfrom.Add(span)))
				}
				return h, wfrom, wfrom.Add(span), nil
			}
		}
		if time.Now().After(end) {
			var counts []string
			for _, j := range jobs {
				counts = append(counts, fmt.Sprintf("%s %d of %d", j, ran(h, j, Ticks(every, from, to)), len(Ticks(every, from, to))))
			}
			return h, from, to, fmt.Errorf("ticks run in [%s, %s]: %s; no window of as many ticks starting by %s had %d run of each job",
				fmtT(from), fmtT(to), strings.Join(counts, ", "), fmtT(from.Add(within)), atLeast)
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
	awaitMostTicks(f, jobs, 2*time.Second, from, to, 2, 10*time.Second, 10*time.Second)
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
