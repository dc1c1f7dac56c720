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

// opStat is calls and server µs per operation.
type opStat struct{ calls, usec float64 }

// cmdProfile is what n operations of a case made the servers do, summed
// over its nodes: every command run (INFO commandstats: calls, and µs of
// wall time inside the server, commands inside scripts included) and the
// servers' CPU per operation (INFO cpu).
type cmdProfile struct {
	cmds  map[string]probe.CommandStat
	n     int
	redis time.Duration
}

// per is command name's calls and µs per operation.
func (p cmdProfile) per(name string) opStat {
	if p.n == 0 {
		return opStat{}
	}
	s := p.cmds[name]
	return opStat{float64(s.Calls) / float64(p.n), float64(s.Usec) / float64(p.n)}
}

// topLevel is the servers' wall time per operation in the commands the
// clients sent: the scripts (whose time includes the commands they call,
// which commandstats also counts on their own) and the commands named in
// direct, which the client sends itself (redsync's SET NX, the floor's
// SET); every other command of these cases runs inside a script.
func (p cmdProfile) topLevel(direct ...string) time.Duration {
	v := p.per("evalsha").usec + p.per("eval").usec
	for _, d := range direct {
		v += p.per(d).usec
	}
	return usec(v)
}

// inner sums the calls and µs per operation of the commands other than
// the scripts themselves: those the scripts called, and any sent
// directly.
func (p cmdProfile) inner() opStat {
	var o opStat
	for name := range p.cmds {
		if name != "evalsha" && name != "eval" && !strings.HasPrefix(name, "script") {
			o.calls += p.per(name).calls
			o.usec += p.per(name).usec
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
// last reset, for n operations; the harness's own commands are left out.
func (b *bench) readCommandStats(ctx context.Context, k, n int) (cmdProfile, error) {
	p := cmdProfile{cmds: map[string]probe.CommandStat{}, n: n}
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
			o.Calls += s.Calls
			o.Usec += s.Usec
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

// formatCmds lists a profile's commands per operation, most time first
// (probe.FormatCommandStats).
func (p cmdProfile) formatCmds() string { return probe.FormatCommandStats(p.cmds, p.n) }
