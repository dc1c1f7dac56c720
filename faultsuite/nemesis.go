package faultsuite

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FaultKind names one kind of fault the nemesis applies.
type FaultKind string

// The faults of the nemesis. Every one is bounded in time: it is applied,
// held for a while, and healed before the next one starts.
const (
	// KillMinority SIGKILLs 1 or 2 of the 5 nodes, holds, restarts them
	// (empty, or from their AOF).
	KillMinority FaultKind = "kill-minority"
	// KillMajority SIGKILLs 3 nodes, holds, restarts them.
	KillMajority FaultKind = "kill-majority"
	// RestartEmpty kills and at once restarts 1 or 2 of the nodes without
	// persistence: they come back empty.
	RestartEmpty FaultKind = "restart-empty"
	// RestartAOF kills and at once restarts 1 to 3 of the nodes with
	// appendfsync always: they come back with every acknowledged write.
	RestartAOF FaultKind = "restart-aof"
	// Slow5ms delays every byte between all daemons and one node by 5 ms
	// each way.
	Slow5ms FaultKind = "slow-5ms"
	// Slow50ms delays one node by 50 ms each way (the node then answers
	// later than the per-node timeout).
	Slow50ms FaultKind = "slow-50ms"
	// Partition cuts one daemon's links to a majority (3) of the nodes.
	Partition FaultKind = "partition"
	// Pause SIGSTOPs a daemon (the one running a job, if any) for longer
	// than the TTL (NemesisOptions.MinPause), then SIGCONTs it.
	Pause FaultKind = "pause"
	// KillDaemon SIGKILLs a daemon (the one running a job, if any) and
	// starts it again a moment later.
	KillDaemon FaultKind = "kill-daemon"
	// Skew restarts a daemon with its clock offset by ±0.3..1.5 s
	// (--test-clock-offset), holds, and restarts it with the right clock.
	Skew FaultKind = "skew"
	// Swizzle cuts every daemon-node link one by one in random order,
	// then heals them one by one in another random order.
	Swizzle FaultKind = "swizzle"
	// PauseServers SIGSTOPs a minority of the store's servers (the only
	// one, on a one-server store such as PostgreSQL), holds, SIGCONTs.
	PauseServers FaultKind = "pause-servers"
)

// BaseFaults are the fault kinds of the short fault runs of `make test`
// (TestNemesis, TestBackendNemesis); the others of AllFaults have tests of
// their own (see nemesis_faults.go).
var BaseFaults = []FaultKind{KillMinority, KillMajority, RestartEmpty, RestartAOF, Slow5ms, Slow50ms,
	Partition, Pause, KillDaemon, Skew, Swizzle, PauseServers}

// AllFaults is every fault kind, in the order the nemesis draws them from
// (kinds that do not apply to a fleet are left out; see NewNemesis).
var AllFaults = append(slices.Clone(BaseFaults), FreezeLeader, PausedRestartEmpty, Failback, Escapee, ServerClockStep)

// maxSkew bounds the clock offsets the Skew fault gives a daemon.
const maxSkew = 1500 * time.Millisecond

// Fault is one fault the nemesis applied.
type Fault struct {
	N      int // 1, 2, ... in order
	Kind   FaultKind
	Target string // what it hit, e.g. "nodes 0,3 (0 empty, 3 aof)" or "h1 (running long)"
	Start  time.Time
	End    time.Time // healed
	// LosesData is set when a node without persistence was restarted.
	LosesData bool
	// Blocking is set when the fault took away the quorum of the store's
	// servers or every daemon: the one kind of fault during which ticks
	// may stop (see Nemesis.Liveness).
	Blocking bool
	// LeaseLost lists when the fault made a daemon lose the leases it
	// held (killed, frozen, cut off or stopped): another host takes such
	// a lease over within one TTL (two on PostgreSQL and MySQL) and a
	// request timeout.
	LeaseLost []time.Time
	// Unserved is set when the store took no write from Start until then
	// although a quorum of its servers ran: a ZooKeeper ensemble whose
	// leader the fault killed, froze or restarted, until a server answered
	// as leader again (election.go).
	Unserved time.Time
	// Paused is the job a PausedRestartEmpty fault paused from PausedFrom
	// (acknowledged) to PausedTo (resume asked for).
	Paused               string
	PausedFrom, PausedTo time.Time
}

