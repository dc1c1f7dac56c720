package leasetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// testHealth: while up, every server answers Health with Err nil, counts
// (Voting) and is named as in Servers(); a killed server reports an error
// under its name while the others stay healthy.
func testHealth(t *testing.T, s *suite) {
	b := s.open(t)
	names := b.Servers()
	// check asks Health until it shows server down (-1: none) failing
	// and the others healthy, within liveness (a loaded machine may miss
	// a health request's deadline), and reports the last answer.
	check := func(when string, down int) {
		t.Helper()
		var problems []string
		for deadline := time.Now().Add(liveness); ; time.Sleep(50 * time.Millisecond) {
			problems = problems[:0]
			st := b.Health(ctx(t, liveness))
			if len(st) != len(names) {
				t.Fatalf("%s: Health returned %d statuses for %d servers", when, len(st), len(names))
			}
			for i, ss := range st {
				if ss.Server != names[i] {
					t.Fatalf("%s: status %d names %q, want %q", when, i, ss.Server, names[i])
				}
				switch {
				case i == down && (ss.Err == nil || ss.Voting):
					problems = append(problems, fmt.Sprintf("killed server %s reports err %v, voting %v; want an error, not voting", ss.Server, ss.Err, ss.Voting))
				case i != down && (ss.Err != nil || !ss.Voting):
					problems = append(problems, fmt.Sprintf("server %s reports err %v, voting %v (at %s); want no error, voting", ss.Server, ss.Err, ss.Voting, ss.VotingAt))
				case i == down:
					t.Logf("%s: %s: %v", when, ss.Server, ss.Err)
				}
			}
			if len(problems) == 0 || time.Now().After(deadline) {
				break
			}
		}
		for _, p := range problems {
			t.Errorf("%s: %s", when, p)
		}
	}
	check("all up", -1)
	last := s.h.Servers - 1
	f := s.faults(t)
	f.kill(last)
	check("one killed", last)
	f.heal()
	check("restarted", -1)
}

// testRefusalNamesDownServers: with one server down a held key is still
// refused as held (when the rest form a quorum); with too few servers
// left, an acquisition of a free key is refused with ErrNoQuorum and its
// NodeErrs name every dead server; with all down, Inspect's error names
// every server. After the servers come back, acquisitions succeed.
func testRefusalNamesDownServers(t *testing.T, s *suite) {
	bA, bB := s.open(t), s.open(t)
	names := bB.Servers()
	q := bB.Quorum()
	held := s.key(t, "held")
	mustAcquire(t, bA, lease.Request{Key: held, TTL: s.h.TTL, Owner: "A"})
	f := s.faults(t)

	f.kill(0)
	if s.h.Servers-1 >= q {
		re, err := refusal(t, "held key, one server down", func() (lease.Lease, error) {
			return tryOnce(t, bB, lease.Request{Key: held, TTL: s.h.TTL, Owner: "B"})
		}, lease.ErrHeld)
		// A Redlock lease may have been granted by a bare quorum that
		// included the dead server: the survivors then hold it on fewer.
		if re.Holder != "A" || re.HolderNodes < 1 {
			t.Errorf("held key, one server down: holder %q on %d servers, want A", re.Holder, re.HolderNodes)
		}
		// The refusal may be decided before the dead server's error
		// arrives, so naming it is not required here.
		t.Logf("held key, one server down: %v", err)
	}

	// Too few servers left for a quorum.
	dead := s.all()[:s.h.Servers-q+1]
	f.kill(dead...)
	free := s.key(t, "free")
	got, err := tryOnce(t, bB, lease.Request{Key: free, TTL: s.h.TTL, Owner: "B"})
	re := refused(t, "free key, no quorum", got, err, lease.ErrNoQuorum)
	for _, i := range dead {
		if !namesServer(re.NodeErrs, names[i]) || !strings.Contains(err.Error(), names[i]) {
			t.Errorf("refusal without quorum does not name dead server %s: %v", names[i], err)
		}
	}
	t.Logf("free key, %d of %d servers down: %v", len(dead), s.h.Servers, err)

	f.kill(s.all()...)
	_, err = bB.Inspect(ctx(t, liveness), held)
	if err == nil {
		t.Errorf("Inspect with every server down succeeded")
	} else {
		for _, n := range names {
			if !strings.Contains(err.Error(), n) {
				t.Errorf("Inspect's error does not name server %s: %v", n, err)
			}
		}
	}
	f.heal()
	release(mustAcquire(t, bB, lease.Request{Key: free, TTL: s.h.TTL, Owner: "B after restart"}))
}

// fencingHolders is how many holders in a row FencingAcrossRestarts
// checks.
const fencingHolders = 1000

// testFencingAcrossRestarts: 1,000 holders in a row, from two clients,
// get strictly increasing fencing tokens, while servers are killed and
// restarted (with whatever data their store keeps) three times, each
// time while a lease is held: once server 0, once the last server, once
// all of them.
func testFencingAcrossRestarts(t *testing.T, s *suite) {
	bs := []lease.Backend{s.open(t), s.open(t)}
	k := s.key(t)
	restarts := map[int][]int{
		fencingHolders / 4:     {0},
		fencingHolders / 2:     {s.h.Servers - 1},
		3 * fencingHolders / 4: s.all(),
	}
	f := s.faults(t)
	var prev int64
	prevOwner := ""
	t0 := time.Now()
	for i := range fencingHolders {
		owner := "holder " + itoa(i)
		l := mustAcquire(t, bs[i%2], lease.Request{Key: k, TTL: s.h.TTL, Owner: owner})
		if i > 0 && l.Fence() <= prev {
			t.Fatalf("%s got fence %d, not above %d of the earlier %s", owner, l.Fence(), prev, prevOwner)
		}
		prev, prevOwner = l.Fence(), owner
		if servers, ok := restarts[i]; ok {
			r0 := time.Now()
			f.kill(servers...)
			f.heal()
			t.Logf("%s: restarted servers %v while %s held fence %d, ready after %s", time.Since(t0).Round(time.Millisecond), servers, owner, prev, time.Since(r0).Round(time.Millisecond))
		}
		release(l)
	}
	t.Logf("%d holders with increasing fences in %s", fencingHolders, time.Since(t0).Round(time.Millisecond))
}
