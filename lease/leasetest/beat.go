package leasetest

import (
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// testBeat: lease.DoBeat (a Beater's Beat where the backend has one)
// keeps what Put and List promise: the write is seen by the read of its
// own space in the same round and by another client, a lower version
// does not replace a higher one, each space read is the space's List,
// the servers' health is reported: by the first Beat, and then for
// every server or none (a backend may look less often than it beats),
// and another client's writes before a Beat are in its reads.
func testBeat(t *testing.T, s *suite) {
	b, other := s.open(t), s.open(t)
	hosts, flags := s.key(t, "hosts"), s.key(t, "flags")
	if err := other.Put(ctx(t, liveness), flags, lease.Entry{Name: "job-a", Version: 3, Data: []byte("paused")}); err != nil {
		t.Fatal(err)
	}
	if err := other.Put(ctx(t, liveness), hosts, lease.Entry{Name: "h2", Version: 1, Data: []byte("h2"), TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	beat := func(v int64, data string) lease.BeatResult {
		t.Helper()
		var r lease.BeatResult
		// The servers may not count for reads yet (a Redlock node
		// younger than its restart guard): retry until they do.
		deadline := time.Now().Add(liveness)
		for {
			r = lease.DoBeat(ctx(t, liveness), b, lease.Beat{Space: hosts,
				Entry: lease.Entry{Name: "h1", Version: v, Data: []byte(data), TTL: time.Minute}, Read: []string{hosts, flags}})
			if r.PutErr == nil && r.ReadErr == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if r.PutErr != nil || r.ReadErr != nil {
			t.Fatalf("Beat v%d: put %v, read %v", v, r.PutErr, r.ReadErr)
		}
		return r
	}
	check := func(r lease.BeatResult, wantData string) {
		t.Helper()
		if len(r.Lists) != 2 {
			t.Fatalf("Beat read %d spaces, want 2", len(r.Lists))
		}
		h := r.Lists[0]
		if len(h) != 2 || h[0].Name != "h1" || string(h[0].Data) != wantData || h[1].Name != "h2" {
			t.Errorf("Beat's read of its own space: %+v, want h1 (%q, its own write) and h2 sorted by name", h, wantData)
		}
		if f := r.Lists[1]; len(f) != 1 || f[0].Name != "job-a" || f[0].Version != 3 || string(f[0].Data) != "paused" {
			t.Errorf("Beat's read of the other space: %+v, want job-a v3", f)
		}
		if len(r.Health) != 0 && len(r.Health) != len(b.Servers()) {
			t.Errorf("Beat reported %d servers, want none or all %d", len(r.Health), len(b.Servers()))
		}
		for _, st := range r.Health {
			if st.Err != nil || st.Server == "" {
				t.Errorf("Beat: server %q reported %v, want it answered", st.Server, st.Err)
			}
		}
	}
	first := beat(10, "v10")
	if len(first.Health) == 0 {
		t.Error("the first Beat reported no server's health")
	}
	check(first, "v10")
	check(beat(5, "v5 (late)"), "v10") // a lower version is kept out
	if e, ok, err := other.Get(ctx(t, liveness), hosts, "h1"); err != nil || !ok || string(e.Data) != "v10" || e.Version != 10 {
		t.Errorf("another client's Get after the Beat: %+v, %v, %v; want v10", e, ok, err)
	}
	check(beat(11, "v11"), "v11")

	// Another client's writes made before a Beat are in its reads, though
	// the spaces were read before (a backend may keep what it read while
	// the store says nothing changed).
	if err := other.Put(ctx(t, liveness), flags, lease.Entry{Name: "job-a", Version: 4, Data: []byte("resumed")}); err != nil {
		t.Fatal(err)
	}
	if err := other.Put(ctx(t, liveness), flags, lease.Entry{Name: "job-b", Version: 1, Data: []byte("paused")}); err != nil {
		t.Fatal(err)
	}
	r := beat(12, "v12")
	if f := r.Lists[1]; len(f) != 2 || f[0].Name != "job-a" || f[0].Version != 4 || string(f[0].Data) != "resumed" || f[1].Name != "job-b" {
		t.Errorf("Beat's read of the other space after another client changed it: %+v, want job-a v4 resumed and job-b", f)
	}
}
