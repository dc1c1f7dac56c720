package main

import (
	"fmt"
	"io"
	"time"

	"github.com/leasecron/leasecron/bench/internal/stats"
)

// medCPU is the median of a case's client or Redis CPU per operation
// (counter n: cntCPUClient or cntCPURedis).
func (b *bench) medCPU(c kase, n string) time.Duration {
	return time.Duration(stats.MedianOf(b.get(c), countRaw(n)))
}

// coresBusy is how many cores a case kept busy: client and Redis CPU per
// operation times its operations per second.
func (b *bench) coresBusy(c kase) float64 {
	return (b.medCPU(c, cntCPUClient) + b.medCPU(c, cntCPURedis)).Seconds() * b.medRate(c)
}

// writeSingleNode explains the single-node targets from this run's
// floor, command statistics and profiles, then how the fast path came
// about.
func (b *bench) writeSingleNode(w io.Writer) {
	ar := func(lib string, c int) kase { return kase{kind: kindAR, lib: lib, k: 1, conc: c} }
	l, r := ar(libLease, 1), ar(libRedislock, 1)
	fmt.Fprintf(w, "*Single node (K=1).* At c=1 lease does %s Acquire+Release/s against redislock's %s: %s.", fmtRate(b.medRate(l)), fmtRate(b.medRate(r)), b.pairRatio(l, r, rate))
	if fl := (kase{kind: kindRT2, k: 1, conc: 1}); b.medRate(fl) > 0 {
		fmt.Fprintf(w, " Both take the two round trips an Acquire+Release needs; two bare round trips (\"Profiles\" above) do %s/s, so redislock runs at %.0f %% of that and lease at %.0f %%.",
			fmtRate(b.medRate(fl)), 100*ratio(b.medRate(r), b.medRate(fl)), 100*ratio(b.medRate(l), b.medRate(fl)))
	}
	fmt.Fprintf(w, " Per operation lease uses %s of client and %s of Redis CPU against redislock's %s and %s.",
		fmtUs(b.medCPU(l, cntCPUClient)), fmtUs(b.medCPU(l, cntCPURedis)), fmtUs(b.medCPU(r, cntCPUClient)), fmtUs(b.medCPU(r, cntCPURedis)))
	lp, ok1 := b.medCmdProfile(l)
	rp, ok2 := b.medCmdProfile(r)
	if ok1 && ok2 {
		fmt.Fprintf(w, " In the server its two scripts run %.0f commands per operation against redislock's %.0f (an Acquire reads the lock, the epoch and the fencing counter, writes the lock and the counter and keeps the counter's expiry, and every round's last script also reads the data marker) and take %s against %s (commandstats, wall time).",
			lp.inner().calls, rp.inner().calls, fmtUs(lp.topLevel()), fmtUs(rp.topLevel()))
	}
	if lc, rc := b.cpuCase(l), b.cpuCase(r); lc != nil && rc != nil {
		fmt.Fprintf(w, " In the client profile lease's own code has %.0f %% of the samples and go-redis %.0f %% (redislock: %.0f %% in go-redis); write system calls %.0f %% against %.0f %%.",
			lc.pct("lease"), lc.pct("go-redis"), rc.pct("go-redis"), lc.pct("write syscalls"), rc.pct("write syscalls"))
	}
	if l16, r16 := ar(libLease, 16), ar(libRedislock, 16); b.get(l16) != nil && b.get(r16) != nil {
		fmt.Fprintf(w, " At c=16: %s against %s ops/s, %s; client CPU %s against %s and Redis CPU %s against %s per operation, %.2f against %.2f of the %d cores busy",
			fmtRate(b.medRate(l16)), fmtRate(b.medRate(r16)), b.pairRatio(l16, r16, rate),
			fmtUs(b.medCPU(l16, cntCPUClient)), fmtUs(b.medCPU(r16, cntCPUClient)),
			fmtUs(b.medCPU(l16, cntCPURedis)), fmtUs(b.medCPU(r16, cntCPURedis)),
			b.coresBusy(l16), b.coresBusy(r16), b.env.nproc)
		if b.coresBusy(l16) < b.coresBusy(r16)-0.1 {
			fmt.Fprint(w, ": the lane puts the 16 callers into shared pipelined rounds with one round in flight, so the client's work and Redis's take turns, where redislock's 16 connections keep Redis busy while the client works.")
		} else {
			fmt.Fprint(w, ": both keep the machine about as busy, so what one operation costs in the client and in Redis together decides.")
		}
	}
	fmt.Fprint(w, " What would close the gap, and why it is not done: a lock without the fencing counter, the epoch and the data marker (what redislock is) gives up the guarantees the daemon is built on; a different key layout (lock, counter and epoch in one key) would cut the commands per operation, but older clients on the same keys would not understand it; several rounds in flight per node on one connection needs a RESP reader of lease's own instead of go-redis.\n\n")
	fmt.Fprint(w, "*How the single-node fast path came about.* Every round used to go to the node's lane goroutine and back (two goroutine switches per round, each waking an idle thread). The lane is what keeps the guarantees: it applies a node's requests in the order they were made (a cleanup can never overtake the request it cleans up after) and lets a caller stop waiting at the per-node timeout while its request stays in order. The fast path (`lease/inline.go`) keeps both: one-key rounds run on the caller's goroutine when nothing is queued, one executor at a time (the lane or one caller), on a connection of its own whose reads and writes end at the per-node timeout, and after a round that failed on its connection, `CLIENT KILL ID` of that connection goes in front of the lane's next round, so that its request is applied before what follows or never (`TestInlineTimeout` and its negative control). In `bench/cmd/perfprobe` (5 alternating runs of the build before and after it, 2026-11-24) lease's client CPU per Acquire+Release fell from a median of 145 to 95 µs and the time per operation from 206 to 157 µs. In `bench/cmd/c16probe` (4 runs, 2026-11-24) two lease clients (two lanes, two rounds in flight) kept 1.45 cores busy instead of 1.25 but spent more per operation (smaller rounds), for between 10 % fewer and 6 % more ops/s; four did no better.\n\n")
}

