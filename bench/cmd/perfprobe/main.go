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
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
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
		fmt.Fprintln(os.Stderr, "usage: perfprobe PORT")
		os.Exit(2)
	}
	port := os.Args[1]
	cmd := exec.Command("redis-server", "--port", port, "--save", "", "--appendonly", "no")
	// The server dies with this process, also when it is killed or its
	// output pipe closes before the deferred Kill runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	defer cmd.Process.Kill()
	time.Sleep(3500 * time.Millisecond)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, Protocol: 2})
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
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	c0, r0, t0 := cpuSelf(), redisCPU(ctx, admin), time.Now()
	ar(n)
	el, c1, r1 := time.Since(t0), cpuSelf(), redisCPU(ctx, admin)
	runtime.ReadMemStats(&m1)
	fmt.Printf("AR K=1 c=1: %.1f µs/op wall, client CPU %.1f µs/op, Redis CPU %.1f µs/op, %d allocs/op, %d B/op\n",
		float64(el.Microseconds())/n, float64((c1-c0).Microseconds())/n, float64((r1-r0).Microseconds())/n,
		(m1.Mallocs-m0.Mallocs)/n, (m1.TotalAlloc-m0.TotalAlloc)/n)

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
	runtime.ReadMemStats(&m0)
	c0, r0, t0 = cpuSelf(), redisCPU(ctx, admin), time.Now()
	res := c.TryAcquireBatch(ctx, reqs)
	el, c1, r1 = time.Since(t0), cpuSelf(), redisCPU(ctx, admin)
	runtime.ReadMemStats(&m1)
	for _, r := range res {
		if r.Err != nil {
			panic(r.Err)
		}
	}
	fmt.Printf("batch 10000 keys, 1 node, fencing: %.1f ms wall, client CPU %.1f ms, Redis CPU %.1f ms, %d allocs/key, %.1f MiB\n",
		float64(el.Microseconds())/1000, float64((c1-c0).Microseconds())/1000, float64((r1-r0).Microseconds())/1000,
		(m1.Mallocs-m0.Mallocs)/10000, float64(m1.TotalAlloc-m0.TotalAlloc)/(1<<20))
}

// redislockLoop runs n Acquire+Release operations with bsm/redislock on the
// same server and prints the same figures as the lease loop.
func redislockLoop(ctx context.Context, port string, admin *redis.Client, n int) {
	c := redis.NewClient(&redis.Options{
		Addr: "127.0.0.1:" + port, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, DialTimeout: 5 * time.Second,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
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
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	c0, r0, t0 := cpuSelf(), redisCPU(ctx, admin), time.Now()
	loop(n)
	el, c1, r1 := time.Since(t0), cpuSelf(), redisCPU(ctx, admin)
	runtime.ReadMemStats(&m1)
	fmt.Printf("redislock AR c=1: %.1f µs/op wall, client CPU %.1f µs/op, Redis CPU %.1f µs/op, %d allocs/op, %d B/op\n",
		float64(el.Microseconds())/float64(n), float64((c1-c0).Microseconds())/float64(n), float64((r1-r0).Microseconds())/float64(n),
		(m1.Mallocs-m0.Mallocs)/uint64(n), (m1.TotalAlloc-m0.TotalAlloc)/uint64(n))
}
