package zookeeper

import (
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/zktest"
	"github.com/leasecron/leasecron/lease"
)

// TestBeatDropsExpiredEntries: a heartbeat entry that expired is dropped
// from the beat znode by the next writer's second heartbeat (judged after
// its first, dropped at its second), and is never read as live meanwhile.
// Control: after the first heartbeat it is still in the znode, so the
// check does see an entry left behind.
func TestBeatDropsExpiredEntries(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 1)
	a, other := open(t, e.Addrs(), 6*time.Second), open(t, e.Addrs(), 6*time.Second)
	beat := func(b *Backend, name string, v int64, ttl time.Duration) lease.BeatResult {
		t.Helper()
		r := b.Beat(ctxT(t, 10*time.Second), lease.Beat{Space: "hosts",
			Entry: lease.Entry{Name: name, Version: v, Data: []byte(name), TTL: ttl}, Read: []string{"hosts"}})
		if r.PutErr != nil || r.ReadErr != nil {
			t.Fatalf("Beat of %s: put %v, read %v", name, r.PutErr, r.ReadErr)
		}
		return r
	}
	inZnode := func(name string) bool {
		t.Helper()
		ra, err := a.readBeats(ctxT(t, 10*time.Second), a.beatPath("hosts"))
		if err != nil {
			t.Fatal(err)
		}
		_, ok := ra.recs[name]
		return ok
	}
	beat(other, "short", 1, 300*time.Millisecond)
	time.Sleep(time.Second)
	for v := int64(1); v <= 2; v++ {
		if l := beat(a, "h1", v, time.Minute).Lists[0]; len(l) != 1 || l[0].Name != "h1" {
			t.Errorf("heartbeat %d read %+v, want h1 alone (short expired)", v, l)
		}
		if v == 1 && !inZnode("short") {
			t.Errorf("control: the expired entry left the znode at the first heartbeat after its expiry")
		}
	}
	if inZnode("short") {
		t.Errorf("the expired entry is still in the beat znode after two heartbeats of another host")
	}
}
