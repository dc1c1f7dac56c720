package scheduler

import (
	"hash/fnv"
	"math"
	"slices"
	"strings"
)

// Who tries a tick first.
//
// At tick T the jobs of the tick are assigned to the live eligible hosts
// (from the heartbeats) by rendezvous hashing with bounded loads: in order
// of job name, each job goes to the host with the highest score
// mix(hash(job) ^ hash(host)) among those that have fewer than
// ceil(loadFactor × jobs/hosts) jobs of the tick so far (or, when all are
// full, to its highest-scoring host). Every host computes the same
// assignment from the same view. A job's candidates are its assigned host
// (rank 0), then the other eligible hosts by descending score (ranks 1,
// 2, ...), hosts with a free run slot (max_parallel, from the heartbeats)
// before full ones. The first Candidates ranks try at T (rank r
// rankStagger×r after the rank-0 host, so that the assigned host usually
// wins and runs spread evenly); ranks Candidates to 2×Candidates-1 try at
// T+StandbyAfter when the tick is still neither held nor completed (a host
// that would now be a candidate in a fresher view tries then too), and
// each later standby look doubles the ranks that may try, the last one
// before the deadline letting every eligible host try. A host that tries
// while all its run slots are taken keeps following the tick and tries
// when one frees up. Ranking decides who tries first, never safety: the
// lease and the epoch still do, whatever the hosts' views.

// loadFactor bounds a host's share of a tick's jobs: at most 1.1 × the
// mean, so that runs spread evenly.
const loadFactor = 1.1

