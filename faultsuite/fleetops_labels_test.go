package faultsuite

import (
	"slices"
	"sort"
	"testing"
	"time"
)

// TestLabelsTargeting: 3 daemons with labels (h0 role=db zone=a, h1
// role=web zone=a, h2 role=web zone=b, from LEASECRON_LABELS). Jobs with
// run_on run (most ticks, none twice), and only on the hosts they match:
// labels (db: h0; web-b: h2), host patterns (hosts: h[01]), both
// (mixed: zone=a and h1); status lists those hosts as eligible. Jobs no
// host matches (labels role=cache; hosts web-*) never run. Once h0, the
// only db host, is stopped, db runs nowhere while the others go on.
func TestLabelsTargeting(t *testing.T) {
	t.Parallel()
	// Redis only: the pause flags and heartbeats are backend entries
	// that the store's conformance tests and cmd/leasecron's tests cover
	// on every backend; a fleet per backend would add ~25 s of 3 daemons
	// each to make test. Add backends here to run them.
	for _, b := range []string{"redis"} {
		t.Run(b, func(t *testing.T) { labelsTargeting(t, b) })
	}
}

func labelsTargeting(t *testing.T, backend string) {
	cfg := opsConfig(backend)
	labels := []map[string]string{{"role": "db", "zone": "a"}, {"role": "web", "zone": "a"}, {"role": "web", "zone": "b"}}
	cfg.Labels = func(i int) map[string]string { return labels[i] }
	job := func(name string, k FleetKeys) Job {
		return Job{Name: name, Every: time.Second, Sleep: 100 * time.Millisecond, FleetKeys: k}
	}
	cfg.Jobs = []Job{
		job("db", FleetKeys{RunOnLabels: map[string]string{"role": "db"}}),
		job("web-b", FleetKeys{RunOnLabels: map[string]string{"role": "web", "zone": "b"}}),
		job("hosts", FleetKeys{RunOnHosts: []string{"h[01]"}}),
		job("mixed", FleetKeys{RunOnLabels: map[string]string{"zone": "a"}, RunOnHosts: []string{"h1"}}),
		job("nobody", FleetKeys{RunOnLabels: map[string]string{"role": "cache"}}),
		job("ghost", FleetKeys{RunOnHosts: []string{"web-*"}}),
	}
	want := map[string][]string{"db": {"h0"}, "web-b": {"h2"}, "hosts": {"h0", "h1"}, "mixed": {"h1"}, "nobody": nil, "ghost": nil}
	f := startVoting(t, cfg)

	from := f.ScheduleFrom().Add(time.Second)
	to := from.Add(5 * time.Second)
	awaitMostTicks(f, []string{"db", "web-b", "hosts", "mixed"}, time.Second, from, to, 3, 10*time.Second, 10*time.Second)
	// Control: the check fails a job that ran no tick (nobody: no host
	// matches it).
	if _, _, _, err := mostTicksWindow(f, []string{"db", "nobody"}, time.Second, from, to, 3, time.Second, 0); err == nil {
		t.Errorf("control: the liveness check passed a job that never ran")
	}
	st := fleetStatus(t, f)
	h := f.CheckAudit()
	for job, hosts := range want {
		got := hostsOf(h, job)
		// hosts ran job h[01]: both may, either may have won every tick.
		ok := slices.Equal(got, hosts)
		if job == "hosts" {
			ok = len(got) > 0 && !slices.Contains(got, "h2")
		}
		if !ok {
			t.Errorf("%s ran on %v, want %v", job, got, hosts)
		}
		var eligible []string
		eligible = append(eligible, st[job].Eligible...)
		sort.Strings(eligible)
		if !slices.Equal(eligible, hosts) {
			t.Errorf("status: %s eligible on %v (run_on %q), want %v", job, eligible, st[job].RunOn, hosts)
		}
	}
	t.Logf("runs by host: db %v, web-b %v, hosts %v, mixed %v", hostsOf(h, "db"), hostsOf(h, "web-b"), hostsOf(h, "hosts"), hostsOf(h, "mixed"))

	// Without its only eligible host, db runs nowhere; hosts (h1 left)
	// goes on.
	f.Daemon("h0").Stop()
	stopAt := time.Now()
	f.WaitRun("a run of hosts on h1 after h0 stopped", 10*time.Second, func(r Run) bool {
		return r.Job == "hosts" && r.Host == "h1" && r.Start.After(stopAt.Add(2*time.Second)) && r.Ended()
	})
	for _, r := range f.CheckAudit().Job("db") {
		if r.Start.After(stopAt) {
			t.Errorf("db (role=db) ran after h0, its only host, stopped: %s", r)
		}
	}
}
