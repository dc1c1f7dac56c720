package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/leasecron/leasecron/bench/internal/stats"
)

// writeSched writes the scheduler-side tables: the batch of many leases on
// one tick with its floor, the round trips and the renewal cost.
func (b *bench) writeSched(w io.Writer) {
	s := b.sched
	if len(s.batch) == 0 && len(s.renew) == 0 {
		fmt.Fprintf(w, "## Scheduler benchmarks\n\nNot run (-skip-sched or -only).\n\n")
		return
	}
	fmt.Fprintf(w, "## Scheduler: many leases on one tick\n\n")
	fmt.Fprintf(w, "Each simulated daemon is a `lease.Client` on all 5 nodes calling `TryAcquireBatch` once with the same keys (epoch = the tick, TTL 30 s), all daemons at the same instant, in this process. \"decided\" is the time until every daemon's call returned (every key won, refused or failed). \"EVALSHA per key and node\" counts the scripts each node ran (INFO commandstats), including the losers' cleanup releases, which are sent without waiting (only to nodes that did not refuse). A key that nobody won and that did not fail was split between the daemons (each holds fewer nodes than a quorum; the scheduler retries it). CPU is what this process (all daemons) and the 5 redis-servers used during the call, on a 2-core machine.\n\n")
	fmt.Fprintf(w, "**The floor** (rows \"floor\"), measured in the same run, interleaved with the batches: each daemon sends the same keys as one raw pipelined `SET key value NX PX 30000` per node (no scripts, no fencing, no epochs, no data marker; go-redis configured as lease's own) to all 5 nodes at once, and is done when 3 of its 5 nodes answered the whole pipeline. \"× floor\" is decided (median) / the floor's (median) with as many daemons.\n\n")
	t := mdTable{head: []string{"daemons", "keys", "fencing", "per-node timeout (batch decision timeout)", "decided (median)", "× floor", "decided (max)", "keys won", "failed", "won twice", "EVALSHA per key and node", "client CPU", "Redis CPU", "Go alloc per daemon"}}
	for _, d := range []int{1, 3} {
		fs := s.floors[d]
		if len(fs) == 0 {
			continue
		}
		t.add(fmt.Sprint(d), fmt.Sprint(b.cfg.batchKeys), "floor: raw SET NX PX", "–", fmtDur(b.floorDecided(d)), "1.00×", fmtDur(slices.MaxFunc(fs, func(a, b floorRun) int { return int(a.decided - b.decided) }).decided),
			"–", "–", "–", "0", fmtDur(medFloor(fs, func(f floorRun) time.Duration { return f.cpuClient })), fmtDur(medFloor(fs, func(f floorRun) time.Duration { return f.cpuRedis })), "–")
	}
	for _, r := range s.batch {
		if len(r.decided) == 0 {
			continue
		}
		dec := time.Duration(stats.Median(durs(r.decided)))
		xf := "–"
		if f := b.floorDecided(r.daemons); f > 0 {
			xf = fmt.Sprintf("%.2f×", float64(dec)/float64(f))
		}
		t.add(fmt.Sprint(r.daemons), fmt.Sprint(r.keys), fmt.Sprint(r.fencing), fmtDur(r.timeout)+" ("+fmtDur(batchTimeout(r.timeout, r.keys))+")",
			fmtDur(dec), xf, fmtDur(slices.Max(r.decided)),
			fmt.Sprint(medInt(r.wins)), fmt.Sprint(medInt(r.failed)), fmt.Sprint(r.doubles),
			fmt.Sprintf("%.2f", stats.Median(r.evalsha)/float64(r.keys)),
			fmtDur(time.Duration(stats.Median(durs(r.cpuClient)))), fmtDur(time.Duration(stats.Median(durs(r.cpuRedis)))),
			fmt.Sprintf("%.1f MiB", stats.Median(r.allocMiB)))
	}
	t.write(w)
	for _, r := range s.batch {
		if r.firstError != "" {
			fmt.Fprintf(w, "First failure (daemons=%d, fencing=%v, timeout %s): `%s`\n\n", r.daemons, r.fencing, r.timeout, r.firstError)
		}
	}
	if len(s.rounds) > 0 {
		fmt.Fprintf(w, "Round trips, measured from outside the library: the same batch from one daemon with every node behind its proxy and slowed by D. Each proxy counts request bursts (client→server chunks separated by more than D/2): a client cannot send its next round before the delayed one was answered, so each burst is one pipelined round trip. The timing check: (decided(D) − decided(0)) / D, medians of 3 (it reads low when the undelayed run is CPU-bound, because the delay then overlaps work that competed for the CPU).\n\n")
		t := mdTable{head: []string{"keys", "fencing", "D", "request rounds per node (proxies)", "decided, no delay", "decided, +D on every node", "rounds from timing"}}
		for _, r := range s.rounds {
			t.add(fmt.Sprint(r.keys), fmt.Sprint(r.fencing), r.delay.String(), fmt.Sprint(r.bursts), fmtDur(r.base), fmtDur(r.slowed), fmt.Sprintf("%.2f", r.inferred))
		}
		t.write(w)
	}
	if len(s.renew) > 0 {
		fmt.Fprintf(w, "## Scheduler: renewal cost\n\n1,000 leases held with `Lease.Hold()` (renewal = one Extend every TTL/3, the default), acquired in 10 batches spread over one renewal period as jobs started at different times would be. Measured over 3 renewal periods with TTL 3 s; the cost is proportional to 1/TTL, so the last columns scale it to the daemon's default TTL of 30 s (renew every 10 s).\n\n")
		t := mdTable{head: []string{"K", "leases", "TTL / renew", "Extend calls/s", "Redis ops/s per node", "Redis ops/s all nodes", "client CPU", "Redis CPU (all nodes)", "failed / lost", "at TTL 30 s: ops/s per node"}}
		for _, r := range s.renew {
			t.add(fmt.Sprint(r.k), fmt.Sprint(r.leases), r.ttl.String()+" / "+r.every.String(), fmtRate(r.extendsPerSec), fmtRate(r.opsPerNode), fmtRate(r.opsPerNode*float64(r.k)),
				fmt.Sprintf("%.1f ms/s", r.cpuClientMsPS), fmt.Sprintf("%.1f ms/s", r.cpuRedisMsPS), fmt.Sprintf("%d / %d", r.failed, r.lost),
				fmtRate(r.opsPerNode*r.ttl.Seconds()/30))
		}
		t.write(w)
		for _, r := range s.renew {
			if r.firstError != "" {
				fmt.Fprintf(w, "First lost hold (K=%d): `%s`\n\n", r.k, r.firstError)
			}
		}
	}
}

