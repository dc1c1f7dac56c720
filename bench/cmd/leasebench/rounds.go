package main

import (
	"context"
	"fmt"
	"time"

	"github.com/leasecron/leasecron/bench/internal/stats"
	"github.com/leasecron/leasecron/lease"
)

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
