package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// lockTTL is the lock TTL every library uses.
const lockTTL = 10 * time.Second

// redisNodes starts k redis-server processes and waits until a lease
// client with a 1 s restart guard counts their votes (a node younger than
// the guard does not vote). It returns the nodes' addresses and admin
// clients for INFO.
func redisNodes(b *testing.B, k int) ([]string, []*redis.Client) {
	b.Helper()
	cl := redistest.Start(b, k)
	addrs := cl.Addrs()
	admins := make([]*redis.Client, k)
	for i, a := range addrs {
		admins[i] = newClient(a)
		b.Cleanup(func() { _ = admins[i].Close() })
	}
	lk, err := newLocker(libLease, addrs, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer lk.close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		h, err := lk.lock(ctx, "bench-warm")
		if err == nil {
			_ = h.unlock(ctx)
			cancel()
			break
		}
		cancel()
		if time.Now().After(deadline) {
			b.Fatalf("the nodes never voted: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The first round wrote the data marker; its guard runs 1 s from now.
	time.Sleep(1500 * time.Millisecond)
	return addrs, admins
}

// BenchmarkAcquireRelease takes a lock and releases it, on 1, 3 and 5
// nodes, by 1 and 16 goroutines sharing one client (each on its own key).
// The floor is two quorum round trips of bare PINGs.
func BenchmarkAcquireRelease(b *testing.B) {
	forEachSetting(b, func(b *testing.B, k, conc int, addrs []string, admins []*redis.Client) {
		for _, lib := range redisLibs(k) {
			b.Run("lib="+lib, func(b *testing.B) {
				lk := openLocker(b, lib, addrs)
				measure(b, conc, redisCPU(admins), func(ctx context.Context, i int) error {
					h, err := lk.lock(ctx, fmt.Sprintf("ar-%s-%d", lib, i))
					if err != nil {
						return err
					}
					return h.unlock(ctx)
				})
			})
		}
		b.Run("lib="+libFloor, func(b *testing.B) { benchFloor(b, addrs, conc, 2) })
	})
}

// BenchmarkExtend extends a held lock; the floor is one quorum round trip.
func BenchmarkExtend(b *testing.B) {
	forEachSetting(b, func(b *testing.B, k, conc int, addrs []string, admins []*redis.Client) {
		for _, lib := range redisLibs(k) {
			b.Run("lib="+lib, func(b *testing.B) {
				lk := openLocker(b, lib, addrs)
				hs := make([]held, conc)
				for i := range hs {
					ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
					h, err := lk.lock(ctx, fmt.Sprintf("ext-%s-%d", lib, i))
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					hs[i] = h
				}
				measure(b, conc, redisCPU(admins), func(ctx context.Context, i int) error { return hs[i].extend(ctx) })
				for _, h := range hs {
					ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
					_ = h.unlock(ctx)
					cancel()
				}
			})
		}
		b.Run("lib="+libFloor, func(b *testing.B) { benchFloor(b, addrs, conc, 1) })
	})
}

// forEachSetting runs f for K = 1, 3, 5 nodes and c = 1, 16 goroutines,
// with the nodes started once per K.
func forEachSetting(b *testing.B, f func(b *testing.B, k, conc int, addrs []string, admins []*redis.Client)) {
	for _, k := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("K=%d", k), func(b *testing.B) {
			addrs, admins := redisNodes(b, k)
			for _, conc := range []int{1, 16} {
				b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) { f(b, k, conc, addrs, admins) })
			}
		})
	}
}

func openLocker(b *testing.B, lib string, addrs []string) locker {
	b.Helper()
	lk, err := newLocker(lib, addrs, lockTTL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = lk.close() })
	return lk
}

