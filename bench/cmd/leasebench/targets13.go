package main

import (
	"fmt"
	"io"
	"time"

	"github.com/leasecron/leasecron/bench/internal/stats"
)

// writeTargets13 writes the targets of issue 13 (performance at every
// size), each with the ratio next to the competitor or floor measured in
// the same run.
func (b *bench) writeTargets13(w io.Writer) {
	fmt.Fprintf(w, "## Targets (issue 13)\n\n")
	fmt.Fprintf(w, "Every library uses go-redis clients configured exactly as lease configures its own (RESP2, no `CLIENT SETINFO`, no retries, the same timeouts and pool size); ratios are of medians from this run. leasecron lease has fencing on unless the row says otherwise.\n\n")
	t := mdTable{head: []string{"target", "measured", "verdict"}}
	kc := func(kind, lib string, k, c int) kase { return kase{kind: kind, lib: lib, k: k, conc: c} }
	cpuOf := func(c kase) time.Duration {
		return time.Duration(stats.MedianOf(b.get(c), countRaw(cntCPUClient)))
	}
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
			t.add(fmt.Sprintf("Acquire+Release, K=1, c=%d: lease ≥ 1.2× %s ops/s", c, other),
				fmt.Sprintf("%s vs %s ops/s = **%.2f×** (client CPU/op %s vs %s)", fmtRate(lr), fmtRate(or), ratio(lr, or), fmtDur(cpuOf(l)), fmtDur(cpuOf(o))),
				yes(ratio(lr, or) >= 1.2))
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
			or := b.medRate(oc)
			t.add(fmt.Sprintf("Acquire+Release, K=%d, c=1: lease ≥ %.1f× %s ops/s", k, o.goal, o.lib),
				fmt.Sprintf("%s vs %s ops/s = **%.2f×**", fmtRate(lr), fmtRate(or), ratio(lr, or)), yes(ratio(lr, or) >= o.goal))
		}
		if q := b.medP50(kase{kind: kindPing, k: k, conc: 1}); q > 0 {
			p := b.medP50(l)
			r := float64(p) / float64(2*q)
			t.add(fmt.Sprintf("Acquire+Release, K=%d, c=1: lease p50 ≤ 1.3 × two quorum RTTs", k),
				fmt.Sprintf("%s vs 2 × %s = **%.2f×**", fmtDur(p), fmtDur(q), r), yes(r <= 1.3))
		}
		e, er := kc(kindExtend, libLease, k, 1), kc(kindExtend, libRedsync, k, 1)
		if b.get(e) != nil && b.get(er) != nil {
			a, o := b.medRate(e), b.medRate(er)
			t.add(fmt.Sprintf("Extend, K=%d, c=1: lease ≥ 1.3× redsync ops/s", k),
				fmt.Sprintf("%s vs %s ops/s = **%.2f×**", fmtRate(a), fmtRate(o), ratio(a, o)), yes(ratio(a, o) >= 1.3))
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

func (d daemonResults) floorP50For(n int) time.Duration {
	for _, f := range d.floors {
		if f.procs == n {
			return f.p50
		}
	}
	return 0
}
