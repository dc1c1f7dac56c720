package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/leasecron/leasecron/bench/internal/stats"
	"github.com/leasecron/leasecron/lease"
)

// schedResults holds the scheduler-side measurements that need no daemon.
type schedResults struct {
	batch    []batchRow
	rounds   []roundRow
	renew    []renewRow
	batchErr string
	floors   map[int][]floorRun // daemons -> the batch floor, one per repetition
}

// batchRow is one TryAcquireBatch setting, medians over repetitions.
type batchRow struct {
	daemons    int
	keys       int
	fencing    bool
	timeout    time.Duration
	decided    []time.Duration // per repetition: until every daemon's batch returned
	wins       []int           // keys won by some daemon
	doubles    int             // keys won by two daemons (must be 0)
	failed     []int           // keys lost to timeouts / no quorum (not refusals)
	evalsha    []float64       // EVALSHA executed per node
	allocMiB   []float64       // Go heap allocated per daemon for the batch
	cpuClient  []time.Duration // client CPU (this process) for the batch
	cpuRedis   []time.Duration // CPU of all redis-servers for the batch
	cmds       []cmdProfile    // the servers' commands per key (all nodes)
	firstError string
}

// roundRow infers round trips from added latency: every node slowed by D;
// (decided(D) - decided(0)) / D is the number of sequential rounds.
type roundRow struct {
	keys     int
	fencing  bool
	delay    time.Duration
	base     time.Duration
	slowed   time.Duration
	inferred float64
	bursts   []int // request rounds seen by each node's proxy (median run)
}

// renewRow is the renewal load of many held leases.
type renewRow struct {
	k, leases     int
	ttl, every    time.Duration
	window        time.Duration
	extendsPerSec float64 // Extend calls per second (Observer.OnRenew)
	failed        int     // failed renewals
	opsPerNode    float64 // EVALSHA per second per node
	cpuClientMsPS float64 // client CPU ms per second
	cpuRedisMsPS  float64 // CPU ms per second, all nodes together
	lost          int     // Holds whose Done closed
	firstError    string
}

func (b *bench) runSched(ctx context.Context) error {
	fmt.Fprintln(b.log, "scheduler: batch")
	reps := b.cfg.reps
	n := b.cfg.batchKeys
	settings := []batchRow{
		{daemons: 1, keys: n, fencing: true, timeout: lease.DefaultTimeout},
		{daemons: 1, keys: n, fencing: false, timeout: lease.DefaultTimeout},
		{daemons: 3, keys: n, fencing: true, timeout: lease.DefaultTimeout},
		{daemons: 1, keys: n, fencing: true, timeout: time.Second},
		{daemons: 1, keys: n, fencing: false, timeout: time.Second},
		{daemons: 3, keys: n, fencing: true, timeout: time.Second},
		{daemons: 3, keys: n, fencing: false, timeout: time.Second},
	}
	b.sched.floors = map[int][]floorRun{}
	for rep := 0; rep < reps; rep++ {
		for _, d := range []int{1, 3} {
			f, err := b.batchFloor(ctx, d, n)
			if err != nil {
				return err
			}
			b.sched.floors[d] = append(b.sched.floors[d], f)
			fmt.Fprintf(b.log, "batch floor daemons=%d keys=%d: decided %s; CPU client %s redis %s\n", d, n,
				f.decided.Round(time.Millisecond), f.cpuClient.Round(time.Millisecond), f.cpuRedis.Round(time.Millisecond))
		}
		for i := range settings {
			if err := b.batchOnce(ctx, &settings[i]); err != nil {
				return err
			}
			r := &settings[i]
			fmt.Fprintf(b.log, "batch daemons=%d keys=%d fencing=%v timeout=%s: decided %s wins %d failed %d; CPU client %s redis %s\n",
				r.daemons, r.keys, r.fencing, r.timeout, r.decided[len(r.decided)-1].Round(time.Millisecond),
				r.wins[len(r.wins)-1], r.failed[len(r.failed)-1], r.cpuClient[len(r.cpuClient)-1].Round(time.Millisecond), r.cpuRedis[len(r.cpuRedis)-1].Round(time.Millisecond))
		}
	}
	b.sched.batch = settings

	fmt.Fprintln(b.log, "scheduler: rounds")
	for _, fencing := range []bool{true, false} {
		row, err := b.inferRounds(ctx, n, fencing, 100*time.Millisecond)
		if err != nil {
			return err
		}
		b.sched.rounds = append(b.sched.rounds, row)
		fmt.Fprintf(b.log, "rounds fencing=%v: bursts %v, timing %.2f\n", fencing, row.bursts, row.inferred)
	}

	fmt.Fprintln(b.log, "scheduler: renewal")
	for _, k := range []int{3, 5} {
		row, err := b.renewal(ctx, k, 1000, 3*time.Second)
		if err != nil {
			return err
		}
		b.sched.renew = append(b.sched.renew, row)
	}
	return nil
}

