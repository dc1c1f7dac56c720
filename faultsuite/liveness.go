package faultsuite

import (
	"fmt"
	"strings"
	"time"
)

// The liveness oracle of a fault run. Ticks must keep running while a
// quorum of the store's servers and one daemon are up: the only windows
// it exempts are those of Blocking faults (a quorum of servers killed,
// frozen, slowed past the timeout or restarted at once, or every link
// cut), each stretched by the TTL and a second, in which restarted nodes
// do not vote yet and leases of hosts cut off run out; after a daemon
// lost its leases (killed, frozen, cut off from a quorum, stopped), the
// ticks whose deadline falls within one TTL and a request timeout of that
// moment, the longest another host must wait to take a lease over (on
// etcd, past every election that came meanwhile too: heldUntil); and,
// after a fault took a ZooKeeper ensemble's leader, the ticks whose
// deadline falls between the fault and that takeover bound past the
// moment a server answered as leader again (measured: election.go).
// (The ticks of a job the nemesis paused, from one period before the
// pause to a second after the resume, are not expected to run either:
// Paused checks they did not. Nor is a tick of an overlap-skip job whose
// time falls while a run of an older tick of the same job held its lease,
// a takeover's included (a run that started late holds it from its
// deadline at the latest): overlap: skip gives the tick up; heldByOlder.) Every other tick, faults or not, must have run;
// a tick no fault touched at all (nor the settle time after one) must
// have run exactly once, to its end. docs/reliability.md states the rule.

// settle is how long after a Blocking fault ticks are still exempt: the
// TTL in which restarted nodes do not vote and leases of cut-off hosts
// run out, and a second for the next attempt.
func (n *Nemesis) settle() time.Duration { return n.f.Config().TTL + time.Second }

// heldRecheck is how often a daemon that found a tick's lease held asks
// again (the scheduler's heldRecheck): a takeover lands at most that long
// after the lease ran out.
const heldRecheck = 500 * time.Millisecond

// takeover is the longest another host waits to take over a lease whose
// holder lost it: the lease's TTL, one recheck of the followers and one
// request timeout — and on PostgreSQL and MySQL one TTL more: a contender
// takes a row over only once it has seen the holder's last renewal
// unchanged for a TTL on its own clock, and it first sees it when the
// server says the row expired (docs/backends.md, PostgreSQL).
func (n *Nemesis) takeover() time.Duration {
	cfg := n.f.Config()
	ttls := time.Duration(1)
	if cfg.Backend == "postgres" || cfg.Backend == "mysql" {
		ttls = 2
	}
	return ttls*cfg.TTL + heldRecheck + cfg.Timeout
}

// Quiet reports whether no fault at all (nor the settle time after it)
// touched [from, to].
func (n *Nemesis) Quiet(from, to time.Time) bool {
	for _, ft := range n.Faults {
		if ft.Start.Before(to) && from.Before(ft.End.Add(n.settle())) {
			return false
		}
	}
	return true
}

// exempt returns the fault that excuses a tick whose window is [from, to]
// and whose deadline is at deadline from having run, or nil: a Blocking
// fault touching the window (stretched by the settle time), a lease lost
// within the takeover bound before the deadline, or a deadline between
// the start of a fault after which the store took no write and the
// takeover bound past the moment it took writes again (Unserved).
func (n *Nemesis) exempt(from, to, deadline time.Time) *Fault {
	for i, ft := range n.Faults {
		if ft.Blocking && ft.Start.Before(to) && from.Before(ft.End.Add(n.settle())) {
			return &n.Faults[i]
		}
		if !ft.Unserved.IsZero() && !deadline.Before(ft.Start) && deadline.Before(ft.Unserved.Add(n.takeover())) {
			return &n.Faults[i]
		}
		for _, lost := range ft.LeaseLost {
			if !deadline.Before(lost) && deadline.Before(n.heldUntil(lost)) {
				return &n.Faults[i]
			}
		}
	}
	return nil
}

// pausedAt reports whether a fault paused job j around tick: from one
// period before the pause was acknowledged (the pause was asked for in
// between) to a second after the resume was asked for.
func (n *Nemesis) pausedAt(j Job, tick time.Time) bool {
	for _, ft := range n.Faults {
		if ft.Paused == j.Name && tick.After(ft.PausedFrom.Add(-j.Every)) && tick.Before(ft.PausedTo.Add(time.Second)) {
			return true
		}
	}
	return false
}