// writeRedlock explains the Redlock targets at c=1 (K=3 and K=5) and
// Extend at K=3 from this run's CPU and command statistics.
func (b *bench) writeRedlock(w io.Writer) {
	ar := func(lib string, k int) kase { return kase{kind: kindAR, lib: lib, k: k, conc: 1} }
	for _, k := range []int{3, 5} {
		l, rs, ff := ar(libLease, k), ar(libRedsync, k), ar(libRedsyncFF, k)
		if b.medRate(l) == 0 || b.medRate(rs) == 0 {
			continue
		}
		wall := time.Duration(float64(time.Second) / b.medRate(l))
		fmt.Fprintf(w, "*Redlock, K=%d, c=1.* lease %s against redsync, %s against redsync WithFailFast. One lease Acquire+Release takes %s of client and %s of Redis CPU (all nodes) in %s of wall time on average: %.2f of the %d cores busy at c=1 (redsync: %s and %s of CPU).",
			k, b.pairRatio(l, rs, rate), b.pairRatio(l, ff, rate), fmtUs(b.medCPU(l, cntCPUClient)), fmtUs(b.medCPU(l, cntCPURedis)), fmtUs(wall),
			b.coresBusy(l), b.env.nproc, fmtUs(b.medCPU(rs, cntCPUClient)), fmtUs(b.medCPU(rs, cntCPURedis)))
		lp, ok1 := b.medCmdProfile(l)
		rp, ok2 := b.medCmdProfile(rs)
		if ok1 && ok2 {
			fmt.Fprintf(w, " In the servers lease's scripts take %s per operation (%s calls) and redsync's commands %s (%s calls; commandstats, wall time)",
				fmtUs(lp.topLevel()), fmt.Sprintf("%.1f", lp.per("evalsha").calls), fmtUs(rp.topLevel(direct(libRedsync)...)),
				fmt.Sprintf("%.1f", rp.per("evalsha").calls+rp.per("set").calls))
			if lp.topLevel() > rp.topLevel(direct(libRedsync)...) {
				fmt.Fprint(w, ": the fencing counter, the epoch and the data marker cost on every node.")
			} else {
				fmt.Fprint(w, ".")
			}
		}
		if pk := (kase{kind: kindPing, k: k, conc: 1}); b.medP50(pk) > 0 && float64(b.medP50(l)) > 2.6*float64(b.medP50(pk)) {
			fmt.Fprintf(w, " The p50 target (1.3 × two quorum RTTs = %s; lease's p50 %s) is for rounds that cost no more than a PING; here the client and the %d servers share %d cores, and the nodes a round does not wait for still take CPU from the next round.",
				fmtUs(time.Duration(2.6*float64(b.medP50(pk)))), fmtUs(b.medP50(l)), k, b.env.nproc)
		}
		if lc, rc := b.cpuCase(l), b.cpuCase(rs); lc != nil && rc != nil {
			fmt.Fprintf(w, " In the client profile, write system calls (one per node and round; on loopback they include delivering the request to the server) are %.0f %% of lease's samples and %.0f %% of redsync's; lease's own code %.0f %%.",
				lc.pct("write syscalls"), rc.pct("write syscalls"), lc.pct("lease"))
		}
		if b.pairRatio(l, rs, rate).med < 1.5 {
			fmt.Fprint(w, " Deciding at a quorum saves waiting, not work; the one remaining way to cut a round would be a Release that returns before a quorum answered, which Release's contract (an error means the key may still be held) rules out.")
		}
		fmt.Fprint(w, "\n\n")
	}
	e3, r3 := kase{kind: kindExtend, lib: libLease, k: 3, conc: 1}, kase{kind: kindExtend, lib: libRedsync, k: 3, conc: 1}
	if b.get(e3) == nil || b.get(r3) == nil {
		return
	}
	fmt.Fprintf(w, "*Extend, K=3, c=1* (%s redsync): one round for both.", b.pairRatio(e3, r3, rate))
	if lp, ok := b.medCmdProfile(e3); ok {
		if rp, ok := b.medCmdProfile(r3); ok {
			fmt.Fprintf(w, " lease's extend script (compare and PEXPIRE, plus the data marker read) takes %s of the servers' time per Extend, redsync's %s (commandstats, wall time).", fmtUs(lp.topLevel()), fmtUs(rp.topLevel()))
		}
	}
	if b.pairRatio(e3, r3, rate).med < 1.3 {
		fmt.Fprint(w, " lease answers at the second of three nodes where redsync waits for all three; with three fast local nodes the third answers almost as soon, so deciding at a quorum gains little, where at K=5 it gains two nodes.")
	}
	fmt.Fprint(w, "\n\n")
}

// tickScriptSplit says, from a batch's command statistics, what the
// servers spent per key against the floor, and how much of the scripts'
// time the commands they call took.
func tickScriptSplit(ps []cmdProfile, floors []floorRun) string {
	p, ok := medianProfile(ps)
	if !ok || p.per("evalsha").usec == 0 {
		return ""
	}
	var fl []cmdProfile
	for _, f := range floors {
		fl = append(fl, f.cmds)
	}
	fp, _ := medianProfile(fl)
	return fmt.Sprintf("Per key and all 5 nodes, Redis spent %s of CPU against the floor's %s (\"The 10,000-job tick: Redis's work per key\" above); of the scripts' %s per key in the servers (commandstats, wall time), the commands they call took %s, the rest is the Lua interpreter, the `redis.call` boundary and, on this loaded machine, waits for a core. ",
		fmtUs(p.redis), fmtUs(fp.redis), fmtUs(usec(p.per("evalsha").usec)), fmtUs(usec(p.inner().usec)))
}
