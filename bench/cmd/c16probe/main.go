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
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/leasecron/leasecron/bench/internal/probe"
	"github.com/leasecron/leasecron/lease"
)

const (
	workers = 16
	runFor  = 2 * time.Second
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: c16probe PORT")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "c16probe:", err)
		os.Exit(1)
	}
}

// loop is one client's Acquire+Release on the key of worker i.
type loop func(i int) error

func run(port string) error {
	srv, err := probe.StartRedis(port)
	if err != nil {
		return err
	}
	defer srv.Process.Kill()
	ctx := context.Background()
	addr := "127.0.0.1:" + port
	admin := probe.NewClient(addr)
	defer admin.Close()

	newLease := func() (loop, error) {
		c, err := lease.New([]string{"redis://" + addr}, lease.WithRestartGuard(time.Second))
		if err != nil {
			return nil, err
		}
		_ = c.Warm(ctx)
		return func(i int) error {
			l, err := c.Acquire(ctx, lease.Request{Key: fmt.Sprint("k", i), TTL: 10 * time.Second, Owner: "bench"})
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}, nil
	}
	newRedislock := func() (loop, error) {
		rl := redislock.New(probe.NewClient(addr))
		return func(i int) error {
			l, err := rl.Obtain(ctx, fmt.Sprint("r", i), 10*time.Second, nil)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}, nil
	}
	measure := func(name string, clients int, mk func() (loop, error)) error {
		loops := make([]loop, clients)
		for c := range loops {
			if loops[c], err = mk(); err != nil {
				return err
			}
		}
		var ops atomic.Int64
		var failed atomic.Value
		before := probe.Read(ctx, admin)
		stop := time.Now().Add(runFor)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					if err := loops[w%clients](w); err != nil {
						failed.Store(err)
						return
					}
					ops.Add(1)
				}
			}()
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Printf("%s: %s\n", name, probe.Rate(before, probe.Read(ctx, admin), int(ops.Load())))
		return nil
	}
	// The first lease client's first round writes the node's data marker;
	// the node votes once the marker is older than the restart guard.
	if _, err := newLease(); err != nil {
		return err
	}
	time.Sleep(1200 * time.Millisecond)
	for range 2 {
		for _, m := range []struct {
			name    string
			clients int
			mk      func() (loop, error)
		}{
			{"lease, 1 client", 1, newLease},
			{"lease, 2 clients", 2, newLease},
			{"lease, 4 clients", 4, newLease},
			{"bsm/redislock", 1, newRedislock},
		} {
			if err := measure(m.name, m.clients, m.mk); err != nil {
				return err
			}
		}
	}
	return nil
}
