package faultsuite

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// The fault kinds beyond BaseFaults: each reproduces a way the store or a
// job can betray the daemon, and has a test of its own on every backend it
// applies to (nemesis_faults_test.go).
const (
	// FreezeLeader SIGSTOPs the leader of the store's ensemble (etcd,
	// ZooKeeper) or one Redis node for longer than the TTL, then SIGCONTs
	// it. A quorum stays up, so ticks must go on within one TTL: a client
	// must not sit on an established connection to the frozen server.
	FreezeLeader FaultKind = "freeze-leader"
	// PausedRestartEmpty pauses a job (leasecron pause), restarts the
	// Redis nodes without persistence (fewer than a quorum) empty, holds
	// past their restart guard and resumes the job: no run of the paused
	// job may start while it is paused.
	PausedRestartEmpty FaultKind = "paused-restart-empty"
	// Failback makes Redis nodes without persistence (up to a quorum)
	// fail back from their former replicas: a fresh node replicates X and
	// is promoted, writes go on to X for a while, then X replicates the
	// promoted node (a full sync: its older copy) and is promoted again.
	// X keeps its process, run_id and the daemons' open connections.
	Failback FaultKind = "failback"
	// Escapee SIGKILLs the supervisor of a running job whose command put
	// a child in a session of its own (setsid): everything the job
	// started must be dead before another host can take its lease.
	Escapee FaultKind = "setsid-escapee"
	// ServerClockStep steps the PostgreSQL server's wall clock forward
	// (clock_timestamp() and now()) for a while, then back: a lease's
	// validity must not depend on the server's wall clock.
	ServerClockStep FaultKind = "server-clock-step"
)

// applies reports whether fault kind k can be applied to fleet f.
func applies(f *Fleet, k FaultKind) bool {
	cfg := f.Config()
	switch k {
	case FreezeLeader:
		return cfg.Nodes >= 3
	case PausedRestartEmpty, Failback:
		return f.Redis != nil && cfg.AOFNodes < cfg.Nodes && len(cfg.Jobs) > 0
	case Escapee:
		return escapeeJob(cfg) != ""
	case ServerClockStep:
		return f.Store.ClockStep != nil
	}
	return true
}

// escapeeJob returns the first job whose command leaves an escapee.
func escapeeJob(cfg Config) string {
	for _, j := range cfg.Jobs {
		if j.Escapee > 0 {
			return j.Name
		}
	}
	return ""
}

// applyMore applies the fault kinds of this file; it reports false for
// an unknown kind.
func (n *Nemesis) applyMore(d draw, nodes []int, ft *Fault) bool {
	f := n.f
	f.t.Helper()
	cfg := f.Config()
	switch d.kind {
	case FreezeLeader:
		n.freezeLeader(d, nodes, ft)
	case PausedRestartEmpty:
		job := cfg.Jobs[0].Name
		hold := cfg.TTL + n.hold(time.Second, 2*time.Second, d.b)
		f.MustCLI("pause", job, "--reason", "nemesis")
		ft.Paused, ft.PausedFrom = job, time.Now()
		for _, i := range nodes {
			f.Store.Servers[i].Kill()
			f.Store.Servers[i].Restart()
		}
		ft.Target = fmt.Sprintf("%s paused; %s restarted empty; resumed after %s", job, n.describeNodes(nodes), hold.Round(time.Millisecond))
		time.Sleep(hold)
		ft.PausedTo = time.Now()
		f.MustCLI("resume", job)
		ft.LosesData, ft.Blocking = true, false
	case Failback:
		n.failback(d, nodes, ft)
	case Escapee:
		ft.Target = n.killSupervisor(escapeeJob(cfg))
		ft.LeaseLost = []time.Time{ft.Start}
		ft.Blocking = false
	case ServerClockStep:
		// Up to the TTL and more: with a step of the TTL every lease the
		// server counts by its wall clock looks expired at once.
		step := cfg.TTL/2 + time.Duration(d.a*float64(cfg.TTL)).Round(100*time.Millisecond)
		hold := n.hold(2*time.Second, 3*time.Second, d.b)
		busy := n.waitRun(longestJob(cfg))
		ft.Start = time.Now()
		ft.Target = fmt.Sprintf("server clock %+v for %s, %s", step, hold.Round(time.Millisecond), busy)
		f.Store.ClockStep(step)
		time.Sleep(hold)
		f.Store.ClockStep(0)
		ft.Blocking = false
	default:
		return false
	}
	return true
}

