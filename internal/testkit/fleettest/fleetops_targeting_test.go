package fleettest

import (
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
// the recorder's log), and leaves the ticks it cannot take to h2: every
// tick of every job runs exactly once. Control: h1, without max_parallel,
// runs its jobs at the same time, and the same check finds it.
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

	from := f.VotingAt.Add(time.Second)
	to := from.Add(6 * time.Second)
	for _, j := range jobs {
		f.AwaitTicks(j, 2*time.Second, from, to, true, 10*time.Second)
	}
	h := f.CheckSafety()
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
	if !f.Daemon("h0").LogContains("this host runs max_parallel jobs already") {
		t.Errorf("h0 never left a tick to other hosts for want of a run slot (is it ever offered two at once?)")
	}
	n, _ := maxConcurrent(byHost["h1"])
	if n < 2 {
		t.Errorf("control: h1 (no max_parallel) never ran two of its 3 jobs at once; the check cannot fail")
	}
	t.Logf("runs: h0 %d (at most 1 at once), h1 %d (up to %d at once), h2 %d", len(byHost["h0"]), len(byHost["h1"]), n, len(byHost["h2"]))
}
