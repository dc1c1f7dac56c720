package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasecron/leasecron/bench/internal/probe"

	"github.com/leasecron/leasecron/bench/internal/stats"
	"github.com/redis/go-redis/v9"
)

// Kinds of lease cases.
const (
	kindPing    = "ping"    // quorum RTT floor: PING all K nodes, wait for a quorum
	kindSlowRTT = "slowrtt" // PING the slowed node alone (shows the real added delay)
	kindAR      = "ar"      // Acquire + Release
	kindExtend  = "extend"  // Extend of a held lock
	kindContend = "contend" // 16 clients, one key
)

// contenders is the number of clients fighting over one key.
const contenders = 16

type kase struct {
	kind  string
	lib   string // "" for ping cases
	k     int
	conc  int
	delay time.Duration
}

func (c kase) id() string {
	s := fmt.Sprintf("%s/K%d/c%d", c.kind, c.k, c.conc)
	if c.delay > 0 {
		s += "/+" + c.delay.String()
	}
	if c.lib != "" {
		s += "/" + c.lib
	}
	return s
}

var slowDelays = []time.Duration{2 * time.Millisecond, 5 * time.Millisecond}

func libsFor(k int) []string {
	libs := []string{libLease, libLeaseNoFence, libRedsync, libRedsyncFF}
	if k == 1 {
		libs = append(libs, libRedislock)
	}
	return libs
}

// cases lists every lease case once, grouped so that the libraries of one
// setting run back to back.
func cases() []kase {
	var cs []kase
	for _, k := range []int{1, 3, 5} {
		for _, conc := range []int{1, 16} {
			cs = append(cs, kase{kind: kindPing, k: k, conc: conc})
			if k == 1 {
				cs = append(cs, kase{kind: kindRT2, k: k, conc: conc})
			}
			for _, lib := range libsFor(k) {
				cs = append(cs, kase{kind: kindAR, lib: lib, k: k, conc: conc})
			}
			for _, lib := range libsFor(k) {
				cs = append(cs, kase{kind: kindExtend, lib: lib, k: k, conc: conc})
			}
		}
		for _, lib := range libsFor(k) {
			cs = append(cs, kase{kind: kindContend, lib: lib, k: k, conc: contenders})
		}
	}
	for _, k := range []int{3, 5} {
		for _, d := range slowDelays {
			cs = append(cs, kase{kind: kindSlowRTT, k: k, conc: 1, delay: d})
			for _, conc := range []int{1, 16} {
				cs = append(cs, kase{kind: kindPing, k: k, conc: conc, delay: d})
				for _, lib := range libsFor(k) {
					cs = append(cs, kase{kind: kindAR, lib: lib, k: k, conc: conc, delay: d})
				}
			}
		}
	}
	for _, lib := range libsFor(5) {
		cs = append(cs, kase{kind: kindContend, lib: lib, k: 5, conc: contenders, delay: 5 * time.Millisecond})
	}
	return cs
}

// run starts the nodes and runs every case cfg.reps times, interleaved:
// repetition r of every case runs before repetition r+1 of any.
func (b *bench) run(ctx context.Context) error {
	if err := b.startNodes(ctx); err != nil {
		return err
	}
	if err := b.collectEnv(ctx); err != nil {
		return err
	}
	if err := b.waitVoting(ctx); err != nil {
		return err
	}
	b.results = map[string][]stats.Summary{}
	b.cmdStats = map[string][]cmdProfile{}
	all := cases()
	var sel []kase
	for _, c := range all {
		if !b.cfg.skipLease && (b.cfg.only == nil || b.cfg.only.MatchString(c.id())) {
			sel = append(sel, c)
		}
	}
	for rep := 0; rep < b.cfg.reps; rep++ {
		for i, c := range sel {
			if err := ctx.Err(); err != nil {
				return err
			}
			s, err := b.runCase(ctx, c, fmt.Sprintf("r%d-c%d", rep, i))
			if err != nil {
				return fmt.Errorf("case %s: %w", c.id(), err)
			}
			b.results[c.id()] = append(b.results[c.id()], s)
			fmt.Fprintf(b.log, "rep %d/%d %-48s %9.0f ops/s  p50 %-9s p99 %-9s err %d %v\n", rep+1, b.cfg.reps, c.id(), s.Rate,
				s.P50.Round(time.Microsecond), s.P99.Round(time.Microsecond), s.Errors, s.Counts)
		}
	}
	b.profileCPU(ctx)
	b.tickRes = map[string][]*tickResult{}
	if !b.cfg.skipStores {
		if err := b.runStores(ctx); err != nil {
			return fmt.Errorf("store benchmarks: %w", err)
		}
	}
	if b.cfg.only != nil {
		b.cfg.skipSched, b.cfg.skipDaemon = true, true
	}
	if !b.cfg.skipSched {
		if err := b.runSched(ctx); err != nil {
			return fmt.Errorf("scheduler benchmarks: %w", err)
		}
	}
	if !b.cfg.skipDaemon {
		b.runDaemon(ctx) // records its own failure reason
	}
	return nil
}

