package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"time"

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
