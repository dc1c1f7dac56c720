package scheduler

import (
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/etcdtest"
	"github.com/leasecron/leasecron/internal/testkit/zktest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/etcd"
)

// TestCompleteAfterLeaseRanOut: a run whose lease ran out before its end
// was recorded (renewals failed for a TTL while the history was written),
// with no other host taking the key, is completed by the daemon's finish
// path: the tick is marked done and another host's acquisition of it is
// refused with ErrEpochDone, so it does not run again. On etcd and
// ZooKeeper, whose lock key goes with the expired lease or session, such a
// completion used to be refused and the tick ran a second time.
func TestCompleteAfterLeaseRanOut(t *testing.T) {
	t.Parallel()
	for _, bc := range []struct {
		name  string
		start func(t *testing.T) func(t *testing.T) lease.Backend
	}{
		{"etcd", func(t *testing.T) func(t *testing.T) lease.Backend {
			c := etcdtest.Start(t)
			return func(t *testing.T) lease.Backend {
				b, err := etcd.Open(ctxFor(t, 30*time.Second), etcd.Config{Endpoints: c.Endpoints(), Timeout: 200 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = b.Close() })
				return b
			}
		}},
		{"zookeeper", func(t *testing.T) func(t *testing.T) lease.Backend {
			e := zktest.Start(t, 1)
			return func(t *testing.T) lease.Backend { return openZK(t, e.Addrs()) }
		}},
	} {
		t.Run(bc.name, func(t *testing.T) {
			open := bc.start(t)
			j := &Job{Name: "ranout", Schedule: "@hourly", Shell: "true", Deadline: time.Hour}
			cfg := tickConfig(t, nil, j)
			be, other := open(t), open(t)
			s, err := New(cfg, Options{Self: "/nonexistent/leasecron-supervisor", Backend: be})
			if err != nil {
				t.Fatal(err)
			}
			tick := time.Now().Truncate(time.Second)
			req := lease.Request{Key: s.key(j.Name), TTL: cfg.Lease.TTL, Epoch: tick.Unix(), EpochTime: tick, Owner: owner(tick.Unix(), s.host)}
			l, err := be.Acquire(ctxFor(t, 30*time.Second), req)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			// No renewals: wait until the store shows the key free.
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				in, err := other.Inspect(ctxFor(t, 10*time.Second), req.Key)
				if err == nil && in.HolderNodes == 0 && time.Now().After(l.ValidUntil()) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the key is still held 30 s on: %+v, %v", in, err)
				}
			}
			rec := RunRecord{Job: j.Name, Host: s.host, Tick: tick, Start: start, End: time.Now(), Result: "ok", Fence: l.Fence()}
			s.finish(j, l, nil, rec, true, false, s.log)

			in, err := other.Inspect(ctxFor(t, 10*time.Second), req.Key)
			if err != nil {
				t.Fatal(err)
			}
			if in.DoneEpoch != tick.Unix() {
				t.Errorf("done epoch %d after the run finished, want the tick %d: the tick would run again", in.DoneEpoch, tick.Unix())
			}
			again := req
			again.Owner = owner(tick.Unix(), "h2")
			res := other.TryAcquireBatch(ctxFor(t, 10*time.Second), []lease.Request{again})
			if !errors.Is(res[0].Err, lease.ErrEpochDone) {
				if res[0].Lease != nil {
					_ = res[0].Lease.Release(ctxFor(t, 5*time.Second))
				}
				t.Errorf("another host's acquisition of the finished tick: %v, want ErrEpochDone", res[0].Err)
			}
		})
	}
}
