// Command perfprobe measures the lease client's own costs on one
// redis-server it starts on 127.0.0.1:PORT (killed by PID on exit):
// Acquire+Release in a loop at c=1 (client CPU, Redis CPU and Go
// allocations per operation) and one TryAcquireBatch of 10,000 keys. These
// are load-independent enough to compare two builds of lease on a busy
// machine: build it at each commit and run them alternately.
//
//	cd bench && go run ./cmd/perfprobe 16990
//	MEMPROF=/tmp/mem.prof go run ./cmd/perfprobe 16990   # + allocation profile of the loop
//	NOFENCE=1 go run ./cmd/perfprobe 16990               # lease.WithoutFencing()
//	CPUPROF=/tmp/cpu.prof go run ./cmd/perfprobe 16990   # + CPU profile of the loop
//
// The same loop with bsm/redislock, on the same server and a go-redis
// client configured as lease configures its own, runs after it for
// comparison.
package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/bsm/redislock"
	"github.com/leasecron/leasecron/bench/internal/probe"
	"github.com/leasecron/leasecron/lease"
	"github.com/redis/go-redis/v9"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: perfprobe PORT")
		os.Exit(2)
	}
	port := os.Args[1]
	cmd, err := probe.StartRedis(port)
	if err != nil {
		panic(err)
	}
	defer cmd.Process.Kill()
	ctx := context.Background()
	admin := probe.NewClient("127.0.0.1:" + port)
	opts := []lease.Option{lease.WithRestartGuard(time.Second), lease.WithTimeout(5 * time.Second)}
	if os.Getenv("NOFENCE") != "" {
		opts = append(opts, lease.WithoutFencing())
	}
	c, err := lease.New([]string{"redis://127.0.0.1:" + port}, opts...)
	if err != nil {
		panic(err)
	}
	_ = c.Warm(ctx)
	time.Sleep(1500 * time.Millisecond)
	ar := func(n int) {
		for i := 0; i < n; i++ {
			l, err := c.Acquire(ctx, lease.Request{Key: "k", TTL: 10 * time.Second, Owner: "bench"})
			if err != nil {
				panic(err)
			}
			if err := l.Release(ctx); err != nil {
				panic(err)
			}
		}
	}
	ar(500)
	if os.Getenv("MEMPROF") != "" {
		runtime.MemProfileRate = 1
	}
	const n = 5000
	var cpuprof *os.File
	if f := os.Getenv("CPUPROF"); f != "" {
		cpuprof, _ = os.Create(f)
		_ = pprof.StartCPUProfile(cpuprof)
	}
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		panic(err)
	}
	before := probe.Read(ctx, admin)
	ar(n)
	fmt.Printf("AR K=1 c=1: %s\n", probe.PerOp(before, probe.Read(ctx, admin), n))
	printCommands(ctx, admin, n)

	if cpuprof != nil {
		pprof.StopCPUProfile()
		cpuprof.Close()
	}
	redislockLoop(ctx, port, admin, n)

	if f := os.Getenv("MEMPROF"); f != "" {
		out, _ := os.Create(f)
		_ = pprof.Lookup("allocs").WriteTo(out, 0)
		out.Close()
		runtime.MemProfileRate = 512 * 1024
	}
	reqs := make([]lease.Request, 10000)
	for i := range reqs {
		reqs[i] = lease.Request{Key: fmt.Sprintf("job-%05d", i), TTL: 30 * time.Second, Epoch: 17, Owner: "host=x tick=17"}
	}
	m := admin.Get(ctx, "leasecron:lease:birth").Val()
	admin.FlushDB(ctx)
	admin.Set(ctx, "leasecron:lease:birth", m, 0)
	runtime.GC()
	before = probe.Read(ctx, admin)
	res := c.TryAcquireBatch(ctx, reqs)
	after := probe.Read(ctx, admin)
	for _, r := range res {
		if r.Err != nil {
			panic(r.Err)
		}
	}
	fmt.Printf("batch %d keys, 1 node, fencing: %s\n", len(reqs), probe.Batch(before, after, len(reqs)))
}

// redislockLoop runs n Acquire+Release operations with bsm/redislock on the
// same server and prints the same figures as the lease loop.
func redislockLoop(ctx context.Context, port string, admin *redis.Client, n int) {
	c := probe.NewClient("127.0.0.1:" + port)
	defer c.Close()
	rl := redislock.New(c)
	loop := func(n int) {
		for i := 0; i < n; i++ {
			l, err := rl.Obtain(ctx, "rk", 10*time.Second, nil)
			if err != nil {
				panic(err)
			}
			if err := l.Release(ctx); err != nil {
				panic(err)
			}
		}
	}
	loop(500)
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		panic(err)
	}
	before := probe.Read(ctx, admin)
	loop(n)
	fmt.Printf("redislock AR c=1: %s\n", probe.PerOp(before, probe.Read(ctx, admin), n))
	printCommands(ctx, admin, n)
}

// printCommands prints the server's commands per operation of n since the
// last CONFIG RESETSTAT (INFO commandstats; wall time in the server).
func printCommands(ctx context.Context, admin *redis.Client, n int) {
	st, err := probe.CommandStats(ctx, admin)
	if err != nil {
		panic(err)
	}
	fmt.Printf("  Redis commands per op: %s\n", probe.FormatCommandStats(st, n, "info", "config|resetstat"))
}
