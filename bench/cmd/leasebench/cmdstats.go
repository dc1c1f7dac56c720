package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasecron/leasecron/bench/internal/probe"
)

// opStat is one command's calls and server µs per operation of a case.
type opStat struct{ calls, usec float64 }

// cmdProfile is what a case's operations made the servers do, per
// operation, summed over its nodes: every command run (INFO
// commandstats: calls, and µs of wall time inside the server, commands
// inside scripts included) and the servers' CPU (INFO cpu).
type cmdProfile struct {
	cmds  map[string]opStat
	redis time.Duration
}

// topLevel is the servers' wall time in the commands the clients sent:
// the scripts (whose time includes the commands they call, which
// commandstats also counts on their own) and the commands named in
// direct, which the client sends itself (redsync's SET NX, the floor's
// SET); every other command of these cases runs inside a script.
func (p cmdProfile) topLevel(direct ...string) time.Duration {
	v := p.cmds["evalsha"].usec + p.cmds["eval"].usec
	for _, d := range direct {
		v += p.cmds[d].usec
	}
	return usec(v)
}

// inner sums the calls and µs of the commands other than the scripts
// themselves: those the scripts called, and any sent directly.
func (p cmdProfile) inner() opStat {
	var o opStat
	for name, s := range p.cmds {
		if name != "evalsha" && name != "eval" && !strings.HasPrefix(name, "script") {
			o.calls += s.calls
			o.usec += s.usec
		}
	}
	return o
}

// direct names the commands lib sends outside scripts (see topLevel).
func direct(lib string) []string {
	if lib == libRedsync || lib == libRedsyncFF {
		return []string{"set"}
	}
	return nil
}

// profiled reports whether a case gets its servers' command statistics
// recorded: Acquire+Release, and Extend at c=1, without a slowed node.
func profiled(c kase) bool {
	return c.delay == 0 && (c.kind == kindAR || c.kind == kindExtend && c.conc == 1)
}

// resetCommandStats zeroes INFO commandstats on the first k nodes.
func (b *bench) resetCommandStats(ctx context.Context, k int) error {
	for i, cl := range b.admin[:k] {
		if err := cl.ConfigResetStat(ctx).Err(); err != nil {
			return fmt.Errorf("node %d: CONFIG RESETSTAT: %w", i+1, err)
		}
	}
	return nil
}

// readCommandStats sums the first k nodes' INFO commandstats since the
// last reset, per operation of n; the harness's own commands are left
// out.
func (b *bench) readCommandStats(ctx context.Context, k, n int) (cmdProfile, error) {
	p := cmdProfile{cmds: map[string]opStat{}}
	for i, cl := range b.admin[:k] {
		st, err := probe.CommandStats(ctx, cl)
		if err != nil {
			return p, fmt.Errorf("node %d: %w", i+1, err)
		}
		for name, s := range st {
			if name == "info" || strings.HasPrefix(name, "config") || name == "scan" {
				continue
			}
			o := p.cmds[name]
			o.calls += float64(s.Calls) / float64(n)
			o.usec += float64(s.Usec) / float64(n)
			p.cmds[name] = o
		}
	}
	return p, nil
}

// medCmdProfile is the repetition of c whose servers used the median
// CPU per operation.
func (b *bench) medCmdProfile(c kase) (cmdProfile, bool) {
	return medianProfile(b.cmdStats[c.id()])
}

// medianProfile is the profile of ps with the median servers' CPU.
func medianProfile(ps []cmdProfile) (cmdProfile, bool) {
	ps = slices.Clone(ps)
	if len(ps) == 0 {
		return cmdProfile{}, false
	}
	slices.SortFunc(ps, func(x, y cmdProfile) int { return cmp.Compare(x.redis, y.redis) })
	return ps[len(ps)/2], true
}

// formatCmds lists a profile's commands, most time first, each as
// "NAME calls/op: µs/op", e.g. "EVALSHA 2: 25.1 µs" (two calls per
// operation taking 25.1 µs together).
func (p cmdProfile) formatCmds() string {
	names := make([]string, 0, len(p.cmds))
	for n := range p.cmds {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(p.cmds[b].usec, p.cmds[a].usec) })
	var parts []string
	for _, n := range names {
		if o := p.cmds[n]; o.calls >= 0.001 {
			parts = append(parts, fmt.Sprintf("%s %s: %.1f µs", strings.ToUpper(n), fmtCalls(o.calls), o.usec))
		}
	}
	return strings.Join(parts, ", ")
}

// fmtCalls formats calls per operation: 2, 9.7, 0.13, 0.0015.
func fmtCalls(v float64) string {
	switch {
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0")
	}
	return fmt.Sprintf("%.2g", v)
}
