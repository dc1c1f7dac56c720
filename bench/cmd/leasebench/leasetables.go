package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/leasecron/leasecron/bench/internal/stats"
)

// leftFor sums the lock keys left by lib over all its runs.
func (b *bench) leftFor(lib string) (left, runs int) {
	for _, c := range cases() {
		if c.lib != lib {
			continue
		}
		ss := b.get(c)
		runs += len(ss)
		left += stats.SumCount(ss, cntLeft)
	}
	return left, runs
}

// latRow is a table row of case c: its lead cells, then ops/s, latency
// percentiles and spread.
func (b *bench) latRow(c kase, lead ...string) []string {
	ss := b.get(c)
	row := append([]string{}, lead...)
	return append(row,
		fmtRate(stats.MedianOf(ss, rate)),
		fmtDur(stats.MedianDur(ss, p50)), fmtDur(stats.MedianDur(ss, p90)), fmtDur(stats.MedianDur(ss, p99)),
		fmt.Sprintf("%.0f%%", 100*stats.Spread(ss, rate)))
}

func (b *bench) writeLeaseTables(w io.Writer) {
	fmt.Fprintf(w, "## Quorum RTT floor\n\nPING to all K nodes in parallel, time until a quorum answered.\n\n")
	t := mdTable{head: []string{"K", "c", "rounds/s", "p50", "p90", "p99", "spread"}}
	for _, k := range []int{1, 3, 5} {
		for _, c := range []int{1, 16} {
			kc := kase{kind: kindPing, k: k, conc: c}
			if b.get(kc) != nil {
				t.add(b.latRow(kc, fmt.Sprint(k), fmt.Sprint(c))...)
			}
		}
	}
	t.write(w)

	for _, kind := range []string{kindAR, kindExtend} {
		title := "Acquire + Release"
		if kind == kindExtend {
			title = "Extend"
		}
		fmt.Fprintf(w, "## %s\n\n", title)
		t := mdTable{head: []string{"K", "c", "library", "ops/s", "p50", "p90", "p99", "spread", "vs redsync", "errors", "client CPU/op", "Redis CPU/op"}}
		for _, k := range []int{1, 3, 5} {
			for _, c := range []int{1, 16} {
				rs := b.medRate(kase{kind: kind, lib: libRedsync, k: k, conc: c})
				for _, lib := range libsFor(k) {
					kc := kase{kind: kind, lib: lib, k: k, conc: c}
					ss := b.get(kc)
					if ss == nil {
						continue
					}
					row := b.latRow(kc, fmt.Sprint(k), fmt.Sprint(c), lib)
					row = append(row, fmt.Sprintf("%.2f×", ratio(stats.MedianOf(ss, rate), rs)), fmt.Sprint(sumErr(ss)),
						fmtDur(time.Duration(stats.MedianOf(ss, countRaw(cntCPUClient)))), fmtDur(time.Duration(stats.MedianOf(ss, countRaw(cntCPURedis)))))
					t.add(row...)
				}
			}
		}
		t.write(w)
	}

	fmt.Fprintf(w, "## Contention: 16 clients, one key\n\nEach client loops: one attempt, release at once when won. Latency is that of one attempt.\n\n")
	t = mdTable{head: []string{"K", "slow node", "library", "wins/s", "refused/s", "errors/s", "attempt p50", "attempt p99", "vs redsync (wins)"}}
	for _, kd := range []struct {
		k int
		d time.Duration
	}{{1, 0}, {3, 0}, {5, 0}, {5, 5 * time.Millisecond}} {
		rs := stats.MedianOf(b.get(kase{kind: kindContend, lib: libRedsync, k: kd.k, conc: contenders, delay: kd.d}), count(cntWins))
		for _, lib := range libsFor(kd.k) {
			ss := b.get(kase{kind: kindContend, lib: lib, k: kd.k, conc: contenders, delay: kd.d})
			if ss == nil {
				continue
			}
			slow := "–"
			if kd.d > 0 {
				slow = "+" + kd.d.String()
			}
			wins := stats.MedianOf(ss, count(cntWins))
			t.add(fmt.Sprint(kd.k), slow, lib, fmtRate(wins), fmtRate(stats.MedianOf(ss, count(cntRefused))), fmtRate(stats.MedianOf(ss, errRate)),
				fmtDur(stats.MedianDur(ss, p50)), fmtDur(stats.MedianDur(ss, p99)), fmt.Sprintf("%.2f×", ratio(wins, rs)))
		}
	}
	t.write(w)

	fmt.Fprintf(w, "## One slow node (Acquire + Release)\n\nThe last of the K nodes is slowed by the proxy. \"quorum RTT\" is the floor measured the same way (PING all K, wait for a quorum); \"slowed node RTT\" is a PING to the slow node alone.\n\n")
	t = mdTable{head: []string{"K", "slow node", "c", "library", "ops/s", "p50", "p90", "p99", "spread", "p50 / (2 × quorum RTT)"}}
	for _, k := range []int{3, 5} {
		for _, d := range slowDelays {
			srt := kase{kind: kindSlowRTT, k: k, conc: 1, delay: d}
			if b.get(srt) != nil {
				t.add(append(b.latRow(srt, fmt.Sprint(k), "+"+d.String(), "1", "slowed node RTT"), "–")...)
			}
			for _, c := range []int{1, 16} {
				pk := kase{kind: kindPing, k: k, conc: c, delay: d}
				q := b.medP50(pk)
				if b.get(pk) != nil {
					row := b.latRow(pk, fmt.Sprint(k), "+"+d.String(), fmt.Sprint(c), "quorum RTT")
					row[4], row[8] = "–", "–" // each round waits for the slow PING before the next: no rate
					t.add(append(row, "0.50×")...)
				}
				for _, lib := range libsFor(k) {
					kc := kase{kind: kindAR, lib: lib, k: k, conc: c, delay: d}
					if b.get(kc) == nil {
						continue
					}
					row := b.latRow(kc, fmt.Sprint(k), "+"+d.String(), fmt.Sprint(c), lib)
					r := "–"
					if q > 0 {
						r = fmt.Sprintf("%.2f×", float64(b.medP50(kc))/float64(2*q))
					}
					t.add(append(row, r)...)
				}
			}
		}
	}
	t.write(w)

	fmt.Fprintf(w, "## Keys left behind\n\nLock keys still on any node after every lock was released (counted after each run, summed over all runs of the library, with and without a slow node). leasecron also keeps one `{key}:fence` counter per key and node **by design** (the fencing tokens must keep increasing across holders); those are not lock keys and are listed separately.\n\n")
	t = mdTable{head: []string{"library", "runs", "operations", "lock keys left", "where", "fence counters kept"}}
	for _, lib := range []string{libLease, libLeaseNoFence, libRedsync, libRedsyncFF, libRedislock} {
		runs, ops, left, fences := 0, 0, 0, 0
		var where []string
		for _, c := range cases() {
			if c.lib != lib {
				continue
			}
			ss := b.get(c)
			runs += len(ss)
			ops += stats.SumCount(ss, cntOps)
			l := stats.SumCount(ss, cntLeft)
			left += l
			fences += stats.SumCount(ss, cntFences)
			if l > 0 {
				where = append(where, fmt.Sprintf("%s: %d", strings.TrimSuffix(c.id(), "/"+lib), l))
			}
		}
		if runs == 0 {
			continue
		}
		ws := "–"
		if len(where) > 0 {
			ws = strings.Join(where, "; ")
		}
		t.add(lib, fmt.Sprint(runs), fmt.Sprint(ops), fmt.Sprint(left), ws, fmt.Sprint(fences))
	}
	t.write(w)
}

func sumErr(ss []stats.Summary) int {
	n := 0
	for _, s := range ss {
		n += s.Errors
	}
	return n
}
