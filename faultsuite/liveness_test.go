package faultsuite

import (
	"strings"
	"testing"
	"time"
)

// syntheticHistory is a history of job j (every 2 s, 300 ms runs) in which
// every tick in [from, to] ran once to its end, except the ticks in skip.
func syntheticHistory(from, to time.Time, skip ...time.Time) *History {
	h := &History{}
	for _, tick := range Ticks(2*time.Second, from, to) {
		missing := false
		for _, s := range skip {
			missing = missing || s.Equal(tick)
		}
		if missing {
			continue
		}
		start := tick.Add(10 * time.Millisecond)
		h.Runs = append(h.Runs, Run{Job: "j", Tick: tick.Unix(), Host: "h0", Token: tick.Unix(), Start: start,
			Last: start.Add(300 * time.Millisecond), End: start.Add(300 * time.Millisecond)})
	}
	return h
}

// oracleFor is a nemesis over a fleet that runs job j, with faults.
func oracleFor(faults ...Fault) *Nemesis {
	cfg := DefaultConfig()
	cfg.Jobs = []Job{{Name: "j", Every: 2 * time.Second, Sleep: 300 * time.Millisecond}}
	for i := range faults {
		faults[i].N = i + 1
	}
	return &Nemesis{f: &Fleet{cfg: cfg}, Faults: faults}
}

// TestLivenessMinorityFaultIsChecked is the negative control of the
// liveness oracle: a tick missing while a fault left a quorum and a daemon
// up (a minority of servers killed) is reported; the same tick missing
// while a Blocking fault (a quorum of servers killed) held, or within the
// TTL after it, is not.
func TestLivenessMinorityFaultIsChecked(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	from, to := t0, t0.Add(40*time.Second)
	missed := t0.Add(20 * time.Second)
	h := syntheticHistory(from, to, missed)
	fault := Fault{Kind: KillMinority, Start: t0.Add(19 * time.Second), End: t0.Add(22 * time.Second)}

	vs, checked := oracleFor(fault).Liveness(h, from, to)
	if len(vs) != 1 || vs[0].Rule != "missing" || !strings.Contains(vs[0].Msg, "kill-minority") {
		t.Fatalf("a tick missed during a minority fault: got %d violations (%d ticks checked):\n%s", len(vs), checked, FormatViolations(vs))
	}
	t.Logf("the oracle reports, as it must: %s", vs[0])

	fault.Kind, fault.Blocking = KillMajority, true
	if vs, _ := oracleFor(fault).Liveness(h, from, to); len(vs) != 0 {
		t.Fatalf("a tick missed during a fault that took the quorum away is exempt; got:\n%s", FormatViolations(vs))
	}
	// The exemption ends a TTL and a second after the fault.
	late := fault.End.Add(DefaultConfig().TTL + time.Second + 4*time.Second).Truncate(2 * time.Second)
	vs, _ = oracleFor(fault).Liveness(syntheticHistory(from, to, missed, late), from, to)
	if len(vs) != 1 || !strings.Contains(vs[0].Msg, late.UTC().Format(time.RFC3339)) {
		t.Fatalf("a tick missed after the blocking fault's window: got\n%s", FormatViolations(vs))
	}
}

// TestLivenessTakeoverBound: after a daemon is killed, a tick whose
// deadline falls within one TTL and a request timeout of the kill is
// excused (its lease may be held by the dead daemon until then); a tick
// whose deadline is later must have run.
func TestLivenessTakeoverBound(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	from, to := t0, t0.Add(40*time.Second)
	kill := Fault{Kind: KillDaemon, Start: t0.Add(19 * time.Second), End: t0.Add(20 * time.Second)}
	kill.LeaseLost = []time.Time{kill.Start}
	// Tick 18 s (deadline 20 s) is within the bound of 19 s + 2.55 s.
	excused := t0.Add(18 * time.Second)
	if vs, _ := oracleFor(kill).Liveness(syntheticHistory(from, to, excused), from, to); len(vs) != 0 {
		t.Fatalf("a tick whose deadline is within the takeover bound is excused; got:\n%s", FormatViolations(vs))
	}
	// Tick 22 s (deadline 24 s) is past it: another host must run it.
	owed := t0.Add(22 * time.Second)
	vs, _ := oracleFor(kill).Liveness(syntheticHistory(from, to, owed), from, to)
	if len(vs) != 1 || !strings.Contains(vs[0].Msg, "kill-daemon") {
		t.Fatalf("a tick past the takeover bound after a daemon kill must run; got:\n%s", FormatViolations(vs))
	}
}

