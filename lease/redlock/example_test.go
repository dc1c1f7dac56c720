package redlock_test

// The examples need three Redis servers on the given ports, so they are
// compiled but not run by `go test` (they have no "Output:" comment); the
// tests in this package run the same calls against real redis-server
// processes.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

func ExampleClient_Acquire() {
	c, err := redlock.New([]string{
		"redis://127.0.0.1:6379/0",
		"redis://127.0.0.1:6380/0",
		"redis://127.0.0.1:6381/0",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Acquire(ctx, lease.Request{Key: "billing", TTL: 30 * time.Second, Owner: "host=web1"})
	var refused *lease.RefusedError
	switch {
	case errors.Is(err, lease.ErrHeld) && errors.As(err, &refused):
		fmt.Printf("held by %s, free in %s\n", refused.Holder, refused.HolderTTL)
		return
	case err != nil:
		log.Fatal(err) // ErrNoQuorum: too few nodes answered; the error names them
	}
	defer l.Release(context.Background())

	// Work protected by the lease must end before l.ValidUntil(); pass
	// l.Fence() to downstream stores so they reject older holders.
	fmt.Println("fencing token", l.Fence(), "valid for", time.Until(l.ValidUntil()).Round(time.Second))
}

func ExampleClient_Hold() {
	c, err := redlock.New([]string{
		"redis://127.0.0.1:6379/0",
		"redis://127.0.0.1:6380/0",
		"redis://127.0.0.1:6381/0",
	}, redlock.WithRetry(redlock.LinearBackoff(500*time.Millisecond)))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// One run of a job for tick 1700000000: the epoch makes it run once.
	l, err := c.Acquire(context.Background(), lease.Request{
		Key: "inventory-sync", TTL: 30 * time.Second, Epoch: 1700000000, Owner: "host=web1",
	})
	if errors.Is(err, lease.ErrEpochDone) {
		fmt.Println("tick already done")
		return
	} else if err != nil {
		log.Fatal(err)
	}

	// Renew every TTL/3 until the work is done; Ctx is cancelled before
	// the validity ends if the lease cannot be kept.
	h := c.Hold(l, lease.MaxLifetime(10*time.Minute))
	if err := doWork(h.Ctx()); err != nil {
		// Lost (h.Err() wraps lease.ErrLost) or failed: give the tick up
		// without completing it, so another host can take it over.
		_ = h.Release(context.Background())
		log.Fatal(err, h.Err())
	}
	// Mark the tick completed on a quorum, then release.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Complete(ctx); err != nil {
		log.Fatal(err)
	}
}

func doWork(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
		return nil
	}
}

func ExampleClient_TryAcquireBatch() {
	c, err := redlock.New([]string{"redis://127.0.0.1:6379/0"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// All jobs due at the same tick: one pipelined round per node.
	var reqs []lease.Request
	for _, job := range []string{"a", "b", "c"} {
		reqs = append(reqs, lease.Request{Key: job, TTL: time.Minute, Epoch: 1700000000})
	}
	for i, r := range c.TryAcquireBatch(context.Background(), reqs) {
		if r.Err != nil {
			fmt.Println(reqs[i].Key, "not mine:", r.Err)
			continue
		}
		fmt.Println(reqs[i].Key, "is mine, token", r.Lease.Fence())
		_ = r.Lease.Complete(context.Background())
	}
}

func ExampleRedact() {
	fmt.Println(redlock.Redact("redis://leasecron:s3cret@10.0.0.5:6379/0"))
	// Output: redis://leasecron:xxxxx@10.0.0.5:6379/0
}
