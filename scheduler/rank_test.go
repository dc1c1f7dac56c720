package scheduler

import (
	"github.com/leasecron/leasecron/config"

	"fmt"
	"testing"
)

// fleetOf returns n hosts h000.. with the labels labels(i).
func fleetOf(n int, labels func(i int) map[string]string) []HostBeat {
	hs := make([]HostBeat, n)
	for i := range hs {
		hs[i] = HostBeat{Host: fmt.Sprintf("h%03d", i)}
		if labels != nil {
			hs[i].Labels = labels(i)
		}
	}
	return hs
}

// jobsOf returns n jobs j00000.. with run_on r.
func jobsOf(n int, r config.RunOn) []*Job {
	js := make([]*Job, n)
	for i := range js {
		js[i] = &Job{Name: fmt.Sprintf("j%05d", i), RunOn: r, Candidates: 3}
	}
	return js
}

// rankAll ranks jobs on every host of hosts, as each would.
func rankAll(jobs []*Job, hosts []HostBeat) map[string]ranking {
	out := map[string]ranking{}
	for _, h := range hosts {
		out[h.Host] = rankJobs(jobs, hosts, h.Host, h.Labels)
	}
	return out
}

// TestRankingIsOneOrder: hosts that share a view agree: for every job the
// ranks over the eligible hosts are exactly 0, 1, 2, ... (one assigned
// host, one order), and the assigned hosts' loads stay within the bound
// (max/mean <= 1.1 + one job).
func TestRankingIsOneOrder(t *testing.T) {
	t.Parallel()
	hosts := fleetOf(100, nil)
	jobs := jobsOf(10_000, config.RunOn{})
	all := rankAll(jobs, hosts)
	load := map[string]int{}
	for _, j := range jobs {
		seen := make([]bool, len(hosts))
		for _, h := range hosts {
			r := all[h.Host].rank[j.Name]
			if r < 0 || r >= len(hosts) || seen[r] {
				t.Fatalf("job %s: host %s has rank %d (taken or out of range)", j.Name, h.Host, r)
			}
			seen[r] = true
			if r == 0 {
				load[h.Host]++
			}
		}
	}
	maxLoad, mean := 0, float64(len(jobs))/float64(len(hosts))
	for _, h := range hosts {
		maxLoad = max(maxLoad, load[h.Host])
	}
	if ratio := float64(maxLoad) / mean; ratio > loadFactor+1/mean {
		t.Errorf("assigned loads max/mean = %.3f, want <= %.2f", ratio, loadFactor)
	}
	t.Logf("10,000 jobs on 100 hosts: max load %d, mean %.0f", maxLoad, mean)
}

// TestRankingSpreadNegativeControl: plain rendezvous (no load bound) is
// more uneven than the bound allows, so the spread check above can fail.
func TestRankingSpreadNegativeControl(t *testing.T) {
	hosts := fleetOf(100, nil)
	load := map[string]int{}
	for i := range 10_000 {
		hj := hashName(fmt.Sprintf("j%05d", i))
		best, bestScore := "", uint64(0)
		for _, h := range hosts {
			if sc := mix64(hj ^ hashName(h.Host)); best == "" || sc > bestScore {
				best, bestScore = h.Host, sc
			}
		}
		load[best]++
	}
	maxLoad := 0
	for _, n := range load {
		maxLoad = max(maxLoad, n)
	}
	if ratio := float64(maxLoad) / 100; ratio <= loadFactor+0.01 {
		t.Errorf("plain rendezvous max/mean %.3f is within the bound: the spread check would not catch an unbalanced assignment", ratio)
	}
}

// TestRankingEligibility: a job goes only to hosts whose labels and id
// match its run_on; other hosts rank -1; with no view, every eligible
// host ranks 0 (all try) and the others -1.
func TestRankingEligibility(t *testing.T) {
	hosts := fleetOf(10, func(i int) map[string]string {
		if i%2 == 0 {
			return map[string]string{"role": "db"}
		}
		return map[string]string{"role": "web"}
	})
	jobs := jobsOf(50, config.RunOn{Labels: map[string]string{"role": "db"}})
	jobs = append(jobs, &Job{Name: "only-h001", RunOn: config.RunOn{Hosts: []string{"h001"}}, Candidates: 3})
	all := rankAll(jobs, hosts)
	for _, j := range jobs {
		zero := 0
		for i, h := range hosts {
			r := all[h.Host].rank[j.Name]
			eligible := j.RunOn.Eligible(h.Host, h.Labels)
			if eligible != (r >= 0) {
				t.Errorf("job %s on %s (labels %v): rank %d, eligible %v", j.Name, h.Host, h.Labels, r, eligible)
			}
			if r == 0 {
				zero++
			}
			_ = i
		}
		if zero != 1 {
			t.Errorf("job %s: %d hosts of rank 0, want 1", j.Name, zero)
		}
	}
	r := rankJobs(jobs, nil, "h002", map[string]string{"role": "db"})
	if r.rank["j00000"] != 0 || r.rank["only-h001"] != -1 {
		t.Errorf("without a view: ranks %d and %d, want 0 (try) and -1 (not eligible)", r.rank["j00000"], r.rank["only-h001"])
	}
}

// TestRankingSelfNotInView: a host missing from the view (its heartbeat
// not read yet) ranks itself among the others.
func TestRankingSelfNotInView(t *testing.T) {
	hosts := fleetOf(5, nil)
	jobs := jobsOf(100, config.RunOn{})
	r := rankJobs(jobs, hosts, "new-host", nil)
	n := 0
	for _, j := range jobs {
		if r.rank[j.Name] < 0 || r.rank[j.Name] > 5 {
			t.Fatalf("rank %d for %s", r.rank[j.Name], j.Name)
		}
		if r.rank[j.Name] == 0 {
			n++
		}
	}
	if n == 0 || n > 25 {
		t.Errorf("new host assigned %d of 100 jobs among 6 hosts", n)
	}
}

// TestPauseResolution: of a job's own flag and the "*" flag, the newer
// decides.
func TestPauseResolution(t *testing.T) {
	p := pauses{
		"a":      {Paused: true, Version: 10},
		"b":      {Paused: false, Version: 30},
		PauseAll: {Paused: true, Version: 20, All: true},
	}
	for job, want := range map[string]bool{"a": true, "b": false, "c": true} {
		if _, got := p.paused(job); got != want {
			t.Errorf("paused(%s) = %v, want %v", job, got, want)
		}
	}
	p[PauseAll] = PauseInfo{Paused: false, Version: 40}
	for job, want := range map[string]bool{"a": false, "b": false, "c": false} {
		if _, got := p.paused(job); got != want {
			t.Errorf("after resume --all: paused(%s) = %v, want %v", job, got, want)
		}
	}
}