// TestLivenessElectionStretchesTakeover: on etcd a new leader restarts
// every lease's countdown, so a daemon killed at 19 s may hold its lease
// until an election timeout and the takeover bound (0.5 + 2.55 s) past
// each election that came while the lease was held. For a job that
// waits on overlap (the takeover exemption alone), with an election won
// by 21.4 s the tick of 22 s (deadline 24 s) is excused and the tick of
// 24 s (deadline 26 s, past 24.45 s) owed; a second election by 24.3 s,
// while the stretched lease was held, excuses that one too. Without the
// election, with one after the lease ran out (21.55 s) or before the
// kill, the tick of 22 s is owed. For a job that skips on overlap, the
// tick of 24 s itself falls in the stretched lease and is given up
// (heldAfterLoss); without the election it is owed.
func TestLivenessElectionStretchesTakeover(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	from, to := t0, t0.Add(40*time.Second)
	kill := Fault{Kind: KillDaemon, Start: at(19000), End: at(20000)}
	kill.LeaseLost = []time.Time{kill.Start}
	won := promotion{after: at(21200), by: at(21400)}
	for _, tc := range []struct {
		name    string
		overlap string
		seen    []promotion
		missed  int // ms
		excused bool
	}{
		{"an election while the lease was held", "wait", []promotion{won}, 22000, true},
		{"past the stretched bound", "wait", []promotion{won}, 24000, false},
		{"a second election while the stretched lease was held", "wait", []promotion{won, {after: at(24000), by: at(24300)}}, 24000, true},
		{"no election", "wait", nil, 22000, false},
		{"an election after the lease ran out", "wait", []promotion{{after: at(21600), by: at(21700)}}, 22000, false},
		{"an election before the kill", "wait", []promotion{{after: at(18500), by: at(18900)}}, 22000, false},
		{"overlap skip: the tick in the stretched lease", "skip", []promotion{won}, 24000, true},
		{"overlap skip: no election", "skip", nil, 24000, false},
	} {
		n := oracleFor(kill)
		n.f.cfg.Jobs[0].Overlap = tc.overlap
		n.promotions = &promotionWatch{seen: tc.seen}
		vs, _ := n.Liveness(syntheticHistory(from, to, at(tc.missed)), from, to)
		if tc.excused && len(vs) != 0 {
			t.Errorf("%s: the tick of %d ms is excused; got:\n%s", tc.name, tc.missed, FormatViolations(vs))
		}
		if !tc.excused && (len(vs) != 1 || !strings.Contains(vs[0].Msg, "kill-daemon")) {
			t.Errorf("%s: the tick of %d ms is owed; got:\n%s", tc.name, tc.missed, FormatViolations(vs))
		}
	}
}

// TestLivenessUnservedWindow: a ZooKeeper leader frozen at 19 s whose
// ensemble answered again (another leader) at 23 s took no write in
// between: a tick whose deadline falls from the freeze to the takeover
// bound past 23 s (2.55 s) is excused; a later deadline, or one before
// the freeze, is owed; and the same excused tick is reported when the new
// leader came at once (the negative control of the exemption).
func TestLivenessUnservedWindow(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	from, to := t0, t0.Add(40*time.Second)
	freeze := Fault{Kind: FreezeLeader, Start: t0.Add(19 * time.Second), End: t0.Add(24 * time.Second), Unserved: t0.Add(23 * time.Second)}
	excused := t0.Add(22 * time.Second) // deadline 24 s < 23 s + 2.55 s
	if vs, _ := oracleFor(freeze).Liveness(syntheticHistory(from, to, excused), from, to); len(vs) != 0 {
		t.Fatalf("a tick whose deadline came before the ensemble could serve again is excused; got:\n%s", FormatViolations(vs))
	}
	for _, owed := range []time.Time{t0.Add(24 * time.Second), t0.Add(16 * time.Second)} { // deadlines 26 s, 18 s
		vs, _ := oracleFor(freeze).Liveness(syntheticHistory(from, to, owed), from, to)
		if len(vs) != 1 || !strings.Contains(vs[0].Msg, owed.UTC().Format(time.RFC3339)) {
			t.Fatalf("tick %s, deadline outside the unserved time and its takeover bound, must be reported; got:\n%s",
				owed.UTC().Format(time.RFC3339), FormatViolations(vs))
		}
	}
	prompt := freeze
	prompt.Unserved = prompt.Start.Add(100 * time.Millisecond)
	vs, _ := oracleFor(prompt).Liveness(syntheticHistory(from, to, excused), from, to)
	if len(vs) != 1 || !strings.Contains(vs[0].Msg, "freeze-leader") {
		t.Fatalf("with a prompt election the same tick must run; got:\n%s", FormatViolations(vs))
	}
}

