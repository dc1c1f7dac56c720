package zookeeper

import (
	"slices"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/zktest"
	"github.com/leasecron/leasecron/lease"
)

// keptBeat is one heartbeat of b as the scheduler's: its entry into
// "hosts", reading "hosts" and "flags". It returns the names read in
// "flags".
func keptBeat(t *testing.T, b *Backend, v int64) []string {
	t.Helper()
	r := b.Beat(ctxT(t, 10*time.Second), lease.Beat{Space: "hosts",
		Entry: lease.Entry{Name: "h1", Version: v, Data: []byte("h1"), TTL: time.Minute}, Read: []string{"hosts", "flags"}})
	if r.PutErr != nil || r.ReadErr != nil {
		t.Fatalf("Beat %d: put %v, read %v", v, r.PutErr, r.ReadErr)
	}
	var names []string
	for _, e := range r.Lists[1] {
		names = append(names, e.Name)
	}
	return names
}

// putFlag has b put the entry name (version v, ttl) into "flags".
func putFlag(t *testing.T, b *Backend, name string, v int64, ttl time.Duration) {
	t.Helper()
	if err := b.Put(ctxT(t, 10*time.Second), "flags", lease.Entry{Name: name, Version: v, Data: []byte(name), TTL: ttl}); err != nil {
		t.Fatal(err)
	}
}

// TestIdleBeatIsTwoRequests: once a Beat read the spaces, a Beat that
// finds them unchanged sends the server two requests (the beat znode's
// read, and the multi that writes it and checks the spaces): ten of them
// add at most 20 to the server's packet count, and what else may fall
// in the window (go-zookeeper pings every third of the session timeout,
// 20 s here, whatever the traffic; a Beat asks the server's mode every
// 10 s). Control: the Beat after another client changed a space sends
// more (it reads the space again), so the count does see reads.
func TestIdleBeatIsTwoRequests(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 1)
	b, other := open(t, e.Addrs(), time.Minute), open(t, e.Addrs(), time.Minute)
	putFlag(t, other, "job-a", 1, 0)
	packets := func() int64 {
		t.Helper()
		n, ok := e.Servers[0].Stat("zk_packets_received")
		if !ok {
			t.Fatal("the server reports no zk_packets_received")
		}
		return n - 1 // this mntr's own packet
	}
	keptBeat(t, b, 1) // reads the spaces (and asks the server's health)
	before, start := packets(), time.Now()
	for v := int64(2); v <= 11; v++ {
		keptBeat(t, b, v)
	}
	n, took := packets()-before-1, time.Since(start)
	others := 2*(1+int64(took/(20*time.Second))) + int64(took/(10*time.Second)) // pings of both clients, srvr
	if n > 20+others {
		t.Errorf("10 idle heartbeats sent %d requests in %s, want at most 2 each (and %d pings and srvr)", n, took.Round(time.Millisecond), others)
	} else {
		t.Logf("10 idle heartbeats sent %d requests in %s", n, took.Round(time.Millisecond))
	}
	putFlag(t, other, "job-b", 1, 0)
	before = packets()
	if got := keptBeat(t, b, 12); !slices.Equal(got, []string{"job-a", "job-b"}) {
		t.Errorf("the Beat after another client's Put read flags %v, want job-a and job-b", got)
	}
	if n := packets() - before - 1; n <= 2 {
		t.Errorf("control: the Beat after a change sent %d requests, as an idle one: the count cannot tell", n)
	} else {
		t.Logf("the Beat after a change sent %d requests", n)
	}
}

// TestKeptReadsFollowTheStore: a Beat returns what it kept of a space
// only while the space is unchanged: another client's entry and
// heartbeat in it are read, and a kept entry that expired since is no
// longer returned, though nothing was written.
func TestKeptReadsFollowTheStore(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 1)
	a, other := open(t, e.Addrs(), 6*time.Second), open(t, e.Addrs(), 6*time.Second)
	start := time.Now()
	putFlag(t, other, "short", 1, 5*time.Second)
	if got := keptBeat(t, a, 1); !slices.Equal(got, []string{"short"}) {
		t.Fatalf("first Beat read flags %v, want short", got)
	}
	putFlag(t, other, "job-a", 1, 0)
	if got := keptBeat(t, a, 2); !slices.Equal(got, []string{"job-a", "short"}) {
		t.Errorf("Beat after another client's Put read flags %v, want job-a and short", got)
	}
	r := other.Beat(ctxT(t, 10*time.Second), lease.Beat{Space: "flags",
		Entry: lease.Entry{Name: "beat-in-flags", Version: 1, TTL: time.Minute}, Read: []string{"flags"}})
	if r.PutErr != nil {
		t.Fatal(r.PutErr)
	}
	if got := keptBeat(t, a, 3); !slices.Equal(got, []string{"beat-in-flags", "job-a", "short"}) {
		t.Errorf("Beat after another client's heartbeat into flags read %v, want beat-in-flags, job-a and short", got)
	}
	time.Sleep(time.Until(start.Add(5500 * time.Millisecond))) // short expires
	if got := keptBeat(t, a, 4); !slices.Equal(got, []string{"beat-in-flags", "job-a"}) {
		t.Errorf("Beat after short expired read flags %v, want beat-in-flags and job-a", got)
	}
}

// TestNegativeControlKeptReadsWithoutSpaceVersion: a writer that leaves
// the space's version as it is (test switch) changes a space a Beat
// kept, and the Beat returns what it kept: the version is what tells.
func TestNegativeControlKeptReadsWithoutSpaceVersion(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 1)
	a := open(t, e.Addrs(), 6*time.Second)
	other, err := openWith(ctxT(t, 30*time.Second), Config{Servers: e.Addrs(), Root: "/lctest", Timeout: 600 * time.Millisecond, SessionTimeout: 6 * time.Second}, setNoSpaceVersion)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	putFlag(t, other, "job-a", 1, 0)
	keptBeat(t, a, 1)
	putFlag(t, other, "job-b", 1, 0)
	if got := keptBeat(t, a, 2); !slices.Equal(got, []string{"job-a"}) {
		t.Errorf("the Beat read flags %v, want job-a alone (job-b's writer left the space's version alone): the check cannot fail", got)
	}
}

// TestKeptReadOfAnotherWrittenSpace: one client's Beats that write
// different spaces share what they read. A read of the space a Beat
// wrote lacks the beat znode (that Beat knew it from its write), so a
// Beat that writes elsewhere reads the space's heartbeats afresh.
func TestKeptReadOfAnotherWrittenSpace(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 1)
	a := open(t, e.Addrs(), 6*time.Second)
	beat := func(space string, read ...string) lease.BeatResult {
		t.Helper()
		r := a.Beat(ctxT(t, 10*time.Second), lease.Beat{Space: space,
			Entry: lease.Entry{Name: "in-" + space, Version: 1, TTL: time.Minute}, Read: read})
		if r.PutErr != nil || r.ReadErr != nil {
			t.Fatalf("Beat into %s: put %v, read %v", space, r.PutErr, r.ReadErr)
		}
		return r
	}
	beat("hosts", "hosts")
	r := beat("other", "hosts")
	if l := r.Lists[0]; len(l) != 1 || l[0].Name != "in-hosts" {
		t.Errorf("a Beat into another space read hosts as %+v, want in-hosts (the heartbeat there)", l)
	}
}
