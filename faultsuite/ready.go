package faultsuite

import (
	"bytes"
	"os"
	"time"
)

// harnessStart begins the line the harness writes into a daemon's log
// each time it starts the daemon.
const harnessStart = "### harness: starting "

// Ready reports whether the daemon, since the harness last started it, has
// logged that its scheduler runs ("ready": config loaded, store opened,
// about to fire ticks).
func (d *Daemon) Ready() bool {
	b, err := os.ReadFile(d.LogPath)
	if err != nil {
		return false
	}
	if i := bytes.LastIndex(b, []byte(harnessStart)); i >= 0 {
		b = b[i:]
	}
	return bytes.Contains(b, []byte(`"msg":"ready"`))
}

// WaitReady waits until every running daemon is Ready and returns when
// that was seen: the first moment from which the fleet must run every
// tick, once its nodes vote (VotingAt). A daemon's start-up time is the
// machine's, not the system's: on a loaded machine a race-enabled binary
// can take seconds, and a tick before it is ready is no tick it should
// have run. It fails the test if they are not ready within timeout.
func (f *Fleet) WaitReady(timeout time.Duration) time.Time {
	f.t.Helper()
	end := time.Now().Add(timeout)
	for {
		all := true
		for _, d := range f.Daemons {
			if d.Running() && !d.Ready() {
				all = false
				break
			}
		}
		if all {
			return time.Now()
		}
		if time.Now().After(end) {
			f.t.Fatalf("daemons not ready within %s", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ScheduleFrom is the first moment from which the fleet must run every
// tick: when its nodes vote (VotingAt) and every daemon started so far is
// ready — on Redis, ready plus the restart guard (the TTL) and the same
// second of margin as VotingAt, as a node the daemons meet without a data
// marker (every node of a fresh fleet) votes only a guard after the first
// daemon wrote one. The first call waits for that (up to readyTimeout)
// and later calls return the same moment. Call it after StartAll.
func (f *Fleet) ScheduleFrom() time.Time {
	f.t.Helper()
	if f.scheduleFrom.IsZero() {
		ready := f.WaitReady(readyTimeout)
		if f.Redis != nil {
			ready = ready.Add(f.cfg.TTL + time.Second)
		}
		f.scheduleFrom = ready
		if f.scheduleFrom.Before(f.VotingAt) {
			f.scheduleFrom = f.VotingAt
		}
	}
	return f.scheduleFrom
}

// readyTimeout bounds the wait for the daemons' start: seconds on a
// loaded machine, with a margin of an order of magnitude.
const readyTimeout = time.Minute