func nodeURLs(addrs []string) []string {
	urls := make([]string, len(addrs))
	for i, a := range addrs {
		urls[i] = "redis://" + a
	}
	return urls
}

func cpuSelf() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (b *bench) redisCPUAll(ctx context.Context, k int) (time.Duration, error) {
	var t time.Duration
	for _, c := range b.admin[:k] {
		d, err := redisCPU(ctx, c)
		if err != nil {
			return 0, err
		}
		t += d
	}
	return t, nil
}

func (b *bench) evalshaAll(ctx context.Context, k int) (int64, error) {
	var t int64
	for _, c := range b.admin[:k] {
		d, err := evalshaCalls(ctx, c)
		if err != nil {
			return 0, err
		}
		t += d
	}
	return t, nil
}

// batchOnce: r.daemons clients (one per simulated daemon) call
// TryAcquireBatch with the same r.keys requests for one tick at the same
// moment, on all 5 nodes.
func (b *bench) batchOnce(ctx context.Context, r *batchRow) error {
	const k = maxNodes
	if err := b.flushAll(ctx); err != nil {
		return err
	}
	clients := make([]*lease.Client, r.daemons)
	for d := range clients {
		opts := []lease.Option{lease.WithRestartGuard(time.Second), lease.WithTimeout(r.timeout)}
		if !r.fencing {
			opts = append(opts, lease.WithoutFencing())
		}
		c, err := lease.New(nodeURLs(b.addrs(k, 0)), opts...)
		if err != nil {
			return err
		}
		clients[d] = c
		defer c.Close()
		// Warm up: connect and load the scripts.
		for _, res := range c.TryAcquireBatch(ctx, []lease.Request{{Key: "warm", TTL: time.Second}}) {
			if res.Lease != nil {
				_ = res.Lease.Release(ctx)
			}
		}
	}
	if err := b.flushAll(ctx); err != nil {
		return err
	}
	tick := time.Now().Truncate(time.Second).Unix()
	reqs := make([][]lease.Request, r.daemons)
	for d := range reqs {
		reqs[d] = make([]lease.Request, r.keys)
		for i := range reqs[d] {
			reqs[d][i] = lease.Request{Key: fmt.Sprintf("job-%05d", i), TTL: 30 * time.Second, Epoch: tick,
				Owner: fmt.Sprintf("host=d%d tick=%d", d, tick)}
		}
	}
	runtime.GC()
	if err := b.resetCommandStats(ctx, k); err != nil {
		return err
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := cpuSelf()
	rcpu0, err := b.redisCPUAll(ctx, k)
	if err != nil {
		return err
	}
	ev0, err := b.evalshaAll(ctx, k)
	if err != nil {
		return err
	}

	results := make([][]lease.Result, r.daemons)
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	ready.Add(r.daemons)
	gate := make(chan struct{})
	for d := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-gate
			results[d] = clients[d].TryAcquireBatch(ctx, reqs[d])
		}()
	}
	ready.Wait()
	t0 := time.Now()
	close(gate)
	wg.Wait()
	decided := time.Since(t0)

	cpu1 := cpuSelf()
	runtime.ReadMemStats(&ms1)
	rcpu1, err := b.redisCPUAll(ctx, k)
	if err != nil {
		return err
	}
	ev1, err := b.evalshaAll(ctx, k)
	if err != nil {
		return err
	}
	cmds, err := b.readCommandStats(ctx, k, r.keys)
	if err != nil {
		return err
	}
	cmds.redis = (rcpu1 - rcpu0) / time.Duration(r.keys)

	wins, failed, doubles := 0, 0, 0
	for i := 0; i < r.keys; i++ {
		w := 0
		for d := range results {
			res := results[d][i]
			switch {
			case res.Err == nil:
				w++
			case errors.Is(res.Err, lease.ErrHeld), errors.Is(res.Err, lease.ErrEpochDone):
			default:
				failed++
				if r.firstError == "" {
					r.firstError = res.Err.Error()
				}
			}
		}
		if w > 0 {
			wins++
		}
		if w > 1 {
			doubles++
		}
	}
	r.decided = append(r.decided, decided)
	r.wins = append(r.wins, wins)
	r.failed = append(r.failed, failed)
	r.doubles += doubles
	r.evalsha = append(r.evalsha, float64(ev1-ev0)/float64(k))
	r.allocMiB = append(r.allocMiB, float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(r.daemons)/(1<<20))
	r.cpuClient = append(r.cpuClient, cpu1-cpu0)
	r.cpuRedis = append(r.cpuRedis, rcpu1-rcpu0)
	r.cmds = append(r.cmds, cmds)
	return b.flushAll(ctx)
}