// benchFloor measures `rounds` quorum rounds of bare PINGs per operation
// on raw TCP connections (no client library): each goroutine writes PING to
// every node, then reads the replies in order and counts the round done
// when a quorum has answered (the rest are read before the next round).
func benchFloor(b *testing.B, addrs []string, conc, rounds int) {
	conns := make([][]*bufio.ReadWriter, conc)
	for i := range conns {
		for _, a := range addrs {
			c, err := net.Dial("tcp", a)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.Close() })
			conns[i] = append(conns[i], bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c)))
		}
	}
	measure(b, conc, nil, func(ctx context.Context, i int) error {
		for r := 0; r < rounds; r++ {
			if err := pingRound(conns[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// pingRound sends PING on every connection and reads every reply.
func pingRound(conns []*bufio.ReadWriter) error {
	for _, c := range conns {
		if _, err := c.WriteString("PING\r\n"); err != nil {
			return err
		}
		if err := c.Flush(); err != nil {
			return err
		}
	}
	for _, c := range conns {
		line, err := c.ReadString('\n')
		if err != nil {
			return err
		}
		if line != "+PONG\r\n" {
			return fmt.Errorf("PING: %q", line)
		}
	}
	return nil
}

// BenchmarkTick decides one tick of 10,000 jobs on 5 nodes: lease's
// TryAcquireBatch with epochs and fencing (one pipelined round per node),
// against the floor of one raw pipelined SET NX PX per key and node, done
// when a quorum of nodes answered its whole pipeline. Reported per tick,
// with the servers' CPU per key.
func BenchmarkTick(b *testing.B) {
	const keys = 10000
	addrs, admins := redisNodes(b, 5)
	urls := make([]string, len(addrs))
	for i, a := range addrs {
		urls[i] = "redis://" + a
	}
	// round numbers the ticks across the runs of a sub-benchmark (the
	// testing package calls it again with a larger b.N), so that every
	// tick has its own keys.
	round := 0
	for _, lib := range []string{libLease, libLeaseNoFence, libFloor} {
		b.Run("lib="+lib, func(b *testing.B) {
			var tick func(ctx context.Context, n int) error
			if lib == libFloor {
				tick = floorTick(b, addrs, keys)
			} else {
				tick = leaseTick(b, urls, lib == libLeaseNoFence, keys)
			}
			server := redisCPU(admins)
			s0 := server()
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				round++
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := tick(ctx, round)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(server()-s0)/float64(b.N*keys)/1e3, "server-cpu-µs/key")
		})
	}
}

func leaseTick(b *testing.B, urls []string, noFence bool, keys int) func(context.Context, int) error {
	opts := []redlock.Option{redlock.WithRestartGuard(time.Second), redlock.WithTimeout(opTimeout)}
	if noFence {
		opts = append(opts, redlock.WithoutFencing())
	}
	c, err := redlock.New(urls, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	epoch := time.Now().Unix()
	return func(ctx context.Context, n int) error {
		reqs := make([]lease.Request, keys)
		for i := range reqs {
			reqs[i] = lease.Request{Key: fmt.Sprintf("tick%d-job-%05d", n, i), TTL: 30 * time.Second, Epoch: epoch, Owner: "bench"}
		}
		for _, res := range c.TryAcquireBatch(ctx, reqs) {
			if res.Err != nil {
				return res.Err
			}
		}
		return nil
	}
}

func floorTick(b *testing.B, addrs []string, keys int) func(context.Context, int) error {
	clients := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		clients[i] = newClient(a)
		b.Cleanup(func() { _ = clients[i].Close() })
	}
	q := len(clients)/2 + 1
	return func(ctx context.Context, n int) error {
		done := make(chan error, len(clients))
		for _, c := range clients {
			go func() {
				pipe := c.Pipeline()
				for i := 0; i < keys; i++ {
					pipe.SetNX(ctx, fmt.Sprintf("{floor%d-job-%05d}:lock", n, i), "bench", 30*time.Second)
				}
				_, err := pipe.Exec(ctx)
				done <- err
			}()
		}
		ok := 0
		for range clients {
			if err := <-done; err != nil {
				return err
			}
			if ok++; ok == q {
				break
			}
		}
		return nil
	}
}
