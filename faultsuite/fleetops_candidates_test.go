package faultsuite

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasecron/leasecron/config"
)

// TestCandidatesHostKilledMidTick: 5 daemons; job c has candidates 2. The
// daemon running a tick of c is SIGKILLed mid-run: the tick is still run
// once to its end, taken over by another host after the killed run is
// dead, without overlap. Ten short jobs (candidates 2) run (most ticks,
// none twice), and their runs spread over the hosts: at least 3 of the 5
// ran some, none more than two thirds. A job with a 1.5s jitter starts each
// tick no sooner than its jitter.
func TestCandidatesHostKilledMidTick(t *testing.T) {
	t.Parallel()
	cfg := opsConfig("redis")
	cfg.Daemons = 5
	cfg.Jobs = []Job{{Name: "c", Every: 6 * time.Second, Sleep: 1500 * time.Millisecond, Deadline: 5 * time.Second,
		FleetKeys: FleetKeys{Candidates: 2}}}
	var spread []string
	for i := range 10 {
		name := fmt.Sprintf("s%d", i)
		spread = append(spread, name)
		cfg.Jobs = append(cfg.Jobs, Job{Name: name, Every: 2 * time.Second, Sleep: 100 * time.Millisecond, FleetKeys: FleetKeys{Candidates: 2}})
	}
	jit := config.Job{Name: "jittery", Jitter: 1500 * time.Millisecond}
	cfg.Jobs = append(cfg.Jobs, Job{Name: jit.Name, Every: 2 * time.Second, Sleep: 100 * time.Millisecond, FleetKeys: FleetKeys{Candidates: 2, Jitter: jit.Jitter}})
	f := startVoting(t, cfg)

	// Spread: three ticks of the ten jobs before any fault.
	from := f.ScheduleFrom().Add(time.Second)
	to := from.Add(6 * time.Second)
	h, from, to := awaitMostTicks(f, spread, 2*time.Second, from, to, 2, 10*time.Second, 10*time.Second)
	byHost := map[string]int{}
	total := 0
	for _, j := range spread {
		for _, tk := range Ticks(2*time.Second, from, to) {
			for _, r := range h.Tick(j, tk.Unix()) {
				byHost[r.Host]++
				total++
			}
		}
	}
	if len(byHost) < 3 {
		t.Errorf("the runs of 10 jobs over %d ticks went to %d of 5 hosts: %v", len(Ticks(2*time.Second, from, to)), len(byHost), byHost)
	}
	for host, n := range byHost {
		if 3*n > 2*total {
			t.Errorf("%s ran %d of %d runs: %v", host, n, total, byHost)
		}
	}
	t.Logf("spread of %d runs: %v", total, byHost)
	// Jitter: each tick starts no sooner than its jitter (a hash of job
	// and tick that every host computes alike), and still runs once.
	h, from, to = awaitMostTicks(f, []string{jit.Name}, 2*time.Second, from, to, 2, 10*time.Second, 10*time.Second)
	for _, tk := range Ticks(2*time.Second, from, to) {
		for _, r := range h.Tick(jit.Name, tk.Unix()) {
			if d := jit.JitterFor(tk); r.Start.Before(tk.Add(d)) {
				t.Errorf("tick %s of %s started %s after its tick, before its jitter %s: %s", fmtT(tk), jit.Name, r.Start.Sub(tk), d, r)
			} else {
				t.Logf("jitter %s, started %s after the tick", d.Round(time.Millisecond), r.Start.Sub(tk).Round(time.Millisecond))
			}
		}
	}

	// Kill the host of a tick of c mid-run.
	// A run that started on time (within 1s of its tick), so that the
	// takeover has until the deadline: up to 30s on a loaded machine.
	r1 := f.WaitRun("a fresh run of c", 30*time.Second, func(r Run) bool {
		return r.Job == "c" && !r.Ended() && !r.Term && time.Since(r.Start) < 500*time.Millisecond && r.Start.Sub(time.Unix(r.Tick, 0)) < time.Second
	})
	time.Sleep(time.Until(r1.Start.Add(300 * time.Millisecond)))
	d := f.Daemon(r1.Host)
	killAt := time.Now()
	d.Kill()
	r2 := f.WaitRun("takeover of the tick of c", 15*time.Second, func(r Run) bool {
		return r.Job == "c" && r.Tick == r1.Tick && r.Host != r1.Host && r.Ended()
	})
	h = f.CheckAudit()
	r1 = runOf(t, h, r1.PID)
	if r1.Ended() {
		t.Errorf("the killed host's run completed: %s", r1)
	}
	if rs := h.Tick("c", r1.Tick); len(rs) != 2 {
		t.Errorf("tick %s of c: %d runs, want the killed one and the takeover:\n%s", fmtT(time.Unix(r1.Tick, 0)), len(rs), (&History{Runs: rs}).String())
	}
	if !r2.Start.After(r1.Until()) {
		t.Errorf("takeover started before the killed run stopped:\n  %s\n  %s", r1, r2)
	}
	t.Logf("takeover %s after the kill:\n  %s\n  %s", r2.Start.Sub(killAt).Round(time.Millisecond), r1, r2)
	d.Start()
	next := r1.Tick + 6
	f.WaitRun("the next tick of c to complete", 15*time.Second, func(r Run) bool {
		return r.Job == "c" && r.Tick >= next && r.Succeeded()
	})
	f.CheckAudit()
}