// heldByOlder reports whether job j gives tick up by its overlap policy:
// j skips on overlap (the default) and at the tick's time a run of an
// older tick of j held j's lease — from when it was won to the run's end
// or, for a run that did not end, its last sign of life plus one
// heartbeat — so the tick was tried while the older tick held it. A run
// holds its lease from before its start, and a lease is won no later
// than its tick's deadline (a lease won after it starts no run): a run
// that started after the tick's time, late, still held the lease at that
// time when its own deadline had passed by then. A run that ended before
// the tick, or one of the tick itself, exempts nothing.
func heldByOlder(h *History, j Job, tick time.Time) bool {
	if j.Overlap != "" && j.Overlap != "skip" {
		return false
	}
	deadline := j.Deadline
	if deadline == 0 {
		deadline = j.Every
	}
	for _, r := range h.Job(j.Name) {
		if r.Tick >= tick.Unix() || !tick.Before(r.Until()) {
			continue
		}
		won := r.Start
		if d := time.Unix(r.Tick, 0).Add(deadline); d.Before(won) {
			won = d
		}
		if !tick.Before(won) {
			return true
		}
	}
	return false
}

// heldAfterLoss reports whether job j gave tick up by its overlap policy
// because a lease a fault made a daemon lose was still held for an older
// tick: j skips on overlap, the tick came within the takeover bound after
// the loss (the lease, left to run out, is held until then as far as the
// other hosts can tell: on PostgreSQL and MySQL up to two TTLs), and an
// older tick of j was still on its way then — a run of it not over before
// the loss (it may have started a moment after: a paused daemon's
// supervisor still starts the job it was handed), or no run of the
// previous tick seen to end before the tick (its run, if any, died
// unlogged with its daemon).
func (n *Nemesis) heldAfterLoss(h *History, j Job, tick time.Time) bool {
	if j.Overlap != "" && j.Overlap != "skip" {
		return false
	}
	for _, ft := range n.Faults {
		for _, lost := range ft.LeaseLost {
			if tick.Before(lost) || !tick.Before(n.heldUntil(lost)) {
				continue
			}
			prevEnded := false
			prev := tick.Add(-j.Every).Unix()
			for _, r := range h.Job(j.Name) {
				if r.Tick < tick.Unix() && r.Start.Before(tick) && !r.Until().Before(lost) {
					return true
				}
				if r.Tick == prev && r.Ended() && r.End.Before(tick) {
					prevEnded = true
				}
			}
			if !prevEnded {
				return true
			}
		}
	}
	return false
}

// touching names the faults that touched [from, to] ("" for none).
func (n *Nemesis) touching(from, to time.Time) string {
	var names []string
	for _, ft := range n.Faults {
		if ft.Start.Before(to) && from.Before(ft.End.Add(n.settle())) {
			names = append(names, fmt.Sprintf("#%d %s", ft.N, ft.Kind))
		}
	}
	return strings.Join(names, ", ")
}

// Liveness checks every tick of every job whose window — from one period
// before the tick to its deadline plus the job's run time — lies in
// [from, to]: a tick no exempting fault nor its job's overlap policy
// excuses (see the rule above) must
// have run, and one no fault touched must have run exactly once, to its
// end. It returns the violations and how many ticks it checked.
func (n *Nemesis) Liveness(h *History, from, to time.Time) ([]Violation, int) {
	var vs []Violation
	checked := 0
	for _, j := range n.f.Config().Jobs {
		deadline := j.Deadline
		if deadline == 0 {
			deadline = j.Every
		}
		for _, tick := range Ticks(j.Every, from.Add(j.Every), to) {
			wFrom, wTo := tick.Add(-j.Every), tick.Add(deadline+j.Sleep)
			if wTo.After(to) || n.exempt(wFrom, wTo, tick.Add(deadline)) != nil || n.pausedAt(j, tick) || heldByOlder(h, j, tick) || n.heldAfterLoss(h, j, tick) {
				continue
			}
			checked++
			at := tick.UTC().Format(time.RFC3339)
			during := "in a quiet window"
			faults := n.touching(wFrom, wTo)
			if faults != "" {
				during = "during fault " + faults + " (a quorum and a daemon up)"
			}
			switch rs := h.Tick(j.Name, tick.Unix()); {
			case len(rs) == 0:
				vs = append(vs, Violation{Rule: "missing", Msg: fmt.Sprintf("tick %s of %s, %s, never ran", at, j.Name, during)})
			case faults == "" && (len(rs) > 1 || !rs[0].Ended()):
				vs = append(vs, Violation{Rule: "once", Msg: fmt.Sprintf("tick %s of %s, %s, did not run exactly once to its end",
					at, j.Name, during), Runs: rs})
			}
		}
	}
	return vs, checked
}
