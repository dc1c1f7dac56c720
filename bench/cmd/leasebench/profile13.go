package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
	"github.com/leasecron/leasecron/bench/internal/probe"
	"github.com/leasecron/leasecron/bench/internal/stats"
)

// kindRT2 is the floor of any Acquire+Release on one node: two round
// trips in a row (PING, then PING) on a bare TCP connection per worker, no
// client library, no script. A lock that needs an answer before it can be
// released cannot take fewer round trips.
const kindRT2 = "rt2"

// runRT2 measures kindRT2 at c.conc workers, each on its own connection
// to the first node.
func (b *bench) runRT2(ctx context.Context, c kase, addrs []string) (stats.Run, error) {
	conns := make([]net.Conn, c.conc)
	defer func() {
		for _, cn := range conns {
			if cn != nil {
				_ = cn.Close()
			}
		}
	}()
	for i := range conns {
		cn, err := (&net.Dialer{Timeout: opTimeout}).DialContext(ctx, "tcp", addrs[0])
		if err != nil {
			return stats.Run{}, fmt.Errorf("dial %s: %w", addrs[0], err)
		}
		conns[i] = cn
	}
	win := b.newWindow()
	ws := parallel(c.conc, func(i int, w *worker) {
		cn := conns[i]
		rd := bufio.NewReader(cn)
		ping := []byte("PING\r\n")
		rt := func() error {
			if _, err := cn.Write(ping); err != nil {
				return err
			}
			line, err := rd.ReadSlice('\n')
			if err != nil {
				return err
			}
			if !bytes.Equal(line, []byte("+PONG\r\n")) {
				return fmt.Errorf("PING answered %q", line)
			}
			return nil
		}
		for {
			t0 := time.Now()
			if !t0.Before(win.end) || ctx.Err() != nil {
				return
			}
			_ = cn.SetDeadline(t0.Add(opTimeout))
			err := rt()
			if err == nil {
				err = rt()
			}
			if err != nil {
				w.fail(err)
				return // the connection is out of step; the case fails
			}
			if !t0.Before(win.start) {
				w.lat = append(w.lat, time.Since(t0))
			}
		}
	})
	if err := firstErr(ws); err != nil {
		return stats.Run{}, err
	}
	return merge(win, ws), nil
}

// opStat is one command's calls and server µs per operation of a case.
type opStat struct{ calls, usec float64 }

// cmdProfile is what a case's operations made the servers do, per
// operation, summed over its nodes (INFO commandstats): commands by name,
// their µs in all, and the servers' CPU per operation (INFO cpu) for the
// rest (reading, parsing and answering requests).
type cmdProfile struct {
	cmds  map[string]opStat
	redis time.Duration
}

// topLevel is the servers' time in the commands the clients sent: the
// scripts (whose time includes the commands they call, which
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
func (b *bench) readCommandStats(ctx context.Context, k, n int) cmdProfile {
	p := cmdProfile{cmds: map[string]opStat{}}
	for _, cl := range b.admin[:k] {
		for name, s := range probe.CommandStats(ctx, cl) {
			if name == "info" || strings.HasPrefix(name, "config") || name == "scan" {
				continue
			}
			o := p.cmds[name]
			o.calls += float64(s.Calls) / float64(n)
			o.usec += float64(s.Usec) / float64(n)
			p.cmds[name] = o
		}
	}
	return p
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

// formatCmds lists a profile's commands, costliest first: "evalsha 2 ×
// 25.1 µs".
func (p cmdProfile) formatCmds() string {
	names := make([]string, 0, len(p.cmds))
	for n := range p.cmds {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return int(p.cmds[b].usec*1000 - p.cmds[a].usec*1000) })
	var parts []string
	for _, n := range names {
		if o := p.cmds[n]; o.calls >= 0.001 {
			parts = append(parts, fmt.Sprintf("%s %.2g: %.1f µs", strings.ToUpper(n), o.calls, o.usec))
		}
	}
	return strings.Join(parts, ", ")
}

// cpuCase is one case profiled with the Go CPU profiler after the
// repetitions (not counted in the medians).
type cpuCase struct {
	c     kase
	ops   int
	cpu   time.Duration            // the process's CPU per operation (getrusage)
	total time.Duration            // sampled CPU per operation
	share map[string]time.Duration // per category, per operation
}