// String renders the fault on one line.
func (f Fault) String() string {
	return fmt.Sprintf("#%d %s-%s (%s) %s: %s", f.N, fmtT(f.Start), fmtT(f.End),
		f.End.Sub(f.Start).Round(time.Millisecond), f.Kind, f.Target)
}

// NemesisOptions configure a nemesis.
type NemesisOptions struct {
	Seed     uint64        // the schedule is a function of the seed
	Duration time.Duration // no fault starts after Duration
	Kinds    []FaultKind   // the faults to draw from; nil: AllFaults
	// MinGap and MaxGap bound the quiet time between two faults
	// (defaults 1s and 3s).
	MinGap, MaxGap time.Duration
	// Scale multiplies every fault's hold time (default 1).
	Scale float64
	// MinPause is the shortest a Pause fault stops a daemon (default:
	// the fleet's TTL); Scale does not apply to it. A control that needs
	// every pause to end in a takeover sets it above the backend's
	// takeover time.
	MinPause time.Duration
	// After every CalmEvery faults (0: never) the nemesis rests for
	// CalmFor, so that liveness has fault-free windows to be checked in.
	CalmEvery int
	CalmFor   time.Duration
	// Logf, if set, gets a line per fault as it is applied and healed.
	Logf func(format string, args ...any)
}

// Nemesis applies faults to a fleet on a schedule drawn from a seeded
// random source: the kinds, node sets, daemons, hold times, clock offsets,
// link orders and gaps are all drawn the same way for the same seed, so a
// schedule is reproducible by its seed. (Pause and KillDaemon hit the
// daemon running a job when there is one, so their target follows the
// fleet's state; they draw their fallback daemon all the same.)
//
// Faults run one at a time, each held for a bounded time and healed before
// the next. Only the nodes without persistence lose data, and there are
// fewer of them than a quorum; a fault that restarts one of them starts no
// sooner than SafeGap after the previous fault ended, so every tick
// completed on fewer than all nodes has passed its deadline by then. That
// keeps the schedule inside the preconditions of the guarantees (see
// docs/reliability.md): no quorum of nodes loses a completion mark while it
// matters.
//
// Use it from the test's goroutine: the fleet's methods fail the test.
type Nemesis struct {
	f    *Fleet
	opts NemesisOptions
	rng  *rand.Rand
	// SafeGap is the quiet time a data-losing fault waits for after the
	// previous fault: the longest tick deadline, the largest clock skew,
	// the TTL and a second.
	SafeGap time.Duration
	Faults  []Fault
	lastEnd time.Time
	// promotions are the etcd elections seen from the start to the
	// test's end (nil for other stores).
	promotions *promotionWatch
}

// NewNemesis prepares a nemesis for f.
func NewNemesis(f *Fleet, opts NemesisOptions) *Nemesis {
	if len(opts.Kinds) == 0 {
		opts.Kinds = AllFaults
	}
	// A store whose servers all keep their data has nothing to restart
	// empty.
	volatile := false
	for i := range f.Store.Servers {
		volatile = volatile || !f.Store.Durable(i)
	}
	opts.Kinds = slices.DeleteFunc(slices.Clone(opts.Kinds), func(k FaultKind) bool {
		return (k == RestartEmpty && !volatile) || !applies(f, k)
	})
	if opts.MinGap == 0 {
		opts.MinGap = time.Second
	}
	if opts.MaxGap < opts.MinGap {
		opts.MaxGap = opts.MinGap + 2*time.Second
	}
	if opts.Scale == 0 {
		opts.Scale = 1
	}
	cfg := f.Config()
	var deadline time.Duration
	for _, j := range cfg.Jobs {
		d := j.Deadline
		if d == 0 {
			d = j.Every
		}
		deadline = max(deadline, d)
	}
	return &Nemesis{
		f: f, opts: opts,
		rng:        rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x6c65617365)),
		SafeGap:    deadline + maxSkew + cfg.TTL + time.Second,
		promotions: watchPromotions(f),
	}
}

