package bench

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// opTimeout bounds every single operation of the benchmarks.
const opTimeout = 5 * time.Second

// warmOps is how many operations each goroutine makes before measuring.
const warmOps = 5

// processCPU is the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU returns a function that reads the CPU time the servers have
// used so far (INFO cpu on each Redis node).
func redisCPU(admins []*redis.Client) func() time.Duration {
	return func() time.Duration {
		var sum time.Duration
		for _, c := range admins {
			s, err := c.Info(context.Background(), "cpu").Result()
			if err != nil {
				continue
			}
			for _, line := range strings.Split(s, "\n") {
				k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
				if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
					f, _ := strconv.ParseFloat(v, 64)
					sum += time.Duration(f * float64(time.Second))
				}
			}
		}
		return sum
	}
}

// measure runs op b.N times on conc goroutines (each with its own index,
// 0 <= i < conc, so that it can keep its own key) and reports the median
// latency and the CPU per operation of this process and, when server is
// not nil, of the servers.
func measure(b *testing.B, conc int, server func() time.Duration, op func(ctx context.Context, i int) error) {
	b.Helper()
	// Warm up: connections dialled, scripts loaded, before the clock runs.
	for i := 0; i < conc; i++ {
		for range warmOps {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			err := op(ctx, i)
			cancel()
			if err != nil {
				b.Fatalf("warm-up: %v", err)
			}
		}
	}
	lats := make([][]time.Duration, conc)
	var left atomic.Int64
	left.Store(int64(b.N))
	var errMu sync.Mutex
	var firstErr error
	var s0 time.Duration
	if server != nil {
		s0 = server()
	}
	c0 := processCPU()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := 0; i < conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				t0 := time.Now()
				err := op(ctx, i)
				lats[i] = append(lats[i], time.Since(t0))
				cancel()
				if err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	n := float64(b.N)
	b.ReportMetric(float64(processCPU()-c0)/n/1e3, "client-cpu-µs/op")
	if server != nil {
		b.ReportMetric(float64(server()-s0)/n/1e3, "server-cpu-µs/op")
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2])/1e3, "p50-µs")
	}
}