// window is the measured part of a run: workers warm up until start and
// record operations that begin before end.
type window struct{ start, end time.Time }

func (b *bench) newWindow() window {
	now := time.Now()
	return window{start: now.Add(b.cfg.warm), end: now.Add(b.cfg.warm + b.cfg.dur)}
}

// worker collects one goroutine's results.
type worker struct {
	lat    []time.Duration
	errs   int
	counts map[string]int
	first  error
}

func (w *worker) fail(err error) {
	w.errs++
	if w.first == nil {
		w.first = err
	}
}

// merge folds the workers into one Run over window win.
func merge(win window, ws []*worker) stats.Run {
	r := stats.Run{Elapsed: win.end.Sub(win.start), Counts: map[string]int{}}
	for _, w := range ws {
		r.Lat = append(r.Lat, w.lat...)
		r.Errors += w.errs
		for k, v := range w.counts {
			r.Counts[k] += v
		}
	}
	r.Ops = len(r.Lat)
	return r
}

func firstErr(ws []*worker) error {
	for _, w := range ws {
		if w.first != nil {
			return w.first
		}
	}
	return nil
}

// parallel runs f in n goroutines and waits.
func parallel(n int, f func(i int, w *worker)) []*worker {
	ws := make([]*worker, n)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = &worker{counts: map[string]int{}}
		wg.Add(1)
		go func() { defer wg.Done(); f(i, ws[i]) }()
	}
	wg.Wait()
	return ws
}

// opTimeout bounds every single operation of the harness.
const opTimeout = 5 * time.Second

func (b *bench) runCase(ctx context.Context, c kase, prefix string) (stats.Summary, error) {
	b.setDelay(c.k, c.delay)
	defer b.setDelay(0, 0)
	addrs := b.addrs(c.k, c.delay)
	var run stats.Run
	var err error
	switch c.kind {
	case kindPing, kindSlowRTT:
		run, err = b.runPing(ctx, c, addrs)
	case kindRT2:
		run, err = b.runRT2(ctx, c, addrs)
	case kindAR, kindExtend, kindContend:
		run, err = b.runLock(ctx, c, addrs, prefix)
	default:
		err = fmt.Errorf("unknown kind %q", c.kind)
	}
	if err != nil {
		return stats.Summary{}, err
	}
	return stats.Summarize(run), nil
}

// runPing measures the quorum RTT floor: PING to all K nodes in parallel
// (one goroutine per node, as redsync does), done when a quorum answered.
// kindSlowRTT pings only the slowed node.
func (b *bench) runPing(ctx context.Context, c kase, addrs []string) (stats.Run, error) {
	if c.kind == kindSlowRTT {
		addrs = addrs[len(addrs)-1:]
	}
	clients := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		clients[i] = probe.NewClient(a)
	}
	defer func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	}()
	q := len(clients)/2 + 1
	win := b.newWindow()
	ws := parallel(c.conc, func(_ int, w *worker) {
		ch := make(chan error, len(clients))
		for {
			t0 := time.Now()
			if !t0.Before(win.end) || ctx.Err() != nil {
				return
			}
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			for _, cl := range clients {
				go func() { ch <- cl.Ping(octx).Err() }()
			}
			ok, bad := 0, 0
			var err error
			for i := 0; i < len(clients); i++ {
				if e := <-ch; e != nil {
					bad++
					err = e
				} else {
					ok++
				}
				if ok >= q || bad > len(clients)-q {
					break
				}
			}
			lat := time.Since(t0)
			cancel()
			// Drain the stragglers before the next round so that rounds
			// do not overlap.
			for i := ok + bad; i < len(clients); i++ {
				<-ch
			}
			if t0.Before(win.start) {
				continue
			}
			if ok < q {
				w.fail(err)
				continue
			}
			w.lat = append(w.lat, lat)
		}
	})
	if err := firstErr(ws); err != nil {
		return stats.Run{}, err
	}
	return merge(win, ws), nil
}