// TestPausedRuleAndExemption: a run whose tick falls between a pause's
// acknowledgement and the resume is a "paused" violation; the paused
// job's missing ticks in that window are not "missing".
func TestPausedRuleAndExemption(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	from, to := t0, t0.Add(40*time.Second)
	pause := Fault{Kind: PausedRestartEmpty, Start: t0.Add(19 * time.Second), End: t0.Add(25 * time.Second),
		Paused: "j", PausedFrom: t0.Add(19 * time.Second), PausedTo: t0.Add(25 * time.Second)}
	// Paused from 19 s to 25 s: ticks 20, 22 and 24 s must not run.
	obeyed := syntheticHistory(from, to, t0.Add(20*time.Second), t0.Add(22*time.Second), t0.Add(24*time.Second))
	n := oracleFor(pause)
	if vs, _ := n.Liveness(obeyed, from, to); len(vs) != 0 {
		t.Fatalf("the paused job's skipped ticks are not missing; got:\n%s", FormatViolations(vs))
	}
	if vs := n.Paused(obeyed); len(vs) != 0 {
		t.Fatalf("no run while paused; got:\n%s", FormatViolations(vs))
	}
	broken := syntheticHistory(from, to, t0.Add(20*time.Second), t0.Add(24*time.Second))
	if vs := n.Paused(broken); len(vs) != 1 || vs[0].Rule != "paused" {
		t.Fatalf("a run of tick 22 s while paused must be reported; got:\n%s", FormatViolations(vs))
	}
}

// TestLivenessOverlapSkipExemptsOnlyWhileOlderRunHolds: a tick of an
// overlap-skip job whose time falls inside a run of an older tick (here a
// takeover of the previous tick, as after a frozen server cut its first
// holder off) is given up by the job's policy and not missing. The same
// tick is missing when the older run ended, or was last seen, before the
// tick's time, when the job waits on overlap, when the run covering the
// tick belongs to another job, or when it started after the tick and its
// own deadline leaves room for a lease won after the tick too. A run that
// started just after the tick, won by its deadline before it, holds it.
func TestLivenessOverlapSkipExemptsOnlyWhileOlderRunHolds(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	from, to := t0, t0.Add(40*time.Second)
	prev, skipped := t0.Add(18*time.Second), t0.Add(20*time.Second)
	withRun := func(r Run) *History {
		h := syntheticHistory(from, to, prev, skipped)
		h.Runs = append(h.Runs, r)
		return h
	}
	// Tick 18 s runs late, from 19.5 s to 21 s (its first holder was cut
	// off before it started the job; a takeover): at 20 s it holds the
	// job's lease.
	takeover := Run{Job: "j", Tick: prev.Unix(), Host: "h1", Token: prev.Unix() + 1, Attempt: 1,
		Start: t0.Add(19500 * time.Millisecond), Last: t0.Add(21 * time.Second), End: t0.Add(21 * time.Second)}
	// A frozen server (not blocking) in the window: ticks must still run,
	// but not necessarily exactly once.
	frozen := func() *Nemesis {
		return oracleFor(Fault{Kind: FreezeLeader, Start: t0.Add(17 * time.Second), End: t0.Add(19 * time.Second)})
	}
	if vs, _ := frozen().Liveness(withRun(takeover), from, to); len(vs) != 0 {
		t.Fatalf("a tick given up while an older tick's run held the lease is exempt; got:\n%s", FormatViolations(vs))
	}
	// Tick 18 s won late, by its deadline (the next tick, 20 s), and its
	// run started just after 20 s: its lease was held at 20 s.
	late := takeover
	late.Start, late.Last, late.End = skipped.Add(15*time.Millisecond), skipped.Add(322*time.Millisecond), skipped.Add(322*time.Millisecond)
	if vs, _ := frozen().Liveness(withRun(late), from, to); len(vs) != 0 {
		t.Fatalf("a tick given up while an older tick won by its deadline held the lease is exempt; got:\n%s", FormatViolations(vs))
	}
	killed := takeover
	killed.End, killed.Last = time.Time{}, skipped.Add(-HeartbeatInterval/2)
	if vs, _ := frozen().Liveness(withRun(killed), from, to); len(vs) != 0 {
		t.Fatalf("a killed older run last seen less than a heartbeat before the tick still holds it; got:\n%s", FormatViolations(vs))
	}

	missing := func(name string, n *Nemesis, h *History) {
		t.Helper()
		vs, checked := n.Liveness(h, from, to)
		if len(vs) != 1 || vs[0].Rule != "missing" || !strings.Contains(vs[0].Msg, skipped.UTC().Format(time.RFC3339)) {
			t.Fatalf("%s: the tick must be missing; got %d violations (%d ticks checked):\n%s", name, len(vs), checked, FormatViolations(vs))
		}
	}
	ended := takeover
	ended.Last, ended.End = skipped.Add(-time.Millisecond), skipped.Add(-time.Millisecond)
	missing("older run ended before the tick", frozen(), withRun(ended))
	gone := killed
	gone.Last = skipped.Add(-2 * HeartbeatInterval)
	missing("older run last seen over a heartbeat before the tick", frozen(), withRun(gone))
	other := takeover
	other.Job = "other"
	h := syntheticHistory(from, to, skipped) // tick 18 s ran on time
	h.Runs = append(h.Runs, other)
	missing("the covering run is another job's", frozen(), h)
	wait := frozen()
	wait.f.cfg.Jobs[0].Overlap = "wait"
	missing("overlap: wait", wait, withRun(takeover))
	// With a deadline past the next tick, a run of tick 18 s that started
	// after 20 s may have won its lease after 20 s, when tick 20 s found
	// it free.
	longer := frozen()
	longer.f.cfg.Jobs[0].Deadline = 3 * time.Second
	missing("older run won after the tick", longer, withRun(late))
}

