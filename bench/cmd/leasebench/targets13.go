package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/leasecron/leasecron/bench/internal/stats"
)

// writeTargets13 writes the targets of issue 13 (performance at every
// size), each with the ratio next to the competitor or floor measured in
// the same run.
func (b *bench) writeTargets13(w io.Writer) {
	fmt.Fprintf(w, "## Targets (issue 13)\n\n")
	fmt.Fprintf(w, "Every library uses go-redis clients configured exactly as lease configures its own (RESP2, no `CLIENT SETINFO`, no retries, the same timeouts and pool size); a ratio between two cases is the median of their ratios within each repetition (the cases of one setting run back to back, under the same load; the speed of this shared machine moves much more between repetitions), shown with the range over the repetitions; the ops/s are each case's median. leasecron lease has fencing on unless the row says otherwise. Where a target is not met, \"Profiles behind the targets\" below shows what limits it, measured in this run.\n\n")
	t := mdTable{head: []string{"target", "measured", "verdict"}}
	kc := func(kind, lib string, k, c int) kase { return kase{kind: kind, lib: lib, k: k, conc: c} }
	// Single node.
	for _, c := range []int{1, 16} {
		l := kc(kindAR, libLease, 1, c)
		if b.get(l) == nil {
			continue
		}
		lr := b.medRate(l)
		for _, other := range []string{libRedislock, libRedsync} {
			o := kc(kindAR, other, 1, c)
			if b.get(o) == nil {
				continue
			}
			or := b.medRate(o)
			pr := b.pairRatio(l, o, rate)
			t.add(fmt.Sprintf("Acquire+Release, K=1, c=%d: lease ≥ 1.2× %s ops/s", c, other),
				fmt.Sprintf("%s vs %s ops/s: %s (client CPU/op %s vs %s)", fmtRate(lr), fmtRate(or), pr, fmtDur(b.medCPU(l, cntCPUClient)), fmtDur(b.medCPU(o, cntCPUClient))),
				yes(pr.med >= 1.2))
		}
	}
	// Redlock, K=3 and 5, c=1.
	for _, k := range []int{3, 5} {
		l := kc(kindAR, libLease, k, 1)
		if b.get(l) == nil {
			continue
		}
		lr := b.medRate(l)
		for _, o := range []struct {
			lib  string
			goal float64
		}{{libRedsync, 1.5}, {libRedsyncFF, 1.2}} {
			oc := kc(kindAR, o.lib, k, 1)
			if b.get(oc) == nil {
				continue
			}
			or, pr := b.medRate(oc), b.pairRatio(l, oc, rate)
			t.add(fmt.Sprintf("Acquire+Release, K=%d, c=1: lease ≥ %.1f× %s ops/s", k, o.goal, o.lib),
				fmt.Sprintf("%s vs %s ops/s: %s", fmtRate(lr), fmtRate(or), pr), yes(pr.med >= o.goal))
		}
		if pk := (kase{kind: kindPing, k: k, conc: 1}); b.medP50(pk) > 0 {
			p, q := b.medP50(l), b.medP50(pk)
			pr := b.pairRatio(l, pk, func(s stats.Summary) float64 { return float64(s.P50) })
			pr.med, pr.lo, pr.hi = pr.med/2, pr.lo/2, pr.hi/2 // against two RTTs
			t.add(fmt.Sprintf("Acquire+Release, K=%d, c=1: lease p50 ≤ 1.3 × two quorum RTTs", k),
				fmt.Sprintf("%s vs 2 × %s: %s", fmtDur(p), fmtDur(q), pr), yes(pr.med > 0 && pr.med <= 1.3))
		}
		e, er := kc(kindExtend, libLease, k, 1), kc(kindExtend, libRedsync, k, 1)
		if b.get(e) != nil && b.get(er) != nil {
			a, o, pr := b.medRate(e), b.medRate(er), b.pairRatio(e, er, rate)
			t.add(fmt.Sprintf("Extend, K=%d, c=1: lease ≥ 1.3× redsync ops/s", k),
				fmt.Sprintf("%s vs %s ops/s: %s", fmtRate(a), fmtRate(o), pr), yes(pr.med >= 1.3))
		}
	}
	// The 10,000-job tick against the raw pipelined SET NX PX floor.
	for _, r := range b.sched.batch {
		if r.daemons != 3 || len(r.decided) == 0 {
			continue
		}
		f := b.floorDecided(r.daemons)
		if f == 0 {
			continue
		}
		d := time.Duration(stats.Median(durs(r.decided)))
		fence := "fencing"
		if !r.fencing {
			fence = "WithoutFencing"
		}
		x := float64(d) / float64(f)
		t.add(fmt.Sprintf("%d-job tick, 3 daemons × 5 nodes, %s, per-node timeout %s: decided ≤ 1.5 × the raw SET NX PX floor", r.keys, fence, fmtDur(r.timeout)),
			fmt.Sprintf("%s vs %s = **%.2f×**; %d of %d keys won, %d failed", fmtDur(d), fmtDur(f), x, medInt(r.wins), r.keys, medInt(r.failed)),
			yes(x <= 1.5 && medInt(r.failed) == 0))
	}
	// Tick to job start against the spawn floor.
	if d := b.daemon; d.skipped == "" && d.ticks > 0 {
		if fl := d.floorFor(daemonJobs); fl > 0 {
			x := float64(d.p99) / float64(fl)
			t.add(fmt.Sprintf("tick-to-start p99 ≤ 1.3 × the spawn floor (%d jobs at once, no daemon)", daemonJobs),
				fmt.Sprintf("%s vs %s = **%.2f×** (p50 %s vs %s; the same spawn with the daemons running, between ticks: p99 %s)", fmtDur(d.p99), fmtDur(fl), x, fmtDur(d.p50), fmtDur(d.floorP50For(daemonJobs)), fmtDur(d.busyFloor.p99)),
				yes(x <= 1.3))
		}
	} else {
		t.add("tick-to-start p99 ≤ 1.3 × the spawn floor", "not measured: "+d.skipped, "**open**")
	}
	t.write(w)
}

