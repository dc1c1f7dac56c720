package mysql_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/mysqltest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/mysql"
)

// Sizes of the concurrent batch tests: 16 hosts' batches of overlapping
// keys (each batch a random half of the keys, in random order) at once.
const (
	hosts      = 16
	batchKeys  = 200
	batchPool  = 400
	maxRounds  = 8
	batchTTL   = 30 * time.Second
	batchLimit = 20 * time.Second // per-request timeout: no refusal for want of time
)

// concurrentBatches runs rounds of 16 concurrent TryAcquireBatch calls,
// each on a client of its own, and returns the errors that are not
// ErrHeld refusals (a deadlock shows up as one). Each round's keys are
// fresh rows made by a first round, so that every batch finds existing
// rows to lock. It stops early once stop says so.
func concurrentBatches(t *testing.T, isolation string, stop func([]error) bool, opts ...mysql.Option) []error {
	s := mysqltest.Start(t)
	dsn := s.DSN() + "?tx_isolation='" + isolation + "'"
	clients := make([]*mysql.Backend, hosts)
	for i := range clients {
		clients[i] = open(t, dsn, append([]mysql.Option{mysql.WithTimeout(batchLimit)}, opts...)...)
	}
	var errs []error
	for round := range maxRounds {
		keys := make([]string, batchPool)
		for i := range keys {
			keys[i] = fmt.Sprintf("r%d.k%03d", round, i)
		}
		// Make the rows exist (and free): one sorted batch, released.
		for _, res := range open(t, s.DSN(), mysql.WithTimeout(batchLimit)).TryAcquireBatch(ctxT(t), reqs(keys, "setup")) {
			if res.Err != nil {
				t.Fatalf("setup: %v", res.Err)
			}
			_ = res.Lease.Release(ctxT(t))
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for h, b := range clients {
			mine := make([]string, 0, batchKeys)
			for _, i := range rand.Perm(batchPool)[:batchKeys] {
				mine = append(mine, keys[i])
			}
			wg.Go(func() {
				<-start
				for _, res := range b.TryAcquireBatch(ctxT(t), reqs(mine, fmt.Sprintf("host%d", h))) {
					if res.Err != nil && !errors.Is(res.Err, lease.ErrHeld) {
						mu.Lock()
						errs = append(errs, res.Err)
						mu.Unlock()
						break // one per batch: the whole statement failed
					}
				}
			})
		}
		close(start)
		wg.Wait()
		if stop(errs) {
			break
		}
	}
	return errs
}

func reqs(keys []string, owner string) []lease.Request {
	out := make([]lease.Request, len(keys))
	for i, k := range keys {
		out[i] = lease.Request{Key: k, TTL: batchTTL, Owner: owner}
	}
	return out
}

func deadlocked(errs []error) bool {
	for _, err := range errs {
		if strings.Contains(err.Error(), "Deadlock") || strings.Contains(err.Error(), "1213") {
			return true
		}
	}
	return false
}

// TestConcurrentBatchesNoDeadlock: 16 hosts' batches of overlapping keys
// at once, rounds of them, under REPEATABLE READ and READ COMMITTED, with
// no retry of a deadlocked statement: every key is granted to one batch
// or refused as held, and no batch fails (each locks its rows in key
// order).
func TestConcurrentBatchesNoDeadlock(t *testing.T) {
	for name, level := range isolations {
		t.Run(name, func(t *testing.T) {
			errs := concurrentBatches(t, level, func([]error) bool { return false }, mysql.WithoutReconnect())
			if len(errs) > 0 {
				t.Fatalf("%d batches failed, first: %v", len(errs), errs[0])
			}
		})
	}
}

// TestConcurrentBatchesNoDeadlockNegative is its negative control: the
// same batches with their keys sent in request (random) order deadlock.
func TestConcurrentBatchesNoDeadlockNegative(t *testing.T) {
	errs := concurrentBatches(t, "REPEATABLE-READ", deadlocked, mysql.WithoutReconnect(), mysql.WithUnsortedBatches())
	if !deadlocked(errs) {
		t.Fatalf("negative control: no deadlock with unsorted keys in %d rounds (errors: %v); the control does not control", maxRounds, errs)
	}
	t.Logf("negative control: %d batches failed, e.g. %v", len(errs), errs[0])
}
