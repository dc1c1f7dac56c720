package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// storeLossScenario puts a pause flag (an entry) and a log record on three
// nodes, restarts nodes 0 and 1 empty, and reads both back until shortly
// before the restart guard has passed since the restarts. It returns how
// many reads answered without the flag or the record and without an
// error (a silent empty answer), and how many failed naming a restarted
// node as too young to count.
func storeLossScenario(t *testing.T, guard time.Duration, ignoreGuard bool) (silent, young int, c *redlock.Client) {
	t.Helper()
	cl := start(t, 3)
	c = votingClient(t, cl.URLs(), redlock.WithRestartGuard(guard))
	if ignoreGuard {
		redlock.IgnoreGuardForStoreReads(c)
	}
	k, lk := key(t, "entries"), key(t, "log")
	ctx := ctxT(t, 60*time.Second)
	if err := c.PutEntry(ctx, k, redlock.Entry{Name: "paused", Version: 1, Data: []byte("yes")}); err != nil {
		t.Fatal(err)
	}
	if err := c.AppendLog(ctx, lk, redlock.Record{ID: "r1", At: time.Now(), Data: []byte("x")}, 10); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.GetEntry(ctx, k, "paused"); !ok || err != nil {
		t.Fatalf("Get before the restarts: %v, %v", ok, err)
	}
	t0 := time.Now() // the restarts, and the data births the client sees, come after
	cl.Nodes[0].Restart()
	cl.Nodes[1].Restart()
	count := func(empty bool, err error, done time.Time) {
		if !done.Before(t0.Add(guard)) {
			return // answered after the guard: the restarted nodes count again
		}
		switch {
		case err == nil && empty:
			silent++
		case err != nil && isYoung(err):
			young++
		}
	}
	for time.Now().Before(t0.Add(guard - 500*time.Millisecond)) {
		_, ok, err := c.GetEntry(context.Background(), k, "paused")
		count(!ok, err, time.Now())
		es, err := c.ListEntries(context.Background(), k)
		count(len(es) == 0, err, time.Now())
		rs, err := c.ReadLog(context.Background(), lk, 10)
		count(len(rs) == 0, err, time.Now())
		time.Sleep(50 * time.Millisecond)
	}
	return silent, young, c
}

// isYoung reports whether err has a NodeError for a node whose data is
// younger than the restart guard.
func isYoung(err error) bool {
	for _, ne := range nodeErrors(err) {
		if errors.Is(ne, lease.ErrRestarted) {
			return true
		}
	}
	return false
}

// TestStoreReadsAfterDataLoss: after two of three nodes restarted empty, a
// read of a pause flag, a space or a log fails (no quorum of nodes whose
// data is older than the restart guard) instead of answering "not paused";
// once the guard has passed and the values are written again, reads work.
func TestStoreReadsAfterDataLoss(t *testing.T) {
	t.Parallel()
	guard := 5 * time.Second
	silent, young, c := storeLossScenario(t, guard, false)
	if silent > 0 {
		t.Fatalf("%d reads answered empty inside the restart guard", silent)
	}
	if young == 0 {
		t.Fatal("no read failed naming a restarted node as too young to count")
	}
	k := key(t, "entries")
	var ok bool
	if !waitFor(guard+15*time.Second, func() bool {
		if err := c.PutEntry(context.Background(), k, redlock.Entry{Name: "paused", Version: 2, Data: []byte("yes")}); err != nil {
			return false
		}
		_, ok, _ = c.GetEntry(context.Background(), k, "paused")
		return ok
	}) {
		t.Fatal("the rewritten flag is not read back after the guard")
	}
}

// TestStoreReadsIgnoringGuardAnswerEmpty is the negative control: reads
// that count the restarted nodes answer "not paused".
func TestStoreReadsIgnoringGuardAnswerEmpty(t *testing.T) {
	t.Parallel()
	if silent, _, _ := storeLossScenario(t, 5*time.Second, true); silent == 0 {
		t.Fatal("negative control: no read answered empty")
	}
}
