package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/leasecron/leasecron/bench/internal/stats"
)

// writeProfiles13 writes what this run measured behind the issue-13
// targets: the two-round-trip floor on one node, the servers' commands
// per operation and per key of the big tick, and the client's CPU
// profile of the cases the targets compare.
func (b *bench) writeProfiles13(w io.Writer) {
	fmt.Fprint(w, "## Profiles behind the targets (issue 13)\n\nAll from this run: the floor and the command statistics from the same repetitions as the tables, the CPU profiles from one more run of each case after them.\n\n")
	b.writeRT2(w)
	b.writeCmdProfiles(w)
	b.writeTickCmds(w)
	b.writeCPUProfiles(w)
}

// writeRT2 compares Acquire+Release on one node with two bare round trips.
func (b *bench) writeRT2(w io.Writer) {
	if b.get(kase{kind: kindRT2, k: 1, conc: 1}) == nil {
		return
	}
	fmt.Fprint(w, "### One node: two round trips\n\nAn Acquire+Release needs the acquire's answer before it can release, so it takes at least two round trips to the node. The reference below is exactly that, with nothing else: `PING`, then `PING`, on a bare TCP connection per worker (no client library, no script, no key). At c=1 it is the floor of every client. At c=16 it is the floor of a client that sends each caller's requests on their own (redislock, redsync), not of lease, whose lanes put several callers' requests into one pipelined round. ops/s of each library are shown as a share of it.\n\n")
	t := mdTable{head: []string{"c", "two bare round trips, unpipelined", libRedislock, libRedsync, libLease, "1.2× the faster of redislock and redsync"}}
	var notes []string
	for _, c := range []int{1, 16} {
		fl := kase{kind: kindRT2, k: 1, conc: c}
		fr := b.medRate(fl)
		best := max(b.medRate(kase{kind: kindAR, lib: libRedislock, k: 1, conc: c}), b.medRate(kase{kind: kindAR, lib: libRedsync, k: 1, conc: c}))
		if fr == 0 || best == 0 {
			continue
		}
		cell := func(lib string) string {
			r := b.medRate(kase{kind: kindAR, lib: lib, k: 1, conc: c})
			return fmt.Sprintf("%s ops/s (%.0f %%)", fmtRate(r), 100*ratio(r, fr))
		}
		need := 1.2 * best
		t.add(fmt.Sprint(c), fmt.Sprintf("%s ops/s, p50 %s", fmtRate(fr), fmtDur(b.medP50(fl))), cell(libRedislock), cell(libRedsync), cell(libLease),
			fmt.Sprintf("%s ops/s (%.0f %%)", fmtRate(need), 100*ratio(need, fr)))
		if c != 1 {
			continue
		}
		if need >= fr {
			notes = append(notes, fmt.Sprintf("At c=1, 1.2× the faster competitor is %.0f %% of two bare round trips: more than the round trips alone allow on this machine, so no lock that waits for its acquire's answer can meet that target here, whatever its client or scripts.", 100*ratio(need, fr)))
		} else {
			notes = append(notes, fmt.Sprintf("At c=1, 1.2× the faster competitor is %.0f %% of two bare round trips: two round trips take %s, the target allows %s per Acquire+Release, so a client and its scripts may add at most %s to the round trips themselves.",
				100*ratio(need, fr), fmtUs(usec(1e6/fr)), fmtUs(usec(1e6/need)), fmtUs(usec(1e6/need-1e6/fr))))
		}
	}
	t.write(w)
	if len(notes) > 0 {
		fmt.Fprintf(w, "%s\n", strings.Join(notes, " "))
	}
	fmt.Fprintln(w)
}

// writeCmdProfiles writes the servers' work per operation.
func (b *bench) writeCmdProfiles(w io.Writer) {
	ar := func(lib string, k, c int) kase { return kase{kind: kindAR, lib: lib, k: k, conc: c} }
	ex := func(lib string, k int) kase { return kase{kind: kindExtend, lib: lib, k: k, conc: 1} }
	rows := []kase{
		ar(libLease, 1, 1), ar(libLeaseNoFence, 1, 1), ar(libRedislock, 1, 1), ar(libRedsync, 1, 1),
		ar(libLease, 1, 16), ar(libRedislock, 1, 16),
		ar(libLease, 3, 1), ar(libRedsync, 3, 1), ar(libRedsyncFF, 3, 1),
		ar(libLease, 5, 1), ar(libRedsync, 5, 1), ar(libRedsyncFF, 5, 1),
		ex(libLease, 3), ex(libRedsync, 3), ex(libLease, 5), ex(libRedsync, 5),
	}
	t := mdTable{head: []string{"case", "Redis CPU per op (all nodes, INFO cpu)", "in the commands sent (wall)", "commands run, per op (µs: wall time)"}}
	for _, c := range rows {
		p, ok := b.medCmdProfile(c)
		if !ok {
			continue
		}
		op := "Acquire+Release"
		if c.kind == kindExtend {
			op = "Extend"
		}
		t.add(fmt.Sprintf("%s K=%d c=%d %s", op, c.k, c.conc, c.lib), fmtUs(p.redis), fmtUs(p.topLevel(direct(c.lib)...)), p.formatCmds())
	}
	if len(t.rows) == 0 {
		return
	}
	fmt.Fprint(w, "### Redis's work per operation\n\nSummed over the case's nodes and divided by its operations (warm-up included, as the CPU columns), for the repetition with the median Redis CPU. \"Redis CPU\" is the servers' user and system CPU (INFO cpu). The other columns are INFO commandstats: \"in the commands sent\" is the time in the scripts (EVALSHA, whose time includes the commands the script calls) and in the commands sent outside scripts (only redsync's SET NX here); the last column lists every command run, those inside scripts included, so its times overlap. Commandstats times are wall time inside the server: a server that loses its core in the middle of a script counts the wait, so with several servers on 2 cores they are an upper bound of the CPU the commands took and are not subtracted from the CPU here.\n\n")
	t.write(w)
	fmt.Fprintln(w)
}

