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
// per Acquire+Release, and the client's CPU profile of the cases the
// targets compare.
func (b *bench) writeProfiles13(w io.Writer) {
	fmt.Fprint(w, "## Profiles behind the targets (issue 13)\n\nAll from this run: the floor and the command statistics from the same repetitions as the tables, the CPU profiles from one more run of each case after them.\n\n")
	b.writeRT2(w)
	b.writeCmdProfiles(w)
	b.writeTickCmds(w)
	b.writeCPUProfiles(w)
}

// writeTickCmds writes the servers' work per key of the 10,000-job tick
// next to the raw SET NX PX floor's.
func (b *bench) writeTickCmds(w io.Writer) {
	t := mdTable{head: []string{"3 daemons × 5 nodes", "decided", "Redis CPU per key (all nodes, INFO cpu)", "× the floor's", "commands run, per key: calls: µs in the server (wall time)"}}
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
	fmt.Fprintf(w, "### The %d-job tick: Redis's work per key\n\nThe same runs as \"Scheduler: many leases on one tick\" (the repetition with the median Redis CPU), per key, summed over the 5 nodes: the servers' CPU until the tick was decided (INFO cpu), and every command they ran (INFO commandstats, losers' cleanups and commands inside scripts included). Commandstats times are wall time inside the server: a server that loses its core in the middle of a script (5 servers and the clients share 2 cores here) counts the wait, so they can add up to more than the CPU.\n\n", b.cfg.batchKeys)
	t.write(w)
	fmt.Fprintln(w)
}

// writeRT2 compares Acquire+Release on one node with two bare round trips.
func (b *bench) writeRT2(w io.Writer) {
	if b.get(kase{kind: kindRT2, k: 1, conc: 1}) == nil {
		return
	}
	fmt.Fprint(w, "### One node: two round trips are the floor\n\nAn Acquire+Release needs the acquire's answer before it can release, so it takes at least two round trips to the node. The floor below is exactly that, with nothing else: `PING`, then `PING`, on a bare TCP connection per worker (no client library, no script, no key). ops/s of each library are shown as a share of the floor's.\n\n")
	t := mdTable{head: []string{"c", "two bare round trips", libRedislock, libRedsync, libLease, "1.2× the faster of redislock and redsync"}}
	var notes []string
	for _, c := range []int{1, 16} {
		fl := kase{kind: kindRT2, k: 1, conc: c}
		if b.get(fl) == nil {
			continue
		}
		fr := b.medRate(fl)
		cell := func(lib string) string {
			r := b.medRate(kase{kind: kindAR, lib: lib, k: 1, conc: c})
			return fmt.Sprintf("%s ops/s (%.0f %%)", fmtRate(r), 100*ratio(r, fr))
		}
		best := max(b.medRate(kase{kind: kindAR, lib: libRedislock, k: 1, conc: c}), b.medRate(kase{kind: kindAR, lib: libRedsync, k: 1, conc: c}))
		need := 1.2 * best
		t.add(fmt.Sprint(c), fmt.Sprintf("%s ops/s, p50 %s", fmtRate(fr), fmtDur(b.medP50(fl))), cell(libRedislock), cell(libRedsync), cell(libLease),
			fmt.Sprintf("%s ops/s (%.0f %%)", fmtRate(need), 100*ratio(need, fr)))
		switch {
		case need >= fr:
			notes = append(notes, fmt.Sprintf("At c=%d, 1.2× the faster competitor is %.0f %% of the floor: more than two bare round trips allow on this machine, so no lock that waits for its acquire's answer can meet that target here, whatever its client or scripts.", c, 100*ratio(need, fr)))
		default:
			notes = append(notes, fmt.Sprintf("At c=%d, 1.2× the faster competitor is %.0f %% of the floor (lease: %.0f %%): the floor completes an operation every %s (all workers together), the target needs one every %s, so a client may add at most %s per operation to two bare round trips, in the client and in Redis together.", c, 100*ratio(need, fr),
				100*ratio(b.medRate(kase{kind: kindAR, lib: libLease, k: 1, conc: c}), fr), fmtUs(usec(1e6/fr)), fmtUs(usec(1e6/need)), fmtUs(usec(1e6/need-1e6/fr))))
		}
	}
	t.write(w)
	fmt.Fprintf(w, "%s\n\n", strings.Join(notes, " "))
}

