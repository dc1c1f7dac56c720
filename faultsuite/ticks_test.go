package faultsuite

import (
	"testing"
	"time"
)

// TestPauseSkipsMissedTicks: a lone daemon (@every 2s, deadline 1s, each
// run 1s) is SIGSTOPped for over 7 s between two runs and continued 1.3 s
// after a tick, so that the deadline of every tick it slept through has
// passed. From the jobs' own records (LEASECRON_TICK_UNIX and the time the
// job itself saw at its start): no run started at or after its tick's
// deadline, no tick it slept through ran, and the first tick after SIGCONT
// (0.7 s later) ran on time rather than being skipped as held by a late
// run of a missed tick.
func TestPauseSkipsMissedTicks(t *testing.T) {
	const every, deadline = 2 * time.Second, time.Second
	cfg := DefaultConfig()
	cfg.Nodes, cfg.Daemons = 3, 1
	cfg.Jobs = []Job{{Name: "tick", Every: every, Sleep: time.Second, Deadline: deadline}}
	f := startVoting(t, cfg)
	d := f.Daemons[0]

	// Pause between two runs, so that no run is cut short by the pause.
	last := f.WaitRun("a run that ended well before the next tick", 20*time.Second, func(r Run) bool {
		return r.Start.After(f.VotingAt) && r.Ended() &&
			time.Until(time.Unix(r.Tick, 0).Add(every)) > 300*time.Millisecond
	})
	pauseAt := time.Now()
	d.Pause()
	// Continue 1.3 s after the first tick at least 7 s into the pause:
	// that tick's deadline passed 0.3 s before, the next tick is 0.7 s on.
	e := int64(every / time.Second)
	slept := time.Unix((pauseAt.Add(7*time.Second).Unix()/e+1)*e, 0)
	resumeAt := slept.Add(1300 * time.Millisecond)
	onTime := slept.Add(every)
	time.Sleep(time.Until(resumeAt))
	d.Resume()
	t.Logf("paused %s at %s after %s; continued at %s; last tick slept through %s, on-time tick %s",
		d.Name, fmtT(pauseAt), last, fmtT(time.Now()), fmtT(slept), fmtT(onTime))

	f.WaitRun("the run of the tick after SIGCONT, or of a later one", 20*time.Second, func(r Run) bool {
		return r.Tick > onTime.Unix() || r.Tick == onTime.Unix() && r.Ended()
	})
	h := f.CheckSafety()
	ran := false
	for _, r := range h.Runs {
		tick := time.Unix(r.Tick, 0)
		if dl := tick.Add(deadline); !r.Start.Before(dl) {
			t.Errorf("run started %s after its tick's deadline: %s", r.Start.Sub(dl).Round(time.Millisecond), r)
		}
		if r.Tick > last.Tick && !tick.After(slept) {
			t.Errorf("a tick slept through ran: %s", r)
		}
		if r.Tick == onTime.Unix() {
			ran = true
		}
	}
	if !ran {
		t.Errorf("the on-time tick %s after SIGCONT did not run; runs:\n%s", fmtT(onTime), h)
	}
	if !d.LogContains("tick missed") {
		t.Errorf("the daemon did not log the ticks it missed")
	}
}