// inferRounds times one 1-daemon batch with every node behind its proxy,
// first undelayed, then with every node slowed by delay.
func (b *bench) inferRounds(ctx context.Context, keys int, fencing bool, delay time.Duration) (roundRow, error) {
	row := roundRow{keys: keys, fencing: fencing, delay: delay}
	addrs := make([]string, maxNodes)
	for i := range addrs {
		addrs[i] = b.proxies[i].Addr()
	}
	var lastBursts []int
	measure := func(d time.Duration) (time.Duration, error) {
		opts := []lease.Option{lease.WithRestartGuard(time.Second), lease.WithTimeout(5 * time.Second)}
		if !fencing {
			opts = append(opts, lease.WithoutFencing())
		}
		c, err := lease.New(nodeURLs(addrs), opts...)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		for _, p := range b.proxies {
			p.SetDelay(0)
		}
		c.TryAcquireBatch(ctx, []lease.Request{{Key: "warm", TTL: time.Second}})
		if err := b.flushAll(ctx); err != nil {
			return 0, err
		}
		for _, p := range b.proxies {
			p.SetDelay(d)
		}
		defer func() {
			for _, p := range b.proxies {
				p.SetDelay(0)
			}
		}()
		reqs := make([]lease.Request, keys)
		for i := range reqs {
			reqs[i] = lease.Request{Key: fmt.Sprintf("job-%05d", i), TTL: 30 * time.Second, Owner: "rounds"}
		}
		if d > 0 {
			for _, p := range b.proxies {
				p.CountBursts(d / 2)
			}
		}
		t0 := time.Now()
		res := c.TryAcquireBatch(ctx, reqs)
		el := time.Since(t0)
		if d > 0 {
			lastBursts = lastBursts[:0]
			for _, p := range b.proxies {
				lastBursts = append(lastBursts, p.Bursts())
				p.CountBursts(0)
			}
		}
		for _, r := range res {
			if r.Err != nil {
				return 0, fmt.Errorf("round inference batch: %w", r.Err)
			}
		}
		return el, b.flushAll(ctx)
	}
	// Median of 3 each, interleaved.
	var base, slow []float64
	for i := 0; i < 3; i++ {
		t, err := measure(0)
		if err != nil {
			return row, err
		}
		base = append(base, float64(t))
		t, err = measure(delay)
		if err != nil {
			return row, err
		}
		slow = append(slow, float64(t))
		row.bursts = append([]int(nil), lastBursts...)
	}
	row.base = time.Duration(stats.Median(base))
	row.slowed = time.Duration(stats.Median(slow))
	row.inferred = float64(row.slowed-row.base) / float64(delay)
	return row, nil
}

