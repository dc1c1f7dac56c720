package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasecron/leasecron/lease"
)

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