// applyServerFault injects a fault on the store's servers nodes: kill
// and restart, restart at once, SIGSTOP, or a slow link.
func (n *Nemesis) applyServerFault(d draw, nodes []int, ft *Fault) {
	f := n.f
	switch d.kind {
	case KillMinority, KillMajority:
		hold := n.hold(time.Second, 4*time.Second, d.b)
		if d.kind == KillMajority {
			hold = n.hold(time.Second, 3*time.Second, d.b)
		}
		ft.Target = fmt.Sprintf("%s down for %s", n.describeNodes(nodes), hold.Round(time.Millisecond))
		n.takeServers(nodes, ft, hold, Server.Kill, Server.Restart)
		ft.LosesData = n.losesData(d)
	case RestartEmpty, RestartAOF:
		ft.Target = n.describeNodes(nodes) + " restarted at once"
		n.takeServers(nodes, ft, 0, Server.Kill, Server.Restart)
		ft.LosesData = n.losesData(d)
	case PauseServers:
		hold := n.hold(500*time.Millisecond, 3*time.Second, d.b)
		ft.Target = fmt.Sprintf("%s SIGSTOP for %s", n.describeNodes(nodes), hold.Round(time.Millisecond))
		n.takeServers(nodes, ft, hold, Server.Pause, Server.Resume)
	case Slow5ms, Slow50ms:
		delay := 5 * time.Millisecond
		if d.kind == Slow50ms {
			delay = 50 * time.Millisecond
		}
		hold := n.hold(2*time.Second, 6*time.Second, d.b)
		ft.Target = fmt.Sprintf("node %d +%s each way for %s", nodes[0], delay, hold.Round(time.Millisecond))
		for di := range f.Daemons {
			f.Proxy(di, nodes[0]).SetDelay(delay)
		}
		time.Sleep(hold)
		for di := range f.Daemons {
			f.Proxy(di, nodes[0]).SetDelay(0)
		}
	}
}

// takeServers applies take to the servers nodes, holds the fault for
// hold, applies heal to them, and measures the election when they held
// the ZooKeeper leader (election.go).
func (n *Nemesis) takeServers(nodes []int, ft *Fault, hold time.Duration, take, heal func(Server)) {
	lost := n.leaderIn(nodes, ft)
	for _, i := range nodes {
		take(n.f.Store.Servers[i])
	}
	w := n.watchElection(lost)
	time.Sleep(hold)
	for _, i := range nodes {
		heal(n.f.Store.Servers[i])
	}
	w.wait(ft)
}

// freezeLeader freezes (SIGSTOP) the store's leader, or the first of
// nodes when the store has none, for a TTL and more.
func (n *Nemesis) freezeLeader(d draw, nodes []int, ft *Fault) {
	f := n.f
	cfg := f.Config()
	i, who := nodes[0], "node"
	if l := n.leader(); l >= 0 {
		i, who = l, "leader"
	}
	hold := cfg.TTL + n.hold(500*time.Millisecond, 2*time.Second, d.b)
	ft.Target = fmt.Sprintf("%s %d SIGSTOP for %s", who, i, hold.Round(time.Millisecond))
	ft.Blocking = false
	ft.Start = time.Now() // finding the leader may take a while
	if who == "leader" && f.Store.Backend == "zookeeper" {
		// A ZooKeeper ensemble serves no write until its followers
		// give the frozen leader up (syncLimit × tickTime, 2 s in
		// zktest) and elect another: no lease is renewed or released
		// meanwhile, so every daemon loses the leases it held (a
		// renewal, a release, a completion) at the freeze. etcd
		// renews its leases on a leader change and Redis has none.
		ft.LeaseLost = []time.Time{ft.Start}
	}
	f.Store.Servers[i].Pause()
	w := n.watchElection(who == "leader" && f.Store.Backend == "zookeeper")
	time.Sleep(hold)
	f.Store.Servers[i].Resume()
	w.wait(ft)
}