// cpuProfiled are the cases whose client CPU is profiled: the single
// node at c=1 and c=16 and Redlock at c=1, lease and the library it is
// measured against.
func cpuProfiled() []kase {
	ar := func(lib string, k, c int) kase { return kase{kind: kindAR, lib: lib, k: k, conc: c} }
	return []kase{
		ar(libLease, 1, 1), ar(libRedislock, 1, 1),
		ar(libLease, 1, 16), ar(libRedislock, 1, 16),
		ar(libLease, 3, 1), ar(libRedsync, 3, 1),
		ar(libLease, 5, 1), ar(libRedsync, 5, 1),
	}
}

// profileFor is how long each profiled case runs (at least -dur).
const profileFor = 2 * time.Second

// cpuCategories, in the order they are reported.
var cpuCategories = []string{"write syscalls", "read syscalls", "other syscalls", "futex (thread wake/sleep)", "netpoll", "Go scheduler", "GC", "allocation", "go-redis", "lease", "redislock/redsync", "other"}

// profileCPU runs each case of cpuProfiled that was measured once more
// under the CPU profiler and splits its samples into categories.
func (b *bench) profileCPU(ctx context.Context) error {
	if b.cfg.cpuProfile != "" {
		return nil // the whole run is being profiled; one profiler at a time
	}
	// Long enough for a few hundred samples (the profiler samples at
	// 100 Hz per core).
	dur := b.cfg.dur
	defer func() { b.cfg.dur = dur }()
	b.cfg.dur = max(dur, profileFor)
	for i, c := range cpuProfiled() {
		if b.get(c) == nil {
			continue
		}
		var buf bytes.Buffer
		if err := pprof.StartCPUProfile(&buf); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		s, err := b.runCase(ctx, c, fmt.Sprintf("prof-c%d", i))
		pprof.StopCPUProfile()
		if err != nil {
			return fmt.Errorf("case %s (profiled): %w", c.id(), err)
		}
		p, err := profile.Parse(&buf)
		if err != nil {
			return fmt.Errorf("case %s: parse cpu profile: %w", c.id(), err)
		}
		n := s.Counts[cntOps]
		if n == 0 {
			continue
		}
		cc := cpuCase{c: c, ops: n, cpu: time.Duration(s.Counts[cntCPUClient]), share: map[string]time.Duration{}}
		for _, smp := range p.Sample {
			d := time.Duration(smp.Value[len(smp.Value)-1]) / time.Duration(n)
			cc.share[categorize(smp)] += d
			cc.total += d
		}
		b.cpuCases = append(b.cpuCases, cc)
		fmt.Fprintf(b.log, "profiled %-40s %d ops, %s CPU/op\n", c.id(), n, cc.total)
	}
	return nil
}

// categorize names the category of one profile sample from its stack
// (leaf first).
func categorize(s *profile.Sample) string {
	var fns []string
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			if ln.Function != nil {
				fns = append(fns, ln.Function.Name)
			}
		}
	}
	if len(fns) == 0 {
		return "other"
	}
	has := func(pred func(string) bool) bool { return slices.ContainsFunc(fns, pred) }
	leaf := fns[0]
	switch {
	case has(func(f string) bool { return f == "runtime.gcBgMarkWorker" || strings.HasPrefix(f, "runtime.gcDrain") }):
		return "GC"
	case has(func(f string) bool { return strings.HasPrefix(f, "runtime.netpoll") }):
		return "netpoll"
	case leaf == "runtime.futex":
		return "futex (thread wake/sleep)"
	case strings.Contains(leaf, "Syscall") || strings.HasPrefix(leaf, "syscall."):
		switch {
		case has(func(f string) bool { return strings.HasPrefix(f, "syscall.write") }):
			return "write syscalls"
		case has(func(f string) bool { return strings.HasPrefix(f, "syscall.read") }):
			return "read syscalls"
		}
		return "other syscalls"
	case has(func(f string) bool { return f == "runtime.mallocgc" }):
		return "allocation"
	case strings.HasPrefix(leaf, "runtime.") || strings.HasPrefix(leaf, "internal/runtime"):
		return "Go scheduler"
	}
	// Attribute the rest to the first frame of a package we name.
	for _, f := range fns {
		switch {
		case strings.HasPrefix(f, "github.com/redis/go-redis"):
			return "go-redis"
		case strings.HasPrefix(f, "github.com/leasecron/leasecron/lease"):
			return "lease"
		case strings.HasPrefix(f, "github.com/bsm/redislock"), strings.HasPrefix(f, "github.com/go-redsync"):
			return "redislock/redsync"
		}
	}
	return "other"
}
