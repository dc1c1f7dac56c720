package zookeeper

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/zktest"
	"github.com/leasecron/leasecron/lease"
)

// TestBeatWatchesSpaces: a heartbeat that reads the pause flags and the
// hosts costs the server two requests once the spaces are watched (the
// beat znode's read and write; five when read afresh: the control), and
// still sees every write another client made before it: a flag updated
// and one added, a heartbeat written into the flags' beat znode, an entry
// znode in the hosts' space, and a flag added while the heartbeat's
// connection was down. Control: a client that ignores its watches misses
// them.
func TestBeatWatchesSpaces(t *testing.T) {
	e := zktest.Start(t, 1)
	for _, c := range []struct {
		name  string
		setup func(*Backend)
		// maxPerBeat and minPerBeat bound the requests per heartbeat;
		// stale says the changes are missed.
		maxPerBeat, minPerBeat float64
		stale                  bool
	}{
		{name: "watched", maxPerBeat: 2.5},
		{name: "NegativeControlReadAfresh", setup: setNoWatchedSpaces, minPerBeat: 4.5},
		{name: "NegativeControlIgnoreWatches", setup: setIgnoreWatches, stale: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := "/watch" + fmt.Sprint(time.Now().UnixNano())
			cfg := Config{Servers: e.Addrs(), Root: root, Timeout: time.Second, SessionTimeout: 30 * time.Second}
			b, err := openWith(ctxT(t, 30*time.Second), cfg, c.setup)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			other, err := Open(ctxT(t, 30*time.Second), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = other.Close() })
			put := func(space, name string, v int64, data string) {
				t.Helper()
				if err := other.Put(ctxT(t, 10*time.Second), space, lease.Entry{Name: name, Version: v, Data: []byte(data)}); err != nil {
					t.Fatal(err)
				}
			}
			put("flags", "job-a", 1, "paused")
			v := int64(0)
			beat := func() lease.BeatResult {
				t.Helper()
				v++
				r := b.Beat(ctxT(t, 10*time.Second), lease.Beat{Space: "hosts",
					Entry: lease.Entry{Name: "h1", Version: v, Data: []byte("h1"), TTL: time.Minute}, Read: []string{"hosts", "flags"}})
				if r.PutErr != nil || r.ReadErr != nil {
					t.Fatalf("Beat v%d: put %v, read %v", v, r.PutErr, r.ReadErr)
				}
				return r
			}
			beat()
			beat()
			before, ok1 := e.Servers[0].Stat("zk_packets_received")
			const n = 20
			for range n {
				beat()
			}
			after, ok2 := e.Servers[0].Stat("zk_packets_received")
			if !ok1 || !ok2 {
				t.Fatal("the server did not say how many packets it received (mntr)")
			}
			perBeat := float64(after-before) / n
			t.Logf("%.2f requests per heartbeat", perBeat)
			if c.maxPerBeat > 0 && perBeat > c.maxPerBeat {
				t.Errorf("%.2f requests per heartbeat, want at most %.1f", perBeat, c.maxPerBeat)
			}
			if perBeat < c.minPerBeat {
				t.Errorf("%.2f requests per heartbeat, want at least %.1f: the count cannot tell", perBeat, c.minPerBeat)
			}

			put("flags", "job-a", 2, "resumed")
			put("flags", "job-b", 1, "paused")
			put("hosts", "h3", 1, "h3")
			if r := other.Beat(ctxT(t, 10*time.Second), lease.Beat{Space: "flags",
				Entry: lease.Entry{Name: "beat-flag", Version: 1, Data: []byte("b"), TTL: time.Minute}}); r.PutErr != nil {
				t.Fatal(r.PutErr)
			}
			want := "hosts [h1 h3], flags [beat-flag job-a=resumed job-b]"
			if got := lists(beat()); got != want && !c.stale {
				t.Errorf("after another client's writes the heartbeat read %s, want %s", got, want)
			} else if c.stale && got == want {
				t.Errorf("control: a client that ignores its watches read every change: %s", got)
			}

			// A flag written while the connection is down, seen by the
			// first heartbeat that gets through.
			if cur := b.cur.Load(); cur != nil {
				_ = cur.Close()
			}
			put("flags", "job-c", 1, "paused")
			var r lease.BeatResult
			for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				v++
				r = b.Beat(ctxT(t, 10*time.Second), lease.Beat{Space: "hosts",
					Entry: lease.Entry{Name: "h1", Version: v, Data: []byte("h1"), TTL: time.Minute}, Read: []string{"hosts", "flags"}})
				if r.PutErr == nil && r.ReadErr == nil || time.Now().After(end) {
					break
				}
			}
			want = "hosts [h1 h3], flags [beat-flag job-a=resumed job-b job-c]"
			if got := lists(r); got != want && !c.stale {
				t.Errorf("after a reconnect the heartbeat read %s, want %s", got, want)
			}
		})
	}
}

// lists writes a Beat's reads of hosts and flags as "hosts [...], flags
// [...]", with the data of job-a.
func lists(r lease.BeatResult) string {
	if len(r.Lists) != 2 {
		return fmt.Sprintf("%d spaces", len(r.Lists))
	}
	names := func(l []lease.Entry) []string {
		var out []string
		for _, e := range l {
			if e.Name == "job-a" {
				out = append(out, e.Name+"="+string(e.Data))
				continue
			}
			out = append(out, e.Name)
		}
		return out
	}
	return fmt.Sprintf("hosts %v, flags %v", names(r.Lists[0]), names(r.Lists[1]))
}

// TestBeatDropsExpiredEntries: a heartbeat entry that expired is dropped
// from the beat znode by the next writer's second heartbeat (judged after
// its first, dropped at its second), and is never read as live meanwhile.
// Control: after the first heartbeat it is still in the znode, so the
// check does see an entry left behind.
func TestBeatDropsExpiredEntries(t *testing.T) {
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