// pairedRatio is the median over the repetitions of one case's statistic
// divided by another's in the same repetition, and the range of those
// ratios. The cases of one setting run back to back in each repetition,
// so a ratio within one repetition is taken under the same load; the
// machine's speed moves much more between repetitions.
type pairedRatio struct{ med, lo, hi float64 }

// String formats the ratio for a table cell: the median in bold and the
// range, or "–" when no repetition had both cases.
func (p pairedRatio) String() string {
	if p.med == 0 {
		return "–"
	}
	if p.lo == p.hi {
		return fmt.Sprintf("**%.2f×**", p.med)
	}
	return fmt.Sprintf("**%.2f×** (per repetition %.2f–%.2f×)", p.med, p.lo, p.hi)
}

// pairRatio computes a's statistic f over b's, repetition by repetition.
func (b *bench) pairRatio(a, o kase, f func(stats.Summary) float64) pairedRatio {
	as, os := b.get(a), b.get(o)
	var rs []float64
	for i := range min(len(as), len(os)) {
		if n, d := f(as[i]), f(os[i]); n > 0 && d > 0 {
			rs = append(rs, n/d)
		}
	}
	if len(rs) == 0 {
		return pairedRatio{}
	}
	return pairedRatio{med: stats.Median(rs), lo: slices.Min(rs), hi: slices.Max(rs)}
}

// floorP50For is the p50 of the spawn floor of n processes at once (0 when not measured).
func (d daemonResults) floorP50For(n int) time.Duration {
	for _, f := range d.floors {
		if f.procs == n {
			return f.p50
		}
	}
	return 0
}