// TestLivenessHeldAfterLoss: a daemon killed while it ran an older tick
// of an overlap-skip job leaves that lease to run out; a tick of the job
// that came within the takeover bound of the kill found it held and gave
// itself up. The same tick is missing when no older run was cut short by
// the kill, or when the job waits on overlap.
func TestLivenessHeldAfterLoss(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	from, to := t0, t0.Add(40*time.Second)
	kill := Fault{Kind: KillDaemon, Start: t0.Add(19 * time.Second), End: t0.Add(20 * time.Second)}
	kill.LeaseLost = []time.Time{kill.Start}
	// Tick 18 s ran from 18.01 s and was killed at 19 s; tick 20 s (deadline
	// 22 s, past the bound of 19 s + 2.05 s for its own takeover) came
	// while tick 18's lease was still held.
	skipped := t0.Add(20 * time.Second)
	h := syntheticHistory(from, to, t0.Add(18*time.Second), skipped)
	cut := Run{Job: "j", Tick: t0.Add(18 * time.Second).Unix(), Host: "h0", Token: 1, Attempt: 1,
		Start: t0.Add(18010 * time.Millisecond), Last: t0.Add(19050 * time.Millisecond)}
	h.Runs = append(h.Runs, cut)
	if vs, _ := oracleFor(kill).Liveness(h, from, to); len(vs) != 0 {
		t.Fatalf("a tick given up while a killed daemon's older lease ran out is exempt; got:\n%s", FormatViolations(vs))
	}
	noOlder := syntheticHistory(from, to, skipped) // tick 18 ran and ended at 18.31 s
	if vs, _ := oracleFor(kill).Liveness(noOlder, from, to); len(vs) != 1 || vs[0].Rule != "missing" {
		t.Fatalf("with the previous tick run and ended before the kill the tick must run; got:\n%s", FormatViolations(vs))
	}
	// The killed daemon's run of tick 18 left no line (it died before
	// logging it): the previous tick has no run seen to end.
	unlogged := syntheticHistory(from, to, t0.Add(18*time.Second), skipped)
	if vs, _ := oracleFor(kill).Liveness(unlogged, from, to); len(vs) != 0 {
		t.Fatalf("a tick after a kill whose previous tick left no run is exempt; got:\n%s", FormatViolations(vs))
	}
	wait := oracleFor(kill)
	wait.f.cfg.Jobs[0].Overlap = "wait"
	if vs, _ := wait.Liveness(h, from, to); len(vs) != 1 || vs[0].Rule != "missing" {
		t.Fatalf("an overlap-wait job's tick must run; got:\n%s", FormatViolations(vs))
	}
}
