package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasecron/leasecron/bench/internal/probe"

	"github.com/leasecron/leasecron/bench/internal/delayproxy"
	"github.com/leasecron/leasecron/bench/internal/redisproc"
	"github.com/leasecron/leasecron/bench/internal/stats"
	"github.com/leasecron/leasecron/bench/internal/storeproc"
	"github.com/leasecron/leasecron/lease"
	"github.com/redis/go-redis/v9"
)

const maxNodes = 5

// bench owns the servers, proxies and results of one run.
type bench struct {
	cfg config
	log io.Writer

	mu      sync.Mutex // guards servers, proxies (killAll runs from the signal goroutine)
	servers []*redisproc.Server
	proxies []*delayproxy.Proxy
	admin   []*redis.Client // direct, for SCAN/INFO/FLUSHALL

	results  map[string][]stats.Summary // case id -> one summary per repetition
	cmdStats map[string][]cmdProfile    // case id -> the servers' commands per operation, per repetition
	cpuCases []cpuCase                  // client CPU profiles of a few cases

	storeProcs []*storeproc.Proc        // PostgreSQL, etcd, ZooKeeper (guarded by mu)
	stores     []*storeKit              // their benchmark kits
	tickRes    map[string][]*tickResult // store tick case id -> one per repetition
	sched      schedResults
	daemon     daemonResults
	env        environment
	total      time.Duration
}

// startNodes starts maxNodes redis-server processes and one delay proxy in
// front of each.
func (b *bench) startNodes(ctx context.Context) error {
	for i := 0; i < maxNodes; i++ {
		s, err := redisproc.Start(ctx, b.cfg.redisBin)
		if err != nil {
			return err
		}
		b.mu.Lock()
		b.servers = append(b.servers, s)
		b.mu.Unlock()
		p, err := delayproxy.New(s.Addr)
		if err != nil {
			return err
		}
		b.mu.Lock()
		b.proxies = append(b.proxies, p)
		b.mu.Unlock()
		b.admin = append(b.admin, probe.NewClient(s.Addr))
		fmt.Fprintf(b.log, "redis-server pid %d on %s (proxy %s)\n", s.PID(), s.Addr, p.Addr())
	}
	return nil
}

// killAll stops every proxy and kills every server by PID. Safe to call
// more than once and concurrently.
func (b *bench) killAll() {
	b.mu.Lock()
	servers, proxies, sprocs := b.servers, b.proxies, b.storeProcs
	b.mu.Unlock()
	for _, p := range sprocs {
		_ = p.Stop()
	}
	for _, p := range proxies {
		_ = p.Close()
	}
	for _, s := range servers {
		_ = s.Stop()
	}
	for _, c := range b.admin {
		_ = c.Close()
	}
}

// addrs returns the addresses of the first k nodes; with delay > 0 the last
// of them is reached through its proxy, slowed by delay.
func (b *bench) addrs(k int, delay time.Duration) []string {
	out := make([]string, k)
	for i := 0; i < k; i++ {
		out[i] = b.servers[i].Addr
	}
	if delay > 0 {
		out[k-1] = b.proxies[k-1].Addr()
	}
	return out
}

// setDelay slows node k-1 (through its proxy) by d; 0 resets.
func (b *bench) setDelay(k int, d time.Duration) {
	for _, p := range b.proxies {
		p.SetDelay(0)
	}
	if k > 0 {
		b.proxies[k-1].SetDelay(d)
	}
}

// waitVoting waits until every node's uptime is at least 3 s, so that a
// lease client with a 1 s restart guard counts its votes (the uptime is
// rounded down to seconds and the guard runs from uptime-1s).
func (b *bench) waitVoting(ctx context.Context) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok := true
		for _, c := range b.admin {
			up, err := infoInt(ctx, c, "server", "uptime_in_seconds")
			if err != nil {
				return err
			}
			if up < 3 {
				ok = false
			}
		}
		if ok {
			return b.writeMarkers(ctx)
		}
		if time.Now().After(deadline) {
			return errors.New("nodes did not reach 3 s uptime")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// info returns the fields of INFO section.
func info(ctx context.Context, c *redis.Client, section string) (map[string]string, error) {
	s, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("INFO %s on %s: %w", section, c.Options().Addr, err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m, nil
}

func infoInt(ctx context.Context, c *redis.Client, section, field string) (int64, error) {
	m, err := info(ctx, c, section)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(m[field], 10, 64)
}

// evalshaCalls returns the number of EVALSHA and EVAL commands node c has
// executed (INFO commandstats).
func evalshaCalls(ctx context.Context, c *redis.Client) (int64, error) {
	m, err := probe.CommandStats(ctx, c)
	if err != nil {
		return 0, err
	}
	return m["evalsha"].Calls + m["eval"].Calls, nil
}

// redisCPU returns the node's used CPU (user+sys) so far.
func redisCPU(ctx context.Context, c *redis.Client) (time.Duration, error) {
	m, err := info(ctx, c, "cpu")
	if err != nil {
		return 0, err
	}
	u, _ := strconv.ParseFloat(m["used_cpu_user"], 64)
	s, _ := strconv.ParseFloat(m["used_cpu_sys"], 64)
	return time.Duration((u + s) * float64(time.Second)), nil
}

// scanCount counts the keys matching pattern on node c.
func scanCount(ctx context.Context, c *redis.Client, pattern string, pred func(string) bool) (int, error) {
	n := 0
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		if pred == nil || pred(iter.Val()) {
			n++
		}
	}
	if err := iter.Err(); err != nil {
		return n, fmt.Errorf("SCAN %s: %w", c.Options().Addr, err)
	}
	return n, nil
}

// flushAll empties every node but keeps lease's data marker (see
// lease/birth.lua): the lease clients would otherwise see a data loss and
// keep the node from voting for their restart guard. The benchmark's
// flushes only reset its own keys; no lease is held across them.
func (b *bench) flushAll(ctx context.Context) error {
	for _, c := range b.admin {
		marker, err := c.Get(ctx, birthKey).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("GET %s %s: %w", birthKey, c.Options().Addr, err)
		}
		if err := c.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("FLUSHALL %s: %w", c.Options().Addr, err)
		}
		if marker != "" {
			if err := c.Set(ctx, birthKey, marker, 0).Err(); err != nil {
				return fmt.Errorf("SET %s %s: %w", birthKey, c.Options().Addr, err)
			}
		}
	}
	return nil
}

// birthKey is lease's data marker key (lease/birth.go).
const birthKey = "leasecron:lease:birth"

// writeMarkers lets one lease round write the data marker on every node,
// then waits out the restart guard (1 s) that a fresh marker starts.
func (b *bench) writeMarkers(ctx context.Context) error {
	urls := make([]string, len(b.servers))
	for i, s := range b.servers {
		urls[i] = "redis://" + s.Addr
	}
	c, err := lease.New(urls, lease.WithRestartGuard(time.Second))
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, opTimeout)
	if l, err := c.Acquire(actx, lease.Request{Key: "leasebench-marker", TTL: time.Second, Owner: "bench"}); err == nil {
		_ = l.Release(actx)
	}
	cancel()
	_ = c.Close()
	for _, a := range b.admin {
		if n, err := a.Exists(ctx, birthKey).Result(); err != nil || n != 1 {
			return fmt.Errorf("no data marker on %s after a lease round (%v)", a.Options().Addr, err)
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(1500 * time.Millisecond):
	}
	return nil
}