// writeFindings13 explains the issue-13 targets: what changed, the
// before/after profiles, and what limits each target not met.
func (b *bench) writeFindings13(w io.Writer) {
	fmt.Fprint(w, "### Issue 13: what changed, and what limits each target\n\n")
	fmt.Fprint(w, "*Same client settings for everyone.* go-redis's defaults (RESP3, `CLIENT SETINFO`, 3 retries) differ from what lease sets up for its own connections; with RESP3 every command also pays a non-blocking read for push notifications. Every library now gets clients configured exactly as lease's (`probe.NewClient` in `bench/internal/probe`), which made redislock and redsync faster at c=1 than in earlier runs of this file.\n\n")
	fmt.Fprint(w, "*What changed in lease/.* (1) The data-marker check (`birth.lua`, which detects a node that lost its data) no longer is a second script in every round: the round's last script call runs in a variant of its script that reads the marker after its own work, in the same atomic step, and reads the server clock only when the marker is written or seen for the first time. Every round still checks the marker after all its calls; a NOSCRIPT resend checks it again after the resent calls. (2) A batch, and a single Acquire, sends one `acquirebatch.lua` call per node for every 128 keys: one MGET for all their keys, the same per-key decision as `acquire.lua`, one short string per key in the reply (a key listed twice reads the call's own write); losers are released by one `releasebatch.lua` call per chunk. (3) The fencing round that follows when the granting nodes' counters disagree is chunked the same way (`fencebatch.lua`); it used to send one script per key and node, and it is common when daemons contend for one tick (a loser's later time floor is seen on a node, so the winner's token must be raised above it). A Redis Cluster node keeps one call per key (a script must stay in one hash slot). NOSCRIPT resends now check every lease a call touches before resending it.\n\n")
	fmt.Fprint(w, "*Before and after, load-independent measures* (`bench/cmd/perfprobe`-style loop on one local redis-server, this commit against a2093d7, 3 alternating runs, medians; client CPU from getrusage, Redis CPU from INFO):\n\n")
	t := mdTable{head: []string{"measure", "before (a2093d7)", "after"}}
	t.add("Acquire+Release, 1 node, c=1: client CPU per op", "107 µs", "71 µs")
	t.add("the same: Redis CPU per op", "70 µs", "53 µs")
	t.add("the same: Go allocations per op", "108 (4,402 B)", "96 (4,104 B)")
	t.add("TryAcquireBatch, 10,000 keys, 1 node, fencing: client CPU", "39 ms", "21 ms")
	t.add("the same: Redis CPU", "105 ms", "65 ms")
	t.add("the same: Go allocations per key", "21 (15.0 MiB)", "12 (10.5 MiB)")
	t.add("CPU profile of Acquire+Release K=1 c=1 (`-only 'ar/K1/c1/leasecron lease$' -cpuprofile`): system calls / scheduler (schedule, findRunnable) / futex / lease's own code", "41 % (write 24, read 12) / 21 % / 13 % / 4 %", "38 % (write 21, read 10) / 23 % / 11 % / 9 %")
	t.write(w)

	ar := func(lib string, k, c int) kase { return kase{kind: kindAR, lib: lib, k: k, conc: c} }
	if l, r := ar(libLease, 1, 1), ar(libRedislock, 1, 1); b.get(l) != nil && b.get(r) != nil {
		b.writeSingleNode(w)
	}
	b.writeRedlock(w)
	for _, r := range b.sched.batch {
		if r.daemons != 3 || !r.fencing || r.timeout != time.Second || len(r.decided) == 0 {
			continue
		}
		f := b.floorDecided(3)
		if f == 0 {
			break
		}
		var nf *batchRow
		for i := range b.sched.batch {
			if x := &b.sched.batch[i]; x.daemons == 3 && !x.fencing && x.timeout == time.Second && len(x.decided) > 0 {
				nf = x
			}
		}
		d := time.Duration(stats.Median(durs(r.decided)))
		fmt.Fprintf(w, "*The 10,000-job tick.* 3 daemons decide the tick in %s with fencing, %.2f× the raw SET NX PX floor of %s measured in the same run", fmtDur(d), float64(d)/float64(f), fmtDur(f))
		if nf != nil {
			nd := time.Duration(stats.Median(durs(nf.decided)))
			fmt.Fprintf(w, " (WithoutFencing: %s, %.2f×)", fmtDur(nd), float64(nd)/float64(f))
		}
		fmt.Fprintf(w, "; Redis used %s of CPU for it, the floor %s. "+
			"The client side is no longer the cost (%s of client CPU for 3 daemons, against the floor's %s: one reply string per key instead of a go-redis command object per key and node). "+
			"What limits it is the work in Redis: a key's acquisition is a script step with an epoch check, a grant (SET with PX) and, with fencing, a second write (the counter, and on later ticks a PTTL to keep its expiry), where the floor is one SET parsed straight from the socket. %s"+
			"Calls per key are at their least for the guarantees (one MGET per 128 keys, then one SET per key, plus the counter's SET with fencing); the rest would need a different data layout (lock and counter in one key), which older clients on the same keys would not understand.\n\n",
			fmtDur(time.Duration(stats.Median(durs(r.cpuRedis)))), fmtDur(medFloor(b.sched.floors[3], func(f floorRun) time.Duration { return f.cpuRedis })),
			fmtDur(time.Duration(stats.Median(durs(r.cpuClient)))), fmtDur(medFloor(b.sched.floors[3], func(f floorRun) time.Duration { return f.cpuClient })),
			tickScriptSplit(r.cmds, b.sched.floors[3]))
		break
	}
	if d := b.daemon; d.skipped == "" && d.ticks > 0 {
		fl := d.floorFor(daemonJobs)
		busy := "that much of the gap is the machine being shared, before the daemon does anything"
		if d.busyFloor.p99 <= fl {
			busy = "no slower than the floor, so the idle daemons are not what costs the time: it goes at the tick itself"
		}
		fmt.Fprintf(w, "*Tick to job start.* p99 %s against the spawn floor's %s (%d processes started at once by this benchmark, nothing else running): %.2f×. "+
			"The same spawn repeated half-way between ticks while the 3 daemons, their spare supervisors and the 5 nodes run gives p99 %s: %s. "+
			"In this benchmark the %d daemons are %d hosts on one 2-core machine, and the ranking spread the starts %s, so at every tick all %d daemons, their supervisors and the jobs they start compete for the same 2 cores; on a fleet each host starts only its own share.\n\n",
			fmtDur(d.p99), fmtDur(fl), daemonJobs, float64(d.p99)/float64(max(fl, 1)), fmtDur(d.busyFloor.p99), busy,
			d.daemons, d.daemons, startSpread(d.perHost, d.daemons), d.daemons)
	}
	b.writeTickTrace(w)
}
