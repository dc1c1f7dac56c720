package zookeeper

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/zktest"
	"github.com/leasecron/leasecron/lease"
)

// TestStoreAcrossLeaderKill: a writer puts ever higher versions of an
// entry and appends a record per version while the leader is killed
// (SIGKILL) and another is elected. No acknowledged write is lost: after
// the election a reader on another session finds a version at least the
// last one acknowledged and every acknowledged record, once each, newest
// first; and writes are acknowledged again after the election.
func TestStoreAcrossLeaderKill(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 3)
	const session = 8 * time.Second
	w := open(t, e.Addrs(), session)
	r := open(t, e.Addrs(), session)
	ctx := ctxT(t, 3*time.Minute)
	const space, log, limit = "fault", "fault", 10_000
	base := time.Now().Truncate(time.Millisecond)

	var mu sync.Mutex
	lastAck := int64(0)
	acked := map[string]bool{}
	var ackedAfter int // acknowledged after the new leader was seen
	var elected bool
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v := int64(1); ; v++ {
			select {
			case <-stop:
				return
			default:
			}
			wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			putErr := w.Put(wctx, space, lease.Entry{Name: "k", Version: v, Data: []byte(strconv.FormatInt(v, 10))})
			id := "r" + strconv.FormatInt(v, 10)
			appErr := w.Append(wctx, log, lease.Record{ID: id, At: base.Add(time.Duration(v) * time.Millisecond), Data: []byte(id)}, limit)
			cancel()
			mu.Lock()
			if putErr == nil {
				lastAck = v
			}
			if appErr == nil {
				acked[id] = true
				if elected {
					ackedAfter++
				}
			}
			mu.Unlock()
			if putErr != nil || appErr != nil {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()

	time.Sleep(time.Second)
	old := e.WaitLeader(15 * time.Second)
	if old < 0 {
		t.Fatal("no leader")
	}
	e.Servers[old].Kill()
	end := time.Now().Add(60 * time.Second)
	for {
		if l := e.Leader(); l >= 0 && l != old {
			break
		}
		if time.Now().After(end) {
			close(stop)
			<-done
			t.Fatal("no new leader within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	elected = true
	mu.Unlock()
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		n := ackedAfter
		mu.Unlock()
		if n >= 20 {
			break
		}
		if time.Now().After(end) {
			close(stop)
			<-done
			t.Fatalf("only %d appends acknowledged in 60s after the election", n)
		}
	}
	close(stop)
	<-done

	mu.Lock()
	defer mu.Unlock()
	got, ok, err := r.Get(ctx, space, "k")
	if err != nil || !ok || got.Version < lastAck || string(got.Data) != strconv.FormatInt(got.Version, 10) {
		t.Errorf("after the leader's kill: entry %+v, %v, %v; want version >= %d, the last acknowledged", got, ok, err, lastAck)
	}
	recs, err := r.Log(ctx, log, limit)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, rec := range recs {
		if seen[rec.ID] {
			t.Errorf("record %s twice", rec.ID)
		}
		seen[rec.ID] = true
		if i > 0 && !rec.At.Before(recs[i-1].At) {
			t.Errorf("Log not newest first at %d: %s after %s", i, rec.At, recs[i-1].At)
		}
	}
	for id := range acked {
		if !seen[id] {
			t.Errorf("acknowledged record %s lost", id)
		}
	}
	t.Logf("last acknowledged version %d, read %d; %d records acknowledged, %d read", lastAck, got.Version, len(acked), len(recs))
}