// draw is everything one fault may need from the random source, drawn the
// same way whatever the fault, so a schedule depends on the seed alone.
type draw struct {
	kind     FaultKind
	a, b, c  float64 // uniform in [0,1): counts, hold times, offsets, signs
	nodes    []int   // a permutation of the nodes
	daemon   int
	links    []int // a permutation of the (daemon, node) links: cut order
	heal     []int // another: heal order
	gapAfter time.Duration
}

func (n *Nemesis) next() draw {
	cfg := n.f.Config()
	d := draw{
		kind:   n.opts.Kinds[n.rng.IntN(len(n.opts.Kinds))],
		a:      n.rng.Float64(),
		b:      n.rng.Float64(),
		c:      n.rng.Float64(),
		nodes:  n.rng.Perm(cfg.Nodes),
		daemon: n.rng.IntN(cfg.Daemons),
		links:  n.rng.Perm(cfg.Nodes * cfg.Daemons),
		heal:   n.rng.Perm(cfg.Nodes * cfg.Daemons),
	}
	d.gapAfter = n.opts.MinGap + time.Duration(n.rng.Float64()*float64(n.opts.MaxGap-n.opts.MinGap))
	return d
}

// hold scales a hold time: base + frac*span.
func (n *Nemesis) hold(base, span time.Duration, frac float64) time.Duration {
	return time.Duration(float64(base+time.Duration(frac*float64(span))) * n.opts.Scale)
}

// Run applies faults until opts.Duration has passed since it was called
// and returns them. Every fault is healed when it returns.
func (n *Nemesis) Run() []Fault {
	n.f.t.Helper()
	end := time.Now().Add(n.opts.Duration)
	for time.Now().Before(end) {
		d := n.next()
		if n.losesData(d) {
			if wait := time.Until(n.lastEnd.Add(n.SafeGap)); wait > 0 {
				if time.Now().Add(wait).After(end) {
					break
				}
				time.Sleep(wait)
			}
		}
		ft := n.apply(d)
		ft.N = len(n.Faults) + 1
		n.Faults = append(n.Faults, ft)
		n.lastEnd = ft.End
		if n.opts.Logf != nil {
			n.opts.Logf("nemesis: %s", ft)
		}
		gap := d.gapAfter
		if n.opts.CalmEvery > 0 && len(n.Faults)%n.opts.CalmEvery == 0 {
			gap = max(gap, n.opts.CalmFor)
		}
		if time.Now().Add(gap).After(end) {
			break
		}
		time.Sleep(gap)
	}
	return n.Faults
}

// apply applies fault d, holds it and heals it.
func (n *Nemesis) apply(d draw) Fault {
	f := n.f
	f.t.Helper()
	cfg := f.Config()
	ft := Fault{Kind: d.kind, Start: time.Now()}
	nodes := n.nodesFor(d)
	// A fault on a quorum of the servers stops the store.
	ft.Blocking = len(nodes) >= cfg.Nodes/2+1
	switch d.kind {
	case KillMinority, KillMajority, RestartEmpty, RestartAOF, PauseServers, Slow5ms, Slow50ms:
		n.applyServerFault(d, nodes, &ft)
	case Partition, Pause, KillDaemon, Skew:
		n.applyDaemonFault(d, nodes, &ft)
	case Swizzle:
		n.applySwizzle(d, &ft)
	default:
		if !n.applyMore(d, nodes, &ft) {
			f.t.Fatalf("nemesis: unknown fault %q", d.kind)
		}
	}
	ft.End = time.Now()
	return ft
}