// writeTickCmds writes the servers' work per key of the 10,000-job tick
// next to the raw SET NX PX floor's.
func (b *bench) writeTickCmds(w io.Writer) {
	t := mdTable{head: []string{"3 daemons × 5 nodes", "decided", "Redis CPU per key (all nodes, INFO cpu)", "× the floor's", "commands run, per key (µs: wall time)"}}
	var fl []cmdProfile
	for _, f := range b.sched.floors[3] {
		fl = append(fl, f.cmds)
	}
	fp, ok := medianProfile(fl)
	if !ok {
		return
	}
	t.add("floor: raw pipelined SET NX PX", fmtDur(b.floorDecided(3)), fmtUs(fp.redis), "1.00×", fp.formatCmds())
	for _, r := range b.sched.batch {
		if r.daemons != 3 || r.timeout != time.Second || len(r.decided) == 0 {
			continue
		}
		p, ok := medianProfile(r.cmds)
		if !ok {
			continue
		}
		name := "TryAcquireBatch, fencing"
		if !r.fencing {
			name = "TryAcquireBatch, WithoutFencing"
		}
		t.add(name+", per-node timeout 1 s", fmtDur(time.Duration(stats.Median(durs(r.decided)))), fmtUs(p.redis),
			fmt.Sprintf("%.2f×", float64(p.redis)/float64(max(fp.redis, 1))), p.formatCmds())
	}
	if len(t.rows) < 2 {
		return
	}
	fmt.Fprintf(w, "### The %d-job tick: Redis's work per key\n\nThe same runs as \"Scheduler: many leases on one tick\" (the repetition with the median Redis CPU), per key, summed over the 5 nodes: the servers' CPU until the tick was decided (INFO cpu), and every command they ran (INFO commandstats, commands inside scripts included) until the statistics were read: for the floor after every node answered, for a batch right after the decision (most losers' cleanups, which are sent without waiting, have arrived by then; some may not have). Commandstats times are wall time inside the server, as above.\n\n", b.cfg.batchKeys)
	t.write(w)
	fmt.Fprintln(w)
}

// writeCPUProfiles writes the client CPU profiles by category.
func (b *bench) writeCPUProfiles(w io.Writer) {
	if len(b.cpuCases) == 0 {
		return
	}
	fmt.Fprintf(w, "### Client CPU per Acquire+Release, by where it goes (Go CPU profile)\n\nEach case run once more for %s under `runtime/pprof` (client set-up and the key count after it included, for both columns). Samples are put in the first category that fits: GC (mark, sweep, scavenge), netpoll, futex, system calls (by the syscall that made them), allocation, the Go scheduler (a frame that parks, wakes, switches or starts goroutines or threads); the rest goes to the first frame outside the runtime: go-redis, lease, the competing library, this harness (`main.`), or other; \"other runtime\" has no frame outside the runtime. Each category is a share of the samples; with a few hundred samples per case a share is good to a few points.\n\n", max(b.cfg.dur, profileFor))
	head := []string{"case", "client CPU per op (getrusage)", "sampled by the profiler", "samples"}
	head = append(head, cpuCategories...)
	t := mdTable{head: head}
	for _, cc := range b.cpuCases {
		row := []string{fmt.Sprintf("K=%d c=%d %s", cc.c.k, cc.c.conc, cc.c.lib), fmtUs(cc.cpu), fmtUs(cc.total), fmt.Sprint(cc.samples)}
		for _, cat := range cpuCategories {
			if cc.share[cat] <= 0 {
				row = append(row, "–")
				continue
			}
			row = append(row, fmt.Sprintf("%.0f %%", cc.pct(cat)))
		}
		t.add(row...)
	}
	t.write(w)
	fmt.Fprintln(w)
}

// fmtUs formats a duration of a few µs with one decimal.
func fmtUs(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

// usec converts µs as a float to a duration.
func usec(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }

// cpuCase returns the CPU profile of case c, nil if it was not profiled.
func (b *bench) cpuCase(c kase) *cpuCase {
	for i := range b.cpuCases {
		if b.cpuCases[i].c == c {
			return &b.cpuCases[i]
		}
	}
	return nil
}

// pct is category cat's share of the sampled CPU, in per cent.
func (cc *cpuCase) pct(cat string) float64 {
	if cc.total == 0 {
		return 0
	}
	return 100 * float64(cc.share[cat]) / float64(cc.total)
}