// writeCmdProfiles writes the servers' work per Acquire+Release.
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
	t := mdTable{head: []string{"case", "Redis CPU per op (all nodes)", "of which in the commands sent", "the rest: reading, parsing, answering", "commands run, per op: calls: µs"}}
	for _, c := range rows {
		p, ok := b.medCmdProfile(c)
		if !ok {
			continue
		}
		cmd := p.topLevel(direct(c.lib)...)
		op := "Acquire+Release"
		if c.kind == kindExtend {
			op = "Extend"
		}
		t.add(fmt.Sprintf("%s K=%d c=%d %s", op, c.k, c.conc, c.lib), fmtUs(p.redis), fmtUs(cmd), fmtUs(p.redis-cmd), p.formatCmds())
	}
	if len(t.rows) == 0 {
		return
	}
	fmt.Fprint(w, "### Redis's work per operation (INFO commandstats)\n\nSummed over the case's nodes and divided by its operations (warm-up included, as the CPU columns); the repetition with the median time in commands. \"Redis CPU\" is the servers' user and system CPU (INFO cpu) over the same span.\n\n")
	t.write(w)
	fmt.Fprintln(w)
}

// writeCPUProfiles writes the client CPU profiles by category.
func (b *bench) writeCPUProfiles(w io.Writer) {
	if len(b.cpuCases) == 0 {
		return
	}
	fmt.Fprint(w, "### Client CPU per Acquire+Release, by where it goes (Go CPU profile)\n\nEach case run once more for the measured time under `runtime/pprof`; samples are put in the first category that fits, leaf first: GC, netpoll, futex, system calls (by the syscall that made them), allocation, the rest of the Go runtime (\"Go scheduler\"), then the first frame of go-redis, lease or the competing library. Each category is a share of the sampled CPU. The profiler samples the CPU time of the process's threads; the process's CPU from getrusage is larger where much of it is the kernel's network work done on the process's behalf (loopback TCP delivers to the server inside the client's write), which the samples see only in part.\n\n")
	head := []string{"case", "client CPU per op (getrusage)", "sampled by the profiler"}
	head = append(head, cpuCategories...)
	t := mdTable{head: head}
	for _, cc := range b.cpuCases {
		row := []string{fmt.Sprintf("K=%d c=%d %s", cc.c.k, cc.c.conc, cc.c.lib), fmtUs(cc.cpu), fmtUs(cc.total)}
		for _, cat := range cpuCategories {
			d := cc.share[cat]
			if d <= 0 {
				row = append(row, "–")
				continue
			}
			row = append(row, fmt.Sprintf("%.0f %%", 100*float64(d)/float64(cc.total)))
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

// writeSingleNode explains the single-node targets from this run's
// floor, command statistics and profiles, then how the fast path came
// about.
func (b *bench) writeSingleNode(w io.Writer) {
	ar := func(lib string, c int) kase { return kase{kind: kindAR, lib: lib, k: 1, conc: c} }
	l, r := ar(libLease, 1), ar(libRedislock, 1)
	fmt.Fprintf(w, "*Single node (K=1).* At c=1 lease does %s Acquire+Release/s against redislock's %s: %s.", fmtRate(b.medRate(l)), fmtRate(b.medRate(r)), b.pairRatio(l, r, rate))
	if fl := (kase{kind: kindRT2, k: 1, conc: 1}); b.get(fl) != nil {
		fmt.Fprintf(w, " Both take the two round trips an Acquire+Release needs; two bare round trips (\"Profiles\" above) do %s/s, so redislock runs at %.0f %% of that floor and lease at %.0f %%.",
			fmtRate(b.medRate(fl)), 100*ratio(b.medRate(r), b.medRate(fl)), 100*ratio(b.medRate(l), b.medRate(fl)))
	}
	lp, ok1 := b.medCmdProfile(l)
	rp, ok2 := b.medCmdProfile(r)
	if ok1 && ok2 {
		fmt.Fprintf(w, " On the server, lease's operation costs %s of Redis CPU against %s: %s in its two scripts against redislock's %s (an Acquire reads the lock, the epoch and the fencing counter, writes the lock and the counter and keeps the counter's expiry, and every round's last script also reads the data marker: %.0f `redis.call`s per operation against redislock's %.0f), and %s against %s reading, parsing and answering the requests (an Acquire's request carries 4 keys and 7 arguments, and lease's replies are nested arrays).",
			fmtUs(lp.redis), fmtUs(rp.redis), fmtUs(usec(lp.cmds["evalsha"].usec)), fmtUs(usec(rp.cmds["evalsha"].usec)),
			lp.innerCalls(), rp.innerCalls(), fmtUs(lp.redis-lp.topLevel()), fmtUs(rp.redis-rp.topLevel()))
	}
	if lc, rc := b.cpuCase(l), b.cpuCase(r); lc != nil && rc != nil {
		fmt.Fprintf(w, " In the client, %s against %s (getrusage); the profile puts %.0f %% of lease's samples in its own code and %.0f %% in go-redis (redislock: %.0f %% in go-redis), the rest in system calls and the Go runtime, as for redislock.",
			fmtUs(lc.cpu), fmtUs(rc.cpu), lc.pct("lease"), lc.pct("go-redis"), rc.pct("go-redis"))
	}
	if l16, r16 := ar(libLease, 16), ar(libRedislock, 16); b.get(l16) != nil && b.get(r16) != nil {
		busy := func(c kase) float64 {
			cpu := stats.MedianOf(b.get(c), countRaw(cntCPUClient)) + stats.MedianOf(b.get(c), countRaw(cntCPURedis))
			return cpu / 1e9 * b.medRate(c)
		}
		fmt.Fprintf(w, " At c=16: %s against %s ops/s, %s; client CPU %s against %s and Redis CPU %s against %s per operation, %.2f against %.2f of the 2 cores busy",
			fmtRate(b.medRate(l16)), fmtRate(b.medRate(r16)), b.pairRatio(l16, r16, rate),
			fmtDur(time.Duration(stats.MedianOf(b.get(l16), countRaw(cntCPUClient)))), fmtDur(time.Duration(stats.MedianOf(b.get(r16), countRaw(cntCPUClient)))),
			fmtDur(time.Duration(stats.MedianOf(b.get(l16), countRaw(cntCPURedis)))), fmtDur(time.Duration(stats.MedianOf(b.get(r16), countRaw(cntCPURedis)))),
			busy(l16), busy(r16))
		if busy(l16) < busy(r16)-0.1 {
			fmt.Fprint(w, ": the lane puts the 16 callers into shared pipelined rounds with one round in flight, so the client's work and Redis's take turns, where redislock's 16 connections keep Redis busy while the client works.")
		} else {
			fmt.Fprint(w, ": both keep the machine about as busy, so what one operation costs in the client and in Redis together decides.")
		}
	}
	fmt.Fprint(w, " What would close the gap, and why it is not done: a lock without the fencing counter, the epoch and the data marker (what redislock is) gives up the guarantees the daemon is built on; a different key layout (lock, counter and epoch in one key) would cut the `redis.call`s but older clients on the same keys would not understand it; several rounds in flight per node on one connection needs a RESP reader of lease's own instead of go-redis.\n\n")
	fmt.Fprint(w, "*How the single-node fast path came about.* Every round used to go to the node's lane goroutine and back (two goroutine switches per round, each waking an idle thread). The lane is what keeps the guarantees: it applies a node's requests in the order they were made (a cleanup can never overtake the request it cleans up after) and lets a caller stop waiting at the per-node timeout while its request stays in order. The fast path (`lease/inline.go`) keeps both: one-key rounds run on the caller's goroutine when nothing is queued, one executor at a time (the lane or one caller), on a connection of its own whose reads and writes end at the per-node timeout, and after a round that failed on its connection, `CLIENT KILL ID` of that connection goes in front of the lane's next round, so that its request is applied before what follows or never (`TestInlineTimeout` and its negative control). In `bench/cmd/perfprobe` (5 alternating runs of the build before and after it, 2026-11-24) lease's client CPU per Acquire+Release fell from a median of 145 to 95 µs and the time per operation from 206 to 157 µs. In `bench/cmd/c16probe` (4 runs, 2026-11-24) two lease clients (two lanes, two rounds in flight) kept 1.45 cores busy instead of 1.25 but spent more per operation (smaller rounds), for between 10 % fewer and 6 % more ops/s; four did no better.\n\n")
}

// usec converts µs as a float to a duration.
func usec(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }

// innerCalls is the number of commands per operation other than the
// script calls themselves: those the scripts made (and any sent
// directly).
func (p cmdProfile) innerCalls() float64 {
	n := 0.0
	for name, o := range p.cmds {
		if name != "evalsha" && name != "eval" && !strings.HasPrefix(name, "script") {
			n += o.calls
		}
	}
	return n
}

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

// writeRedlock explains the Redlock targets at c=1 (K=3 and K=5) from
// this run's CPU and command statistics.
func (b *bench) writeRedlock(w io.Writer) {
	ar := func(lib string, k int) kase { return kase{kind: kindAR, lib: lib, k: k, conc: 1} }
	cpu := func(c kase, n string) time.Duration { return time.Duration(stats.MedianOf(b.get(c), countRaw(n))) }
	for _, k := range []int{3, 5} {
		l, rs, ff := ar(libLease, k), ar(libRedsync, k), ar(libRedsyncFF, k)
		if b.get(l) == nil || b.get(rs) == nil {
			continue
		}
		wall := time.Duration(float64(time.Second) / b.medRate(l))
		busy := float64(cpu(l, cntCPUClient)+cpu(l, cntCPURedis)) / float64(wall)
		fmt.Fprintf(w, "*Redlock, K=%d, c=1.* lease %s against redsync, %s against redsync WithFailFast. One lease Acquire+Release takes %s of client and %s of Redis CPU (all nodes) in %s of wall time on average: %.2f of the 2 cores busy at c=1 (redsync: %s and %s).",
			k, b.pairRatio(l, rs, rate), b.pairRatio(l, ff, rate), fmtUs(cpu(l, cntCPUClient)), fmtUs(cpu(l, cntCPURedis)), fmtUs(wall), busy,
			fmtUs(cpu(rs, cntCPUClient)), fmtUs(cpu(rs, cntCPURedis)))
		lp, ok1 := b.medCmdProfile(l)
		rp, ok2 := b.medCmdProfile(rs)
		if ok1 && ok2 {
			fmt.Fprintf(w, " Of the Redis CPU, %s is lease's scripts (%.1f calls, %s each) against %s in redsync's commands (%s each): the fencing counter, the epoch and the data marker again, now on every node.",
				fmtUs(lp.topLevel()), lp.cmds["evalsha"].calls, fmtUs(usec(lp.cmds["evalsha"].usec/max(lp.cmds["evalsha"].calls, 1))),
				fmtUs(rp.topLevel(direct(libRedsync)...)), fmtUs(rp.topLevel(direct(libRedsync)...)/time.Duration(2*k)))
		}
		if pk := (kase{kind: kindPing, k: k, conc: 1}); b.medP50(pk) > 0 {
			fmt.Fprintf(w, " The p50 target (1.3 × two quorum RTTs = %s) is for a round that costs no more than a PING; here the rounds of the 5 servers and the client share 2 cores, so the nodes a round does not wait for still take CPU from the next round, and lease's p50 is %s.",
				fmtUs(time.Duration(2.6*float64(b.medP50(pk)))), fmtUs(b.medP50(l)))
		}
		if lc, rc := b.cpuCase(l), b.cpuCase(rs); lc != nil && rc != nil {
			fmt.Fprintf(w, " In the client profile, write system calls (one per node and round, and on loopback they include delivering the request to the server) are %.0f %% of lease's samples and %.0f %% of redsync's; lease's own code %.0f %%.",
				lc.pct("write syscalls"), rc.pct("write syscalls"), lc.pct("lease"))
		}
		fmt.Fprint(w, " Deciding at a quorum saves waiting, not work; the one remaining way to cut a round would be a Release that returns before a quorum answered, which Release's contract (an error means the key may still be held) rules out.\n\n")
	}
	e3, r3 := kase{kind: kindExtend, lib: libLease, k: 3, conc: 1}, kase{kind: kindExtend, lib: libRedsync, k: 3, conc: 1}
	if b.get(e3) != nil && b.get(r3) != nil {
		fmt.Fprintf(w, "*Extend, K=3, c=1* (%s redsync): one round for both.", b.pairRatio(e3, r3, rate))
		if lp, ok := b.medCmdProfile(e3); ok {
			if rp, ok := b.medCmdProfile(r3); ok {
				fmt.Fprintf(w, " lease's extend script (compare and PEXPIRE, plus the data marker read) costs %s of Redis time per Extend against redsync's %s.", fmtUs(lp.topLevel()), fmtUs(rp.topLevel()))
			}
		}
		if b.pairRatio(e3, r3, rate).med < 1.3 {
			fmt.Fprint(w, " lease answers at the second of three nodes where redsync waits for all three; with three fast local nodes the third answers almost as soon, so deciding at a quorum gains little, where at K=5 it gains two nodes.")
		}
		fmt.Fprint(w, "\n\n")
	}
}

// tickScriptSplit says, from a batch's command statistics, how much of
// its scripts' time in the servers the commands they call took.
func tickScriptSplit(ps []cmdProfile, floors []floorRun) string {
	p, ok := medianProfile(ps)
	if !ok || p.cmds["evalsha"].usec == 0 {
		return ""
	}
	var fl []cmdProfile
	for _, f := range floors {
		fl = append(fl, f.cmds)
	}
	fp, _ := medianProfile(fl)
	inner := 0.0
	for name, o := range p.cmds {
		if name != "evalsha" && name != "eval" && !strings.HasPrefix(name, "script") {
			inner += o.usec
		}
	}
	return fmt.Sprintf("Per key and all 5 nodes, Redis spent %s of CPU against the floor's %s (\"The 10,000-job tick: Redis's work per key\" above); of the scripts' %s per key in the servers, the commands they call took %s, the rest is the Lua interpreter, the `redis.call` boundary and, on this loaded machine, waits for a core. ",
		fmtUs(p.redis), fmtUs(fp.redis), fmtUs(usec(p.cmds["evalsha"].usec)), fmtUs(usec(inner)))
}
