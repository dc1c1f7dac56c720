// Command c16probe measures Acquire+Release at c=16 on one redis-server
// it starts on 127.0.0.1:PORT (killed by PID on exit): 16 goroutines on
// one lease client, the same 16 split over 2 and 4 clients (one lane, and
// so one pipelined round in flight, per client and node), and
// bsm/redislock with a go-redis client configured as lease configures its
// own. It prints ops/s, client and Redis CPU per operation and how many of
// the machine's cores the two kept busy, twice, alternating.
//
//	cd bench && go run ./cmd/c16probe 16993
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bsm/redislock"
	"github.com/leasecron/leasecron/lease"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

func cpuSelf() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func redisCPU(ctx context.Context, c *redis.Client) time.Duration {
	var t float64
	for _, line := range strings.Split(c.Info(ctx, "cpu").Val(), "\n") {
		for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), f); ok {
				x, _ := strconv.ParseFloat(v, 64)
				t += x
			}
		}
	}
	return time.Duration(t * float64(time.Second))
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: c16probe PORT")
		os.Exit(2)
	}
	port := os.Args[1]
	cmd := exec.Command("redis-server", "--port", port, "--save", "", "--appendonly", "no")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	defer cmd.Process.Kill()
	time.Sleep(3500 * time.Millisecond)
	ctx := context.Background()
	run := func(name string, clients int, mk func() func(i int)) {
		var ops atomic.Int64
		fs := make([]func(int), clients)
		for c := range fs {
			fs[c] = mk()
		}
		admin := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, Protocol: 2})
		c0, r0 := cpuSelf(), redisCPU(ctx, admin)
		stop := time.Now().Add(2 * time.Second)
		var wg sync.WaitGroup
		for c := 0; c < clients; c++ {
			f := fs[c]
			for g := 0; g < 16/clients; g++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					for time.Now().Before(stop) {
						f(i)
						ops.Add(1)
					}
				}(c*100 + g)
			}
		}
		wg.Wait()
		c1, r1 := cpuSelf(), redisCPU(ctx, admin)
		n := float64(ops.Load())
		fmt.Printf("%s: %.0f ops/s, client CPU %.1f µs/op, Redis CPU %.1f µs/op, cores busy %.2f\n", name, n/2,
			float64((c1-c0).Microseconds())/n, float64((r1-r0).Microseconds())/n, float64((c1-c0+r1-r0).Microseconds())/2e6)
	}
	mkLease := func() func(i int) {
		c, err := lease.New([]string{"redis://127.0.0.1:" + port}, lease.WithRestartGuard(time.Second))
		if err != nil {
			panic(err)
		}
		_ = c.Warm(ctx)
		time.Sleep(1200 * time.Millisecond)
		return func(i int) {
			l, err := c.Acquire(ctx, lease.Request{Key: fmt.Sprint("k", i), TTL: 10 * time.Second, Owner: "b"})
			if err != nil {
				panic(err)
			}
			_ = l.Release(ctx)
		}
	}
	mkRL := func() func(i int) {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
			ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
		rl := redislock.New(c)
		return func(i int) {
			l, err := rl.Obtain(ctx, fmt.Sprint("r", i), 10*time.Second, nil)
			if err != nil {
				panic(err)
			}
			_ = l.Release(ctx)
		}
	}
	for r := 0; r < 2; r++ {
		run("lease 1 client", 1, mkLease)
		run("lease 2 clients", 2, mkLease)
		run("lease 4 clients", 4, mkLease)
		run("redislock", 1, mkRL)
	}
}
