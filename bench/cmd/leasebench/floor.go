package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasecron/leasecron/bench/internal/probe"

	"github.com/redis/go-redis/v9"
)

// floorRun is one measurement of the batch floor.
type floorRun struct {
	decided   time.Duration
	cpuClient time.Duration
	cpuRedis  time.Duration
	cmds      cmdProfile // the servers' commands per key (all nodes)
}

// batchFloor measures what no Redlock batch can beat on this machine: each
// of `daemons` simulated daemons sends the same `keys` lock keys as one
// raw pipelined `SET key value NX PX 30000` per node (no scripts, no
// fencing, no epochs, no data marker), to all 5 nodes in parallel, all
// daemons at the same instant; a daemon is done when a quorum (3) of its
// nodes answered its whole pipeline, the rule a Redlock round decides by.
// Every client is configured as lease's own (probe.NewClient).
func (b *bench) batchFloor(ctx context.Context, daemons, keys int) (floorRun, error) {
	const k = maxNodes
	q := k/2 + 1
	if err := b.flushAll(ctx); err != nil {
		return floorRun{}, err
	}
	clients := make([][]*redis.Client, daemons)
	defer func() {
		for _, cs := range clients {
			for _, c := range cs {
				_ = c.Close()
			}
		}
	}()
	for d := range clients {
		for _, a := range b.addrs(k, 0) {
			c := probe.NewClient(a)
			if err := c.Ping(ctx).Err(); err != nil {
				return floorRun{}, err
			}
			clients[d] = append(clients[d], c)
		}
	}
	tick := time.Now().Truncate(time.Second).Unix()
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("{job-%05d}:lock", i)
	}
	values := make([]string, daemons)
	for d := range values {
		values[d] = fmt.Sprintf("%032x host=d%d tick=%d", d+1, d, tick)
	}
	if err := b.resetCommandStats(ctx, k); err != nil {
		return floorRun{}, err
	}
	cpu0 := cpuSelf()
	rcpu0, err := b.redisCPUAll(ctx, k)
	if err != nil {
		return floorRun{}, err
	}
	var wg, ready, all sync.WaitGroup
	ready.Add(daemons)
	gate := make(chan struct{})
	errs := make([]error, daemons)
	for d := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-gate
			done := make(chan error, k)
			for _, c := range clients[d] {
				all.Add(1)
				go func() {
					defer all.Done()
					pipe := c.Pipeline()
					for _, name := range names {
						pipe.SetNX(ctx, name, values[d], 30*time.Second)
					}
					_, err := pipe.Exec(ctx)
					done <- err
				}()
			}
			ok := 0
			for i := 0; i < k; i++ {
				if err := <-done; err != nil {
					errs[d] = err
				} else if ok++; ok == q {
					break
				}
			}
			// The stragglers finish in the background, as a Redlock
			// round's do (waited for below, after the measurement).
		}()
	}
	ready.Wait()
	t0 := time.Now()
	close(gate)
	wg.Wait()
	decided := time.Since(t0)
	cpu1 := cpuSelf()
	rcpu1, err := b.redisCPUAll(ctx, k)
	if err != nil {
		return floorRun{}, err
	}
	all.Wait()
	for _, err := range errs {
		if err != nil {
			return floorRun{}, fmt.Errorf("batch floor: %w", err)
		}
	}
	cmds, err := b.readCommandStats(ctx, k, keys)
	if err != nil {
		return floorRun{}, err
	}
	cmds.redis = (rcpu1 - rcpu0) / time.Duration(keys)
	return floorRun{decided: decided, cpuClient: cpu1 - cpu0, cpuRedis: rcpu1 - rcpu0, cmds: cmds}, b.flushAll(ctx)
}
