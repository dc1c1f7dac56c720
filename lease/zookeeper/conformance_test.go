package zookeeper

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/internal/testkit/zktest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/leasetest"
)

// conformanceTTL is the suite's lease TTL, which is also the clients'
// session timeout: long enough for the 10,000-key batches on a loaded
// machine (a lease can be valid no longer than its session).
const conformanceTTL = 8 * time.Second

// TestConformance runs the backend conformance suite against a real
// 3-server ensemble.
func TestConformance(t *testing.T) {
	t.Parallel() // beside the lane, see besideConformance
	e := zktest.Start(t, 3)
	leasetest.Run(t, leasetest.Harness{
		Name:    "zookeeper (3 servers)",
		Servers: 3,
		TTL:     conformanceTTL,
		Open: func(t testing.TB) lease.Backend {
			return open(t, e.Addrs(), conformanceTTL)
		},
		OpenLossy: func(t testing.TB) (lease.Backend, func(bool)) {
			g := netproxy.NewGroup(t, e.Addrs()...)
			b := open(t, g.Rewrite(e.Addrs()...), conformanceTTL)
			t.Cleanup(g.Cut)
			return b, g.DropReplies
		},
		// Batch clients: a longer timeout (a 10,000-key batch takes
		// seconds under the race detector on a loaded machine) and a
		// session as long as the suite's batch leases.
		OpenBatch: func(t testing.TB) lease.Backend {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b, err := Open(ctx, Config{Servers: e.Addrs(), Root: "/lctest", Timeout: 10 * time.Second, SessionTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
		// Close ends the session, and ZooKeeper deletes its ephemeral
		// locks with it.
		CloseFreesLeases: true,
		// -parallel is raised for the lane (lane_test.go): the light
		// subtests stay three at a time, as make test runs them.
		SteadyAtOnce: 3,
		Kill:         func(_ testing.TB, i int) { e.Servers[i].Kill() },
		Restart:      func(_ testing.TB, i int) { e.Servers[i].Start() },
		Pause:        func(_ testing.TB, i int) { e.Servers[i].Pause() },
		Serving:      e.Serving,
		Resume:       func(_ testing.TB, i int) { e.Servers[i].Resume() },
		Ready: func(t testing.TB) {
			e.WaitServing()
			// A session through a plain client first: an ensemble that
			// stalls after a fault fails here, apart from this client.
			for end := time.Now().Add(time.Minute); !e.Serving(); {
				if time.Now().After(end) {
					t.Fatalf("the ensemble does not serve a minute after every server answered; its figures:\n%s", e.Figures())
				}
				time.Sleep(200 * time.Millisecond)
			}
			b := open(t, e.Addrs(), conformanceTTL)
			end := time.Now().Add(30 * time.Second)
			for {
				l, err := b.Acquire(ctxT(t, 2*time.Second), lease.Request{Key: "ready", TTL: time.Second, Owner: "ready"})
				if err == nil {
					_ = l.Release(ctxT(t, 2*time.Second))
					return
				}
				if time.Now().After(end) {
					t.Fatalf("ensemble not ready: %v", err)
				}
			}
		},
		BadInputs: func(t testing.TB) []leasetest.BadInput {
			return badInputs(t, e)
		},
	})
}

// badInputs: an unreachable server, a malformed address, and a wrong
// digest password for a root another user owns.
func badInputs(t testing.TB, e *zktest.Ensemble) []leasetest.BadInput {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var out []leasetest.BadInput
	_, err := Open(ctx, Config{Servers: []string{"127.0.0.1:1"}, SessionTimeout: 2 * time.Second, Timeout: 200 * time.Millisecond})
	out = append(out, leasetest.BadInput{Name: "unreachable server", Err: err, MustName: "127.0.0.1:1"})
	_, err = Open(ctx, Config{Servers: []string{"zk1:99999"}})
	out = append(out, leasetest.BadInput{Name: "bad port", Err: err, MustName: "zk1:99999"})

	const secret = "s3cret-right"
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	owner, err := Open(ctx2, Config{Servers: e.Addrs(), Root: "/secured", Auth: "ops:" + secret, SessionTimeout: 2 * time.Second, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	if _, err := owner.Acquire(ctx2, lease.Request{Key: "job", TTL: time.Second, Owner: "ops"}); err != nil {
		t.Fatal(err)
	}
	intruder, err := Open(ctx2, Config{Servers: e.Addrs(), Root: "/secured", Auth: "ops:wrong-" + secret, SessionTimeout: 2 * time.Second, Timeout: 300 * time.Millisecond})
	if err == nil {
		defer intruder.Close()
		_, err = intruder.Acquire(ctx, lease.Request{Key: "job", TTL: time.Second, Owner: "intruder"})
		var re *lease.RefusedError
		if errors.As(err, &re) && re.NodeErrs == nil {
			err = errors.New("refused without naming the server: " + err.Error())
		}
	}
	out = append(out, leasetest.BadInput{Name: "wrong digest password", Err: err, MustName: "127.0.0.1", Secret: secret})
	return out
}
