package main

import (
	"fmt"
	"io"
	"strconv"
)

// writeTickTrace writes the tick-to-start breakdown measured from the
// daemons' logs in this run: the steps after the tick, the split of each
// start into the daemon's part and the process part against the spawn
// floor, and the tick's batch attempts by all daemons.
func (b *bench) writeTickTrace(w io.Writer) {
	d := b.daemon
	tr := d.trace
	switch {
	case d.skipped != "":
		fmt.Fprintf(w, "*Where the tick-to-start time goes* was not measured: %s.\n\n", d.skipped)
		return
	case tr.note != "":
		fmt.Fprintf(w, "*Where the tick-to-start time goes* was not measured: %s.\n\n", tr.note)
		return
	case len(tr.steps) == 0:
		fmt.Fprint(w, "*Where the tick-to-start time goes* was not measured in this run (no daemon trace).\n\n")
		return
	}
	fmt.Fprintf(w, "*Where the tick-to-start time goes* (the same run: %d daemons × %d jobs, from the daemons' JSON debug logs and the jobs' own time stamps; each step on the daemon that ran the job). "+
		"The daemons log at debug level in JSON for the trace, so this run's tick-to-start p50 and p99 are measured with it: every log line is a synchronous write by the daemon, and those writes compete with the job starts for the machine's cores.\n\n", d.daemons, d.jobs)
	t := mdTable{head: []string{"step", "p50 after the tick", "p99 after the tick", "n"}}
	for _, s := range tr.steps {
		t.add(s.name, fmtDur(s.p50), fmtDur(s.p99), strconv.Itoa(s.n))
	}
	t.write(w)
	fl, fl50 := d.floorFor(daemonJobs), d.floorP50For(daemonJobs)
	dp, pp := tr.daemonPart, tr.procPart
	if dp.n > 0 {
		fmt.Fprintf(w, "Per start, the daemon's part (tick → %q) is p50 %s, p99 %s; the process part (%q → the job's first instruction: the hand-off to a supervisor, its fork and exec of the job, the job's start-up) is p50 %s, p99 %s",
			msgStarting, fmtDur(dp.p50), fmtDur(dp.p99), msgStarting, fmtDur(pp.p50), fmtDur(pp.p99))
		if fl > 0 {
			fmt.Fprintf(w, ", against the spawn floor of %d processes at once with no daemon of p50 %s, p99 %s (process part / floor at p99: %.2f×)", daemonJobs, fmtDur(fl50), fmtDur(fl), float64(pp.p99)/float64(fl))
		}
		fmt.Fprint(w, ". ")
		if h := tr.handoff; h.n > 0 {
			fmt.Fprintf(w, "%q is logged p50 %s, p99 %s after %q (once the supervisor reports the job's pid, which can be after the job's first instruction). ", msgStarted, fmtDur(h.p50), fmtDur(h.p99), msgStarting)
		}
		fmt.Fprintf(w, "The daemon's part is a median %.0f %% of its start's tick-to-start time", 100*tr.daemonShare)
		if d.p99 > 0 {
			fmt.Fprintf(w, "; its p99 is %s, the tick-to-start p99 %s (p99s do not add, so their ratio is no share)", fmtDur(dp.p99), fmtDur(d.p99))
		}
		fmt.Fprint(w, ". ")
	}
	winners := 0 // the batches with a win at a typical tick
	for _, r := range tr.batches {
		if r.won > 0 {
			winners = r.order
		}
	}
	if winners > 1 {
		fmt.Fprintf(w, "At a typical tick %d batches win jobs (the ranking spreads the tick's jobs over the daemons, so they start them at the same time), the last decided p50 %s after the tick. ",
			winners, fmtDur(tr.batches[winners-1].p50))
	}
	if n := tr.daemonPart.n; n > 0 && tr.losers.n > 0 {
		fmt.Fprintf(w, "The other candidates' looks at the tick (%d batches that won nothing: their jobs were taken) were decided p50 %s, p99 %s after it; in %d of %d starts such a batch of another daemon was in its round (between %q and %q) while the job was being started (between %q and its first instruction).",
			tr.losers.n, fmtDur(tr.losers.p50), fmtDur(tr.losers.p99), tr.overlapped, n, msgTrying, msgDecided, msgStarting)
	}
	fmt.Fprint(w, "\n\n")
	if len(tr.batches) > 0 {
		bt := mdTable{head: []string{"the tick's batches, all daemons, in the order decided", "p50 after the tick", "p99 after the tick", "jobs tried (median)", "won (median)", "ticks"}}
		for _, r := range tr.batches {
			bt.add(ordinal(r.order), fmtDur(r.p50), fmtDur(r.p99), strconv.Itoa(r.jobs), strconv.Itoa(r.won), strconv.Itoa(r.ticks))
		}
		bt.write(w)
	}
}

// roundText is the lease round's time from the trace for the findings:
// " (p50 X, p99 Y from "trying the tick" to "tick decided" for the
// batches that won a job, in this run's trace)", or "" without rounds.
func roundText(r traceStep) string {
	if r.n == 0 {
		return ""
	}
	return fmt.Sprintf(" (p50 %s, p99 %s from %q to %q over the %d batches that won a job, in this run's trace)", fmtDur(r.p50), fmtDur(r.p99), msgTrying, msgDecided, r.n)
}

// ordinal is 1st, 2nd, 3rd, 4th, ...
func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}
