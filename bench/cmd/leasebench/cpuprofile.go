package main

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// cpuCase is one case profiled with the Go CPU profiler after the
// repetitions (not counted in the medians).
type cpuCase struct {
	c       kase
	ops     int
	samples int
	cpu     time.Duration            // the process's CPU per operation (getrusage, same span as the profile)
	total   time.Duration            // sampled CPU per operation
	share   map[string]time.Duration // per category, per operation
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

// profileFor is how long each profiled case runs (at least -dur): the
// profiler takes up to 100 samples per second of CPU the process uses,
// so a few hundred samples per case here.
const profileFor = 5 * time.Second

// cpuCategories, in the order they are reported.
var cpuCategories = []string{"write syscalls", "read syscalls", "other syscalls", "futex (thread wake/sleep)", "netpoll",
	"Go scheduler", "GC", "allocation", "go-redis", "lease", "redislock/redsync", "harness", "other runtime", "other"}

// profileCPU runs each case of cpuProfiled that was measured once more
// under the CPU profiler and splits its samples into categories. A case
// that fails is left out of the report (and logged), not the run.
func (b *bench) profileCPU(ctx context.Context) {
	if b.cfg.cpuProfile != "" {
		return // the whole run is being profiled; one profiler at a time
	}
	dur := b.cfg.dur
	defer func() { b.cfg.dur = dur }()
	b.cfg.dur = max(dur, profileFor)
	for i, c := range cpuProfiled() {
		if b.get(c) == nil || ctx.Err() != nil {
			continue
		}
		cc, err := b.profileCase(ctx, c, fmt.Sprintf("prof-c%d", i))
		if err != nil {
			fmt.Fprintf(b.log, "profile of %s left out: %v\n", c.id(), err)
			continue
		}
		b.cpuCases = append(b.cpuCases, cc)
		fmt.Fprintf(b.log, "profiled %-40s %d ops, %d samples, %s sampled CPU/op\n", c.id(), cc.ops, cc.samples, cc.total)
	}
}

// profileCase runs c once under the CPU profiler.
func (b *bench) profileCase(ctx context.Context, c kase, prefix string) (cpuCase, error) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return cpuCase{}, fmt.Errorf("cpu profile: %w", err)
	}
	cpu0 := cpuSelf()
	s, err := b.runCase(ctx, c, prefix)
	cpu := cpuSelf() - cpu0
	pprof.StopCPUProfile()
	if err != nil {
		return cpuCase{}, err
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		return cpuCase{}, fmt.Errorf("parse cpu profile: %w", err)
	}
	n := s.Counts[cntOps]
	if n == 0 {
		return cpuCase{}, fmt.Errorf("no operation completed")
	}
	cc := cpuCase{c: c, ops: n, samples: len(p.Sample), cpu: cpu / time.Duration(n), share: map[string]time.Duration{}}
	for _, smp := range p.Sample {
		d := time.Duration(smp.Value[len(smp.Value)-1]) / time.Duration(n)
		cc.share[categorize(smp)] += d
		cc.total += d
	}
	return cc, nil
}

// schedulerFrames are the Go runtime's functions that switch, park, wake
// or start goroutines and threads.
var schedulerFrames = []string{"runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.gopark",
	"runtime.goready", "runtime.ready", "runtime.wakep", "runtime.startm", "runtime.stopm", "runtime.notesleep",
	"runtime.notewakeup", "runtime.exitsyscall", "runtime.sysmon", "runtime.mcall", "runtime.newproc", "runtime.goexit0",
	"runtime.gosched_m", "runtime.runqgrab", "runtime.stealWork"}

// categorize names the category of one profile sample from its stack
// (leaf first): the runtime's own work first (GC, netpoll, futex, system
// calls by the call that made them, allocation, scheduling), then the
// first frame outside the runtime.
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
	prefixed := func(ps ...string) func(string) bool {
		return func(f string) bool {
			return slices.ContainsFunc(ps, func(p string) bool { return strings.HasPrefix(f, p) })
		}
	}
	leaf := fns[0]
	switch {
	case leaf == "runtime._GC" || has(prefixed("runtime.gcBgMarkWorker", "runtime.gcDrain", "runtime.bgsweep", "runtime.bgscavenge", "runtime.sweepone")):
		return "GC"
	case has(prefixed("runtime.netpoll")):
		return "netpoll"
	case leaf == "runtime.futex":
		return "futex (thread wake/sleep)"
	case strings.Contains(leaf, "Syscall") || strings.HasPrefix(leaf, "syscall."):
		switch {
		case has(prefixed("syscall.write")):
			return "write syscalls"
		case has(prefixed("syscall.read")):
			return "read syscalls"
		}
		return "other syscalls"
	case has(func(f string) bool { return f == "runtime.mallocgc" }):
		return "allocation"
	case has(func(f string) bool { return slices.Contains(schedulerFrames, f) }):
		return "Go scheduler"
	}
	// The rest goes to the first frame outside the runtime.
	for _, f := range fns {
		switch {
		case strings.HasPrefix(f, "runtime.") || strings.HasPrefix(f, "internal/runtime/") || strings.HasPrefix(f, "sync/atomic."):
			continue
		case strings.HasPrefix(f, "github.com/redis/go-redis/"):
			return "go-redis"
		case strings.HasPrefix(f, "github.com/leasecron/leasecron/lease."):
			return "lease"
		case strings.HasPrefix(f, "github.com/bsm/redislock."), strings.HasPrefix(f, "github.com/go-redsync/"):
			return "redislock/redsync"
		case strings.HasPrefix(f, "main."):
			return "harness"
		}
		return "other"
	}
	return "other runtime"
}
