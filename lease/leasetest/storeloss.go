package leasetest

import (
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// testStoreReadsAfterDataLoss: an entry (a pause flag) and a log record
// are written, then a quorum of servers is killed and restarted (with
// whatever data their store keeps: a Redlock node comes back empty, a
// PostgreSQL, etcd or ZooKeeper server with its data). Until one TTL after
// the kill (the Redlock clients' restart guard) every Get, List and Log
// that returns is the written value or an error, never a silent absence:
// a scheduler must not read a paused job as not paused. After Ready, a
// value written again is read back.
func testStoreReadsAfterDataLoss(t *testing.T, s *suite) {
	b := s.open(t)
	space := s.key(t)
	at := time.Now().Truncate(time.Millisecond)
	if err := b.Put(ctx(t, liveness), space, lease.Entry{Name: "paused", Version: 1, Data: []byte("yes")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ctx(t, liveness), space, lease.Record{ID: "r1", At: at, Data: []byte("x")}, 5); err != nil {
		t.Fatal(err)
	}
	f := s.faults(t)
	t0 := time.Now()
	n := b.Quorum()
	if answersAsOne(b) {
		n = s.h.Servers/2 + 1 // an ensemble that answers as one: a majority of it
	}
	lost := s.all()[:n]
	f.kill(lost...)
	for _, i := range lost {
		s.h.Restart(t, i)
		delete(f.down, i)
	}
	end := t0.Add(s.h.TTL)
	reads, silent := 0, 0
	check := func(what string, present bool, err error) {
		t.Helper()
		if !time.Now().Before(end) {
			return
		}
		reads++
		if err == nil && !present {
			silent++
			t.Errorf("%s %s after servers %v restarted: absent, without an error", what, time.Since(t0).Round(time.Millisecond), lost)
		}
	}
	for time.Now().Before(end) {
		e, ok, err := b.Get(ctx(t, s.h.TTL), space, "paused")
		check("Get", ok && string(e.Data) == "yes", err)
		es, err := b.List(ctx(t, s.h.TTL), space)
		check("List", len(es) == 1 && es[0].Name == "paused", err)
		rs, err := b.Log(ctx(t, s.h.TTL), space, 5)
		check("Log", len(rs) == 1 && rs[0].ID == "r1", err)
		br := lease.DoBeat(ctx(t, s.h.TTL), b, lease.Beat{Space: space + ".hb",
			Entry: lease.Entry{Name: "h1", Version: time.Now().UnixNano(), TTL: time.Minute}, Read: []string{space}})
		check("Beat", br.ReadErr == nil && len(br.Lists[0]) == 1 && br.Lists[0][0].Name == "paused", br.ReadErr)
		time.Sleep(lease.Jitter(20 * time.Millisecond))
	}
	t.Logf("%d reads within %s of the kill of servers %v, %d answered absent", reads, s.h.TTL, lost, silent)
	s.h.ready(t)
	if err := b.Put(ctx(t, liveness), space, lease.Entry{Name: "paused", Version: 2, Data: []byte("again")}); err != nil {
		t.Fatalf("Put after Ready: %v", err)
	}
	if e, ok, err := b.Get(ctx(t, liveness), space, "paused"); err != nil || !ok || string(e.Data) != "again" {
		t.Errorf("Get after Ready and a rewrite: %+v, %v, %v", e, ok, err)
	}
}
