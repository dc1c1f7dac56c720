package faultsuite

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The targets of the nemesis's faults: which nodes a fault hits, whether
// it loses data, and which daemon runs a job.

// plain reports whether node i runs without persistence.
func (n *Nemesis) plain(i int) bool { return !n.f.Store.Durable(i) }

func (n *Nemesis) plainNodes() []int {
	var out []int
	for i := range n.f.Config().Nodes {
		if n.plain(i) {
			out = append(out, i)
		}
	}
	return out
}

func (n *Nemesis) aofNodes() []int {
	var out []int
	for i := range n.f.Config().Nodes {
		if !n.plain(i) {
			out = append(out, i)
		}
	}
	return out
}

// nodesFor returns the nodes fault d hits.
func (n *Nemesis) nodesFor(d draw) []int {
	pick := func(from []int, k int) []int {
		// from, in the order of the drawn permutation
		in := map[int]bool{}
		for _, i := range from {
			in[i] = true
		}
		var out []int
		for _, i := range d.nodes {
			if in[i] && len(out) < k {
				out = append(out, i)
			}
		}
		sort.Ints(out)
		return out
	}
	cfg := n.f.Config()
	quorum := cfg.Nodes/2 + 1
	all := d.nodes
	switch d.kind {
	case KillMinority:
		return pick(all, 1+int(d.a*float64(quorum-1)))
	case KillMajority:
		return pick(all, quorum)
	case RestartEmpty:
		return pick(n.plainNodes(), 1+int(d.a*float64(len(n.plainNodes()))))
	case PausedRestartEmpty:
		return pick(n.plainNodes(), quorum-1)
	case Failback:
		// As many as there are, up to a quorum: on 3 nodes with one
		// AOF node, a quorum fails back, and only a daemon that sees the
		// failback (and lets those nodes vote only a TTL later) keeps a
		// second holder out.
		return pick(n.plainNodes(), quorum)
	case FreezeLeader:
		return pick(all, 1)
	case RestartAOF:
		return pick(n.aofNodes(), 1+int(d.a*float64(min(quorum, len(n.aofNodes())))))
	case Slow5ms, Slow50ms:
		return pick(all, 1)
	case PauseServers:
		return pick(all, max(1, quorum-1))
	case Partition:
		return pick(all, quorum)
	}
	return nil
}

func (n *Nemesis) losesData(d draw) bool {
	for _, i := range n.nodesFor(d) {
		if n.plain(i) && (d.kind == KillMinority || d.kind == KillMajority || d.kind == RestartEmpty ||
			d.kind == PausedRestartEmpty || d.kind == Failback) {
			return true
		}
	}
	return false
}

func (n *Nemesis) describeNodes(nodes []int) string {
	parts := make([]string, len(nodes))
	for i, x := range nodes {
		kind := "aof"
		if n.plain(x) {
			kind = "empty"
		}
		parts[i] = fmt.Sprintf("%d(%s)", x, kind)
	}
	return "nodes " + strings.Join(parts, ",")
}

// busyDaemon returns the daemon running the youngest live run (preferring
// runs that have a while to go), or the drawn fallback.
func (n *Nemesis) busyDaemon(fallback int) (*Daemon, string) {
	h := n.f.History()
	now := time.Now()
	var best *Run
	for i := range h.Runs {
		r := &h.Runs[i]
		if r.Ended() || r.Term || now.Sub(r.Last) > 200*time.Millisecond {
			continue
		}
		if d := n.f.Daemon(r.Host); d == nil || !d.Running() {
			continue
		}
		if best == nil || r.Start.After(best.Start) {
			best = r
		}
	}
	if best != nil {
		return n.f.Daemon(best.Host), fmt.Sprintf("%s (running %s tick %s for %s)", best.Host, best.Job,
			time.Unix(best.Tick, 0).UTC().Format("15:04:05"), now.Sub(best.Start).Round(time.Millisecond))
	}
	d := n.f.Daemons[fallback]
	return d, d.Name + " (idle)"
}