// floorDecided is the median batch floor with `daemons` daemons (0: not
// measured).
func (b *bench) floorDecided(daemons int) time.Duration {
	return medFloor(b.sched.floors[daemons], func(f floorRun) time.Duration { return f.decided })
}

func medFloor(fs []floorRun, get func(floorRun) time.Duration) time.Duration {
	if len(fs) == 0 {
		return 0
	}
	v := make([]float64, len(fs))
	for i, f := range fs {
		v[i] = float64(get(f))
	}
	return time.Duration(stats.Median(v))
}

// writeDaemon writes the tick-to-start table of the real daemons and the
// spawn floors.
func (b *bench) writeDaemon(w io.Writer) {
	d := b.daemon
	fmt.Fprintf(w, "## Scheduler: tick-to-start delay (daemon)\n\n")
	if d.skipped != "" || d.ticks == 0 {
		reason := d.skipped
		if reason == "" {
			reason = "not run (-skip-daemon or -only)"
		}
		fmt.Fprintf(w, "Not measured: %s.\n\n", reason)
		return
	}
	fmt.Fprintf(w, "%d `leasecron run` daemons on the same 5 nodes, %d jobs `@every 1s`, run for %s. Each job is `bench/cmd/tickstamp`, which writes its start time (its first act) and `LEASECRON_TICK_UNIX`; the delay is start − tick. The first %d ticks after start-up are not counted.\n\n",
		d.daemons, d.jobs, d.runFor, daemonIgnore)
	t := mdTable{head: []string{"", "ticks started", "p50", "p99", "max", "started twice", "never started", "idle RSS (median)", "peak RSS", "idle RSS, 10,000 jobs"}}
	t.add("daemons", fmt.Sprint(d.ticks), fmtDur(d.p50), fmtDur(d.p99), fmtDur(d.max), fmt.Sprint(d.duplicates), fmt.Sprint(d.missing),
		fmt.Sprintf("%.1f MiB", d.rssIdleMiB), fmt.Sprintf("%.1f MiB", d.rssPeakMiB), mib(d.rss10kMiB))
	for _, f := range d.floors {
		t.add(fmt.Sprintf("floor: %d × exec of tickstamp at once, no daemon", f.procs), fmt.Sprint(f.n), fmtDur(f.p50), fmtDur(f.p99), fmtDur(f.max), "–", "–", "–", "–", "–")
	}
	if f := d.busyFloor; f.n > 0 {
		t.add(fmt.Sprintf("floor: %d × exec of tickstamp at once, half-way between ticks while the daemons run", f.procs), fmt.Sprint(f.n), fmtDur(f.p50), fmtDur(f.p99), fmtDur(f.max), "–", "–", "–", "–", "–")
	}
	t.write(w)
	hosts := make([]string, 0, len(d.perHost))
	for h, n := range d.perHost {
		hosts = append(hosts, fmt.Sprintf("%s %d", h, n))
	}
	slices.Sort(hosts)
	fmt.Fprintf(w, "Runs per host: %s.", strings.Join(hosts, ", "))
	if d.rss10kNote != "" {
		fmt.Fprintf(w, " 10,000-job RSS: %s.", d.rss10kNote)
	}
	fmt.Fprintf(w, "\n\n")
}