// renewal holds `leases` leases on k nodes with Hold (renew every ttl/3,
// the default) and measures the renewal load over a window.
func (b *bench) renewal(ctx context.Context, k, leases int, ttl time.Duration) (renewRow, error) {
	row := renewRow{k: k, leases: leases, ttl: ttl, every: ttl / 3}
	if err := b.flushAll(ctx); err != nil {
		return row, err
	}
	var renews, fails atomic.Int64
	ob := lease.Observer{OnRenew: func(e lease.RenewEvent) {
		if e.OK {
			renews.Add(1)
		} else {
			fails.Add(1)
		}
	}}
	c, err := lease.New(nodeURLs(b.addrs(k, 0)), lease.WithRestartGuard(time.Second), lease.WithObserver(ob))
	if err != nil {
		return row, err
	}
	defer c.Close()
	reqs := make([]lease.Request, leases)
	for i := range reqs {
		reqs[i] = lease.Request{Key: fmt.Sprintf("run-%04d", i), TTL: ttl, Owner: "renewal"}
	}
	// Acquire in batches of 100 spread over one renew period, as jobs
	// started at different times would be.
	var holds []*lease.Hold
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for _, h := range holds {
			wg.Add(1)
			go func() { defer wg.Done(); _ = h.Release(rctx) }()
		}
		wg.Wait()
	}()
	step := row.every / time.Duration(leases/100)
	for i := 0; i < leases; i += 100 {
		for _, res := range c.TryAcquireBatch(ctx, reqs[i:min(i+100, leases)]) {
			if res.Err != nil {
				return row, fmt.Errorf("renewal setup: %w", res.Err)
			}
			holds = append(holds, res.Lease.Hold())
		}
		time.Sleep(step)
	}
	time.Sleep(row.every / 2)
	window := 3 * row.every
	if b.cfg.quick {
		window = row.every
	}
	r0, f0 := renews.Load(), fails.Load()
	ev0, err := b.evalshaAll(ctx, k)
	if err != nil {
		return row, err
	}
	rc0, err := b.redisCPUAll(ctx, k)
	if err != nil {
		return row, err
	}
	c0 := cpuSelf()
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return row, ctx.Err()
	case <-time.After(window):
	}
	el := time.Since(t0)
	c1 := cpuSelf()
	ev1, err := b.evalshaAll(ctx, k)
	if err != nil {
		return row, err
	}
	rc1, err := b.redisCPUAll(ctx, k)
	if err != nil {
		return row, err
	}
	row.window = el
	row.extendsPerSec = float64(renews.Load()-r0) / el.Seconds()
	row.failed = int(fails.Load() - f0)
	row.opsPerNode = float64(ev1-ev0) / float64(k) / el.Seconds()
	row.cpuClientMsPS = float64(c1-c0) / float64(time.Millisecond) / el.Seconds()
	row.cpuRedisMsPS = float64(rc1-rc0) / float64(time.Millisecond) / el.Seconds()
	for _, h := range holds {
		select {
		case <-h.Done():
			row.lost++
			if row.firstError == "" && h.Err() != nil {
				row.firstError = h.Err().Error()
			}
		default:
		}
	}
	fmt.Fprintf(b.log, "renewal K=%d leases=%d ttl=%s: %.0f extends/s, %.0f EVALSHA/s per node, client CPU %.1f ms/s, redis CPU %.1f ms/s, failed %d lost %d\n",
		k, leases, ttl, row.extendsPerSec, row.opsPerNode, row.cpuClientMsPS, row.cpuRedisMsPS, row.failed, row.lost)
	return row, nil
}