// hashName is FNV-64a of a job or host name.
func hashName(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// mix64 is the splitmix64 finalizer: it spreads the bits of x.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// rankedHost is a live host with its name's hash.
type rankedHost struct {
	HostBeat
	hash uint64
}

// ranking holds the ranks of this host for the jobs of one tick.
type ranking struct {
	self string
	// rank is this host's rank for each job, by name; -1: not eligible.
	rank map[string]int
}

// full reports whether h's heartbeat says it runs max_parallel jobs
// already (it has no free run slot).
func (h *HostBeat) full() bool { return h.MaxParallel > 0 && h.Running >= h.MaxParallel }

// rankJobs computes this host's rank (0 = assigned) for each job of a
// tick, given the live hosts. A job this host is not eligible for gets
// -1. When hosts is empty (heartbeats unknown), every eligible job gets
// rank 0: every eligible host tries.
//
// Free run slots come first: a job is assigned to a host with a free slot
// (max_parallel minus its running jobs and the jobs of the tick assigned
// to it so far, from the heartbeats) when one is eligible, and hosts whose
// heartbeat says they are full rank after every host with a free slot,
// so that an idle eligible host is among the first to try.
func rankJobs(jobs []*Job, hosts []HostBeat, self string, selfLabels map[string]string) ranking {
	return rankJobsBy(jobs, hosts, self, selfLabels, true)
}

// rankJobsBy is rankJobs; bySlots false ignores the hosts' run slots (the
// ranking before slots counted, for a negative control).
func rankJobsBy(jobs []*Job, hosts []HostBeat, self string, selfLabels map[string]string, bySlots bool) ranking {
	r := ranking{self: self, rank: make(map[string]int, len(jobs))}
	if len(hosts) == 0 {
		for _, j := range jobs {
			if j.RunOn.Eligible(self, selfLabels) {
				r.rank[j.Name] = 0
			} else {
				r.rank[j.Name] = -1
			}
		}
		return r
	}
	hs := rankedHosts(hosts, self, selfLabels)
	selfIdx := slices.IndexFunc(hs, func(h rankedHost) bool { return h.Host == self })

	sorted := slices.Clone(jobs)
	slices.SortFunc(sorted, func(a, b *Job) int { return strings.Compare(a.Name, b.Name) })
	load := make([]int, len(hs))
	eligible := make([]bool, len(hs))
	scores := make([]uint64, len(hs))
	// Jobs per host: each job's share among its eligible hosts.
	capOf := func(n int) int { return int(math.Ceil(loadFactor * float64(len(sorted)) / float64(n))) }
	for _, j := range sorted {
		anyHost := len(j.RunOn.Labels) == 0 && len(j.RunOn.Hosts) == 0
		hj := hashName(j.Name)
		n := 0
		for i, h := range hs {
			eligible[i] = anyHost || j.RunOn.Eligible(h.Host, h.Labels)
			if eligible[i] {
				n++
				scores[i] = mix64(hj ^ h.hash)
			}
		}
		if !eligible[selfIdx] {
			r.rank[j.Name] = -1
		}
		if n == 0 {
			continue
		}
		assigned := assignHost(hs, eligible, scores, load, capOf(n), bySlots)
		load[assigned]++
		if !eligible[selfIdx] {
			continue
		}
		if assigned == selfIdx {
			r.rank[j.Name] = 0
			continue
		}
		r.rank[j.Name] = 1 + rankAmong(hs, eligible, scores, assigned, selfIdx, bySlots)
	}
	return r
}

// rankedHosts returns the live hosts plus self (its heartbeat may not
// be read yet, and it knows its own labels best), sorted by name.
func rankedHosts(hosts []HostBeat, self string, selfLabels map[string]string) []rankedHost {
	hs := make([]rankedHost, 0, len(hosts)+1)
	seenSelf := false
	for _, h := range hosts {
		if h.Host == self {
			seenSelf = true
			h.Labels = selfLabels
		}
		hs = append(hs, rankedHost{HostBeat: h, hash: hashName(h.Host)})
	}
	if !seenSelf {
		hs = append(hs, rankedHost{HostBeat: HostBeat{Host: self, Labels: selfLabels}, hash: hashName(self)})
	}
	slices.SortFunc(hs, func(a, b rankedHost) int { return strings.Compare(a.Host, b.Host) })
	return hs
}

// assignHost returns the host a job is assigned to among the eligible
// hosts: the best score of the first non-empty class among free slot
// and under the load limit, free slot, any (load: the jobs assigned to
// each host so far).
func assignHost(hs []rankedHost, eligible []bool, scores []uint64, load []int, limit int, bySlots bool) int {
	best := [3]int{-1, -1, -1}
	for i := range hs {
		if !eligible[i] {
			continue
		}
		free := !bySlots || hs[i].MaxParallel == 0 || hs[i].Running+load[i] < hs[i].MaxParallel
		for c, in := range [3]bool{free && load[i] < limit, free, true} {
			if in && (best[c] < 0 || scores[i] > scores[best[c]]) {
				best[c] = i
			}
		}
	}
	for _, b := range best {
		if b >= 0 {
			return b
		}
	}
	return -1
}

// rankAmong counts the eligible hosts other than assigned that rank before
// self: hosts with a free slot (by their heartbeats) before full ones,
// then by descending score.
func rankAmong(hs []rankedHost, eligible []bool, scores []uint64, assigned, self int, bySlots bool) int {
	selfFull := bySlots && hs[self].full()
	ahead := 0
	for i := range hs {
		if !eligible[i] || i == assigned || i == self {
			continue
		}
		full := bySlots && hs[i].full()
		if (!full && selfFull) || (full == selfFull && scores[i] > scores[self]) {
			ahead++
		}
	}
	return ahead
}

// rankCache is a ranking with what it was computed from.
type rankCache struct {
	cfg    *Config
	hosts  []HostBeat
	jobs   []*Job // the jobs ranked (compared by identity: a reload makes new *Job values)
	ranked ranking
}

// rankFor is rankJobs for this host under cfg, from the last ranking when
// it was computed for the same config, the same live hosts and the same
// jobs. rankJobs costs O(jobs × hosts) (10 ms for 10,000 jobs on 100
// hosts, on every host at every tick); the tick loop computes the
// ranking of the next tick ahead of it (warmRanking), so that the tick
// itself finds it ready. A ranking is never modified once computed.
func (s *Scheduler) rankFor(cfg *Config, jobs []*Job, hosts []HostBeat) ranking {
	if c := s.ranked.Load(); c != nil && c.cfg == cfg && slices.Equal(c.jobs, jobs) && sameHosts(c.hosts, hosts) {
		return c.ranked
	}
	r := rankJobsBy(jobs, hosts, s.host, cfg.Labels, !s.test.rankIgnoresSlots)
	s.ranked.Store(&rankCache{cfg: cfg, hosts: hosts, jobs: slices.Clone(jobs), ranked: r})
	return r
}

// warmRanking computes ahead of time the ranking fire will ask for when
// due, the jobs of the next tick, are due: those the last read of the
// pause flags does not pause (as fire leaves them out), under the current
// view of the live hosts.
func (s *Scheduler) warmRanking(cfg *Config, due []*Job) {
	paused := s.cachedPauses()
	live := slices.DeleteFunc(slices.Clone(due), func(j *Job) bool { _, p := paused.paused(j.Name); return p })
	if len(live) > 0 {
		s.rankFor(cfg, live, s.liveHosts(cfg))
	}
}