// applyDaemonFault injects a fault on a daemon: cut from nodes,
// SIGSTOP, SIGKILL and restart, or a skewed clock.
func (n *Nemesis) applyDaemonFault(d draw, nodes []int, ft *Fault) {
	f := n.f
	cfg := f.Config()
	switch d.kind {
	case Partition:
		dm, who := n.busyDaemon(d.daemon)
		ft.LeaseLost = []time.Time{ft.Start}
		ft.Blocking = false // the other daemons reach every node
		// Shorter than the daemon's completion retry (5 s), so a run that
		// ends during the partition can still record its completion.
		hold := n.hold(500*time.Millisecond, 4*time.Second, d.b)
		ft.Target = fmt.Sprintf("%s cut from %s for %s", who, n.describeNodes(nodes), hold.Round(time.Millisecond))
		for _, i := range nodes {
			f.Proxy(dm.Index, i).Cut()
		}
		time.Sleep(hold)
		for _, i := range nodes {
			f.Proxy(dm.Index, i).Heal()
		}
	case Pause:
		dm, who := n.busyDaemon(d.daemon)
		hold := cmp.Or(n.opts.MinPause, cfg.TTL) + n.hold(200*time.Millisecond, 1500*time.Millisecond, d.b)
		ft.Target = fmt.Sprintf("%s SIGSTOP for %s", who, hold.Round(time.Millisecond))
		ft.LeaseLost = []time.Time{ft.Start}
		dm.Pause()
		time.Sleep(hold)
		dm.Resume()
	case KillDaemon:
		dm, who := n.busyDaemon(d.daemon)
		hold := n.hold(200*time.Millisecond, 2*time.Second, d.b)
		ft.Target = fmt.Sprintf("%s SIGKILL, restarted after %s", who, hold.Round(time.Millisecond))
		ft.LeaseLost = []time.Time{ft.Start}
		dm.Kill()
		time.Sleep(hold)
		dm.Start()
	case Skew:
		dm := f.Daemons[d.daemon]
		off := (300*time.Millisecond + time.Duration(d.a*float64(maxSkew-300*time.Millisecond))).Round(100 * time.Millisecond)
		if d.c < 0.5 {
			off = -off
		}
		hold := n.hold(4*time.Second, 8*time.Second, d.b)
		ft.Target = fmt.Sprintf("%s clock %+v for %s", dm.Name, off, hold.Round(time.Millisecond))
		orig := dm.Args
		dm.Stop()
		dm.Args = append(append([]string(nil), orig...), "--test-clock-offset="+off.String())
		dm.Start()
		time.Sleep(hold)
		// A stopped daemon's running jobs get the shutdown grace.
		ft.LeaseLost = []time.Time{ft.Start.Add(cfg.ShutdownGrace), time.Now().Add(cfg.ShutdownGrace)}
		dm.Stop()
		dm.Args = orig
		dm.Start()
	}
}

// applySwizzle cuts the links of d one by one, then heals some.
func (n *Nemesis) applySwizzle(d draw, ft *Fault) {
	f := n.f
	cfg := f.Config()
	step := n.hold(50*time.Millisecond, 200*time.Millisecond, d.a)
	nodesN := cfg.Nodes
	link := func(l int) string { return "h" + strconv.Itoa(l/nodesN) + "-" + strconv.Itoa(l%nodesN) }
	var cut, heal []string
	for _, l := range d.links {
		cut = append(cut, link(l))
	}
	for _, l := range d.heal {
		heal = append(heal, link(l))
	}
	ft.Target = fmt.Sprintf("cut every %s: %s; heal: %s", step.Round(time.Millisecond),
		strings.Join(cut, " "), strings.Join(heal, " "))
	ft.Blocking = true // at its peak no daemon reaches any node
	for _, l := range d.links {
		f.Proxy(l/nodesN, l%nodesN).Cut()
		time.Sleep(step)
	}
	for _, l := range d.heal {
		f.Proxy(l/nodesN, l%nodesN).Heal()
		time.Sleep(step)
	}
}
