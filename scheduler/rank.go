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
// 2, ...). The first Candidates ranks try at T (rank r rankStagger×r after
// the rank-0 host, so that the assigned host usually wins and runs spread
// evenly); ranks Candidates to 2×Candidates-1 try once at T+StandbyAfter,
// when the tick is still neither held nor completed (a host that would now
// be a candidate in a fresher view tries then too). Hosts of a later rank
// never try. Ranking decides who tries first, never safety: the lease and
// the epoch still do, whatever the hosts' views.

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

// rankJobs computes this host's rank (0 = assigned) for each job of a
// tick, given the live hosts. A job this host is not eligible for gets
// -1. When hosts is empty (heartbeats unknown), every eligible job gets
// rank 0: every eligible host tries.
func rankJobs(jobs []*Job, hosts []HostBeat, self string, selfLabels map[string]string) ranking {
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
	// The live hosts plus this one (its heartbeat may not be read yet).
	hs := make([]rankedHost, 0, len(hosts)+1)
	seenSelf := false
	for _, h := range hosts {
		if h.Host == self {
			seenSelf = true
			h.Labels = selfLabels // this host knows its own labels best
		}
		hs = append(hs, rankedHost{HostBeat: h, hash: hashName(h.Host)})
	}
	if !seenSelf {
		hs = append(hs, rankedHost{HostBeat: HostBeat{Host: self, Labels: selfLabels}, hash: hashName(self)})
	}
	slices.SortFunc(hs, func(a, b rankedHost) int { return strings.Compare(a.Host, b.Host) })
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
		limit := capOf(n)
		best, bestFree := -1, -1
		for i := range hs {
			if !eligible[i] {
				continue
			}
			if best < 0 || scores[i] > scores[best] {
				best = i
			}
			if load[i] < limit && (bestFree < 0 || scores[i] > scores[bestFree]) {
				bestFree = i
			}
		}
		assigned := best
		if bestFree >= 0 {
			assigned = bestFree
		}
		load[assigned]++
		if !eligible[selfIdx] {
			continue
		}
		if assigned == selfIdx {
			r.rank[j.Name] = 0
			continue
		}
		mine, rank := scores[selfIdx], 1
		for i := range hs {
			if eligible[i] && i != assigned && i != selfIdx && scores[i] > mine {
				rank++
			}
		}
		r.rank[j.Name] = rank
	}
	return r
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
	r := rankJobs(jobs, hosts, s.host, cfg.Labels)
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