// failback promotes a replica of each of nodes, then fails back to the
// original nodes while the longest job runs (Redis).
func (n *Nemesis) failback(d draw, nodes []int, ft *Fault) {
	f := n.f
	cfg := f.Config()
	hold := cfg.TTL + n.hold(500*time.Millisecond, 2*time.Second, d.b)
	replicas := make([]*redistest.Node, len(nodes))
	for k, i := range nodes {
		replicas[k] = redistest.Start(f.t, 1).Nodes[0]
		replicas[k].ReplicaOf(f.Redis.Nodes[i])
		replicas[k].Promote()
	}
	time.Sleep(hold)
	// Fail back while the longest job runs and the other hosts follow
	// its tick: they ask the failed-back nodes for its lease.
	busy := n.waitRun(longestJob(cfg))
	for k, i := range nodes {
		f.Redis.Nodes[i].ReplicaOf(replicas[k])
		f.Redis.Nodes[i].Promote()
		replicas[k].Kill()
	}
	ft.Target = fmt.Sprintf("%s failed back from replicas promoted %s before, %s", n.describeNodes(nodes), hold.Round(time.Millisecond), busy)
	ft.LosesData = true
}

// longestJob returns the name of the job that runs longest.
func longestJob(cfg Config) string {
	var best Job
	for _, j := range cfg.Jobs {
		if j.Sleep > best.Sleep {
			best = j
		}
	}
	return best.Name
}

// liveRun waits (up to two periods of the job and 2 s) for a run of job
// that is alive and started less than 300 ms ago, so it has a while to go.
func (n *Nemesis) liveRun(job string) (Run, bool) {
	f := n.f
	var every time.Duration
	for _, j := range f.Config().Jobs {
		if j.Name == job {
			every = j.Every
		}
	}
	end := time.Now().Add(2*every + 2*time.Second)
	for time.Now().Before(end) {
		for _, r := range f.History().Job(job) {
			if !r.Ended() && time.Since(r.Last) < 200*time.Millisecond && time.Since(r.Start) < 300*time.Millisecond {
				return r, true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return Run{}, false
}

// waitRun is liveRun, described for a fault's target.
func (n *Nemesis) waitRun(job string) string {
	r, ok := n.liveRun(job)
	if !ok {
		return "no run of " + job + " found"
	}
	return fmt.Sprintf("%s tick %s running on %s", job, time.Unix(r.Tick, 0).UTC().Format("15:04:05"), r.Host)
}

// killSupervisor waits for a fresh run of job, SIGKILLs its supervisor
// (the parent of the job's process: the daemon's own executable, not the
// daemon) and describes what it did.
func (n *Nemesis) killSupervisor(job string) string {
	f := n.f
	r, ok := n.liveRun(job)
	if !ok {
		return "no running " + job + " found"
	}
	sup := parentPID(r.PID)
	d := f.Daemon(r.Host)
	if sup <= 1 || d == nil || sup == d.PID() || !f.runsLeasecron(sup) {
		return fmt.Sprintf("no supervisor found for %s (parent %d)", r, sup)
	}
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		return fmt.Sprintf("supervisor %d of %s: %v", sup, r, err)
	}
	return fmt.Sprintf("supervisor %d of %s tick %s on %s SIGKILLed", sup, job,
		time.Unix(r.Tick, 0).UTC().Format("15:04:05"), r.Host)
}

// parentPID returns pid's parent from /proc (0 when unknown).
func parentPID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	var state string
	var ppid int
	if _, err := fmt.Sscan(string(b[i+1:]), &state, &ppid); err != nil {
		return 0
	}
	return ppid
}

// runsLeasecron reports whether pid runs this fleet's daemon binary.
func (f *Fleet) runsLeasecron(pid int) bool {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return err == nil && exe == f.bins.Leasecron
}

// Paused checks the pause windows of PausedRestartEmpty faults: a run of
// the paused job whose tick came after the pause was acknowledged and
// before the resume was asked for breaks the pause ("paused").
func (n *Nemesis) Paused(h *History) []Violation {
	var vs []Violation
	for _, ft := range n.Faults {
		if ft.Paused == "" {
			continue
		}
		for _, r := range h.Job(ft.Paused) {
			tick := time.Unix(r.Tick, 0)
			if tick.After(ft.PausedFrom) && tick.Before(ft.PausedTo) {
				vs = append(vs, Violation{Rule: "paused", Msg: fmt.Sprintf("%s ran while paused (fault #%d %s, paused %s-%s)",
					ft.Paused, ft.N, ft.Kind, fmtT(ft.PausedFrom), fmtT(ft.PausedTo)), Runs: []Run{r}})
			}
		}
	}
	return vs
}
