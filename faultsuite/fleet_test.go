package faultsuite

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// binDir holds the daemon and recorder, built at most once per test binary
// (on first use, so the oracle's own tests run without them).
var (
	binDir   string
	buildOne sync.Once
	built    Binaries
	buildErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "faultsuite-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultsuite:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binaries builds the daemon (with -race when the tests run with it) and
// the recorder once, and returns them.
func binaries(t *testing.T) Binaries {
	t.Helper()
	buildOne.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		built, buildErr = Build(ctx, binDir, raceEnabled)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// startVoting starts a fleet with cfg and waits until its nodes vote.
func startVoting(t *testing.T, cfg Config) *Fleet {
	t.Helper()
	f := New(t, binaries(t), cfg)
	f.StartAll()
	f.WaitVoting()
	return f
}

// freshRunInto waits (up to 15 s) for a run of job that started on time
// (within 1s of its tick) after the nodes vote and is still young, and
// returns it once it has been running for into, so the test can fault its
// host mid-job with the tick's deadline still ahead.
func freshRunInto(f *Fleet, job string, into time.Duration) Run {
	f.t.Helper()
	r := f.WaitRun("a fresh run of "+job, 15*time.Second, func(r Run) bool {
		return r.Job == job && r.Start.After(f.VotingAt) && !r.Ended() && !r.Term &&
			time.Since(r.Start) < 500*time.Millisecond && r.Start.Sub(time.Unix(r.Tick, 0)) < time.Second
	})
	time.Sleep(time.Until(r.Start.Add(into)))
	return r
}

// runOf returns the run with the given pid from h.
func runOf(t *testing.T, h *History, pid int) Run {
	t.Helper()
	for _, r := range h.Runs {
		if r.PID == pid {
			return r
		}
	}
	t.Fatalf("no run with pid %d in:\n%s", pid, h)
	return Run{}
}

// TestExactlyOnce: 3 daemons on 5 nodes, no faults: every tick of a 2 s
// job runs exactly once, to its end, runs never overlap, tokens increase.
func TestExactlyOnce(t *testing.T) {
	t.Parallel() // no faults: shares the machine with the other parallel fleets
	cfg := DefaultConfig()
	cfg.Jobs = []Job{{Name: "report", Every: 2 * time.Second, Sleep: 500 * time.Millisecond}}
	t.Logf("runs by host: %v", runQuietly(t, cfg))
}

// runQuietly runs a fleet with cfg's single job, every 2 s, without
// faults: every tick of 12 s (after the nodes vote) must run exactly once
// and the history must be safe. It returns the runs by host.
func runQuietly(t *testing.T, cfg Config) map[string]int {
	t.Helper()
	// These runs assert the schedule, not the machine's speed. The fault
	// runs' request timeouts (50-250 ms) tell a slow server from a live
	// one; a loaded 2-core machine (load 13 and more) answers slower than
	// that for seconds at a time, the store then rightly counts as down
	// and ticks are given up: the test would measure the machine. So the
	// fault-free runs use a 5 s TTL and the longest request timeout the
	// daemon's rules allow for it (under TTL/10).
	cfg.TTL, cfg.Timeout = 5*time.Second, 400*time.Millisecond
	job := cfg.Jobs[0].Name
	f := New(t, binaries(t), cfg)
	f.StartAll()
	from := f.ScheduleFrom().Add(3 * time.Second)
	t.Logf("daemons ready %s after the nodes vote", f.ScheduleFrom().Sub(f.VotingAt).Round(time.Millisecond))
	to := from.Add(12 * time.Second)
	h := f.AwaitTicks(job, 2*time.Second, from, to, true, 5*time.Second)
	f.CheckSafety()
	hosts := map[string]int{}
	for _, r := range h.Job(job) {
		hosts[r.Host]++
	}
	return hosts
}

// TestClockSkew: one daemon's clock lags by 1 s and one leads by 1 s.
// Short jobs are neither re-run by the lagging host nor run twice because
// the leading one fired early.
func TestClockSkew(t *testing.T) {
	t.Parallel() // no faults: shares the machine with the other parallel fleets
	cfg := DefaultConfig()
	cfg.Jobs = []Job{{Name: "short", Every: 2 * time.Second, Sleep: 300 * time.Millisecond}}
	cfg.Args = func(i int) []string {
		switch i {
		case 0:
			return []string{"--test-clock-offset=-1s"}
		case 1:
			return []string{"--test-clock-offset=1s"}
		}
		return nil
	}
	t.Logf("runs by host (h0 lags 1s, h1 leads 1s): %v", runQuietly(t, cfg))
}

// TestDaemonKillTakeover: the daemon running a job is SIGKILLed. The job is
// dead before the lease could have expired (its supervisor notices the
// daemon is gone), another host takes the tick over, and the runs do not
// overlap. The killed daemon comes back and the schedule goes on.
func TestDaemonKillTakeover(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Jobs = []Job{{Name: "long", Every: 5 * time.Second, Sleep: 1500 * time.Millisecond, Deadline: 4 * time.Second}}
	f := startVoting(t, cfg)

	r1 := freshRunInto(f, "long", 300*time.Millisecond)
	d := f.Daemon(r1.Host)
	killAt := time.Now()
	d.Kill()
	// The lease was last renewed before the kill, so its validity ends
	// before killAt + TTL: the job must be dead by then.
	took, gone := f.WaitGone(r1.PID, time.Until(killAt.Add(cfg.TTL)))
	if !gone {
		t.Fatalf("job pid %d of killed daemon %s still alive %s after the kill (ttl %s)", r1.PID, r1.Host, took, cfg.TTL)
	}
	t.Logf("job of SIGKILLed daemon dead %s after the kill", time.Since(killAt).Round(time.Millisecond))

	r2 := f.WaitRun("takeover of the tick by another host", 10*time.Second, func(r Run) bool {
		return r.Job == "long" && r.Tick == r1.Tick && r.Host != r1.Host
	})
	h := f.CheckSafety()
	r1 = runOf(t, h, r1.PID)
	if r1.Ended() {
		t.Errorf("killed run completed: %s", r1)
	}
	if !r1.Last.Before(killAt.Add(cfg.TTL)) {
		t.Errorf("killed run alive at %s, after its lease's validity (< %s): %s", fmtT(r1.Last), fmtT(killAt.Add(cfg.TTL)), r1)
	}
	if !r2.Start.After(r1.Until()) {
		t.Errorf("takeover started before the killed run stopped:\n  %s\n  %s", r1, r2)
	}
	t.Logf("takeover %s after the kill:\n  %s\n  %s", r2.Start.Sub(killAt).Round(time.Millisecond), r1, r2)

	d.Start()
	next := r1.Tick + int64(cfg.Jobs[0].Every/time.Second)
	f.WaitRun("the next tick to complete", 15*time.Second, func(r Run) bool {
		return r.Job == "long" && r.Tick >= next && r.Ended()
	})
	f.CheckSafety()
}

// pauseScenario waits for a fresh run of job and SIGSTOPs its daemon 200ms
// into it (see freshRunInto). It returns the run, when the pause started and the daemon; the
// caller resumes it.
func pauseScenario(t *testing.T, f *Fleet, job string) (r1 Run, pauseAt time.Time, d *Daemon) {
	r1 = freshRunInto(f, job, 200*time.Millisecond)
	d = f.Daemon(r1.Host)
	pauseAt = time.Now()
	d.Pause()
	t.Logf("paused %s at %s running %s", d.Name, fmtT(pauseAt), r1)
	return r1, pauseAt, d
}

// TestDaemonPauseLongerThanTTL: the daemon running a job is SIGSTOPped for
// longer than the TTL. Its supervisor kills the job (which ignores SIGTERM)
// before the lease's validity ends, another host takes the tick over without
// overlap, and after SIGCONT the daemon recovers and runs jobs again.
func TestDaemonPauseLongerThanTTL(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Jobs = []Job{{Name: "slow", Every: 6 * time.Second, Sleep: 3 * time.Second, Deadline: 5 * time.Second, IgnoreTerm: true}}
	f := startVoting(t, cfg)

	r1, pauseAt, d := pauseScenario(t, f, "slow")
	validBy := pauseAt.Add(cfg.TTL) // no renewal after the pause
	took, gone := f.WaitGone(r1.PID, time.Until(validBy))
	if !gone {
		t.Errorf("job pid %d of paused daemon still alive %s after the pause; lease validity ended by then", r1.PID, took)
	}
	r2 := f.WaitRun("takeover of the tick by another host", 10*time.Second, func(r Run) bool {
		return r.Job == "slow" && r.Tick == r1.Tick && r.Host != r1.Host
	})
	time.Sleep(time.Until(pauseAt.Add(cfg.TTL + time.Second)))
	d.Resume()
	t.Logf("resumed %s after %s", d.Name, time.Since(pauseAt).Round(time.Millisecond))

	h := f.CheckSafety()
	r1 = runOf(t, h, r1.PID)
	if r1.Ended() {
		t.Errorf("paused host's run completed: %s", r1)
	}
	if !r1.Last.Before(validBy) {
		t.Errorf("paused host's job alive at %s, after its lease's validity (< %s): %s", fmtT(r1.Last), fmtT(validBy), r1)
	}
	t.Logf("paused run:   %s (dead %s before validity bound)\ntakeover run: %s", r1, validBy.Sub(r1.Until()).Round(time.Millisecond), r2)

	// Recovery: once the takeover ended, stop the other daemons; the
	// resumed one must run the next ticks on its own.
	f.WaitRun("takeover run to end", 10*time.Second, func(r Run) bool { return r.PID == r2.PID && r.Ended() })
	if !d.Running() {
		t.Fatalf("daemon %s died after SIGCONT: %v", d.Name, d.ExitState())
	}
	for _, o := range f.Daemons {
		if o != d {
			o.Stop()
		}
	}
	f.WaitRun("a run by the resumed daemon", 20*time.Second, func(r Run) bool {
		return r.Job == "slow" && r.Host == d.Name && r.Tick > r1.Tick && r.Ended()
	})
	f.CheckSafety()
}

// TestMajorityNodesKilled: 3 of 5 nodes die while a job runs. The lease
// cannot be renewed, so the job is stopped before its validity ends, and
// nothing else runs without a quorum. When the nodes are back (empty) and
// have been up for a TTL, the schedule resumes.
func TestMajorityNodesKilled(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Jobs = []Job{{Name: "batch", Every: 6 * time.Second, Sleep: 4 * time.Second, Deadline: 5 * time.Second}}
	f := startVoting(t, cfg)

	r1 := freshRunInto(f, "batch", 300*time.Millisecond)
	killAt := time.Now()
	for _, n := range f.Redis.Nodes[:3] {
		n.Kill()
	}
	validBy := killAt.Add(cfg.TTL)
	took, gone := f.WaitGone(r1.PID, time.Until(validBy))
	if !gone {
		t.Errorf("job pid %d still alive %s after a majority of nodes died", r1.PID, took)
	}
	// Nothing runs without a quorum.
	time.Sleep(cfg.TTL + time.Second)
	h := f.CheckSafety()
	r1 = runOf(t, h, r1.PID)
	if r1.Ended() {
		t.Errorf("run without renewable lease completed: %s", r1)
	}
	if !r1.Last.Before(validBy) {
		t.Errorf("job alive at %s, after its lease's validity (< %s): %s", fmtT(r1.Last), fmtT(validBy), r1)
	}
	t.Logf("aborted run: %s (dead %s before the validity bound)", r1, validBy.Sub(r1.Until()).Round(time.Millisecond))
	for _, r := range h.Runs {
		if r.Start.After(killAt) {
			t.Errorf("a run started without a quorum: %s", r)
		}
	}

	restartAt := time.Now()
	for _, n := range f.Redis.Nodes[:3] {
		n.Restart()
	}
	f.WaitRun("a completed run after the nodes came back", cfg.TTL+3*cfg.Jobs[0].Every+5*time.Second, func(r Run) bool {
		return r.Job == "batch" && r.Start.After(restartAt) && r.Ended()
	})
	f.CheckSafety()
}

// TestSIGTERMTakeover: the daemon running a job gets SIGTERM. It stops the
// job after its (short) shutdown grace, exits 0, releases the lease without
// completing the tick, and another host takes the tick over.
func TestSIGTERMTakeover(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ShutdownGrace = 200 * time.Millisecond
	cfg.Jobs = []Job{{Name: "long", Every: 5 * time.Second, Sleep: 3 * time.Second, Deadline: 4 * time.Second}}
	f := startVoting(t, cfg)

	r1 := freshRunInto(f, "long", 300*time.Millisecond)
	d := f.Daemon(r1.Host)
	stopAt := time.Now()
	d.Stop() // fails the test unless it exits 0 in time
	t.Logf("%s stopped %s after SIGTERM", d.Name, time.Since(stopAt).Round(time.Millisecond))
	if _, gone := f.WaitGone(r1.PID, time.Second); !gone {
		t.Errorf("job pid %d outlived its stopped daemon", r1.PID)
	}
	r2 := f.WaitRun("takeover of the tick by another host", 10*time.Second, func(r Run) bool {
		return r.Job == "long" && r.Tick == r1.Tick && r.Host != r1.Host
	})
	h := f.CheckSafety()
	r1 = runOf(t, h, r1.PID)
	if r1.Ended() {
		t.Errorf("the stopped host's run completed although it was stopped 0.3s into a 3s job: %s", r1)
	}
	t.Logf("takeover %s after SIGTERM:\n  %s\n  %s", r2.Start.Sub(stopAt).Round(time.Millisecond), r1, r2)
}

// TestReload: SIGHUP with a broken config keeps the old schedule running
// (and says why in the log); a good config then adds a job that runs.
func TestReload(t *testing.T) {
	t.Parallel() // no faults: shares the machine with the other parallel fleets
	cfg := DefaultConfig()
	// No faults, so a node timeout a loaded machine meets (the TTL's
	// tenth is 200ms): with 50ms, no node answered either daemon for 2s
	// at load 15 and a tick of each job was given up at its deadline.
	cfg.Nodes, cfg.Daemons, cfg.Timeout = 3, 2, 150*time.Millisecond
	every := 2 * time.Second
	cfg.Jobs = []Job{{Name: "a", Every: every, Sleep: 200 * time.Millisecond}}
	f := startVoting(t, cfg)
	f.WaitRun("a run of a", 10*time.Second, func(r Run) bool { return r.Job == "a" && r.Start.After(f.VotingAt) && r.Ended() })

	good, err := os.ReadFile(f.Daemons[0].ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(good), "jobs:\n", "no_such_key: 1\njobs:\n", 1)
	badAt := time.Now()
	for _, d := range f.Daemons {
		d.WriteRaw([]byte(bad))
		d.Reload()
	}
	f.WaitFor("two ticks of a after the bad reload", 4*every+5*time.Second, func(h *History) bool {
		n := 0
		for _, r := range h.Job("a") {
			if r.Start.After(badAt) && r.Ended() {
				n++
			}
		}
		return n >= 2
	})
	for _, d := range f.Daemons {
		if !d.Running() {
			t.Fatalf("daemon %s exited after a bad reload: %v", d.Name, d.ExitState())
		}
		if !d.LogContains("no_such_key") {
			t.Errorf("daemon %s's log does not say the reload failed because of no_such_key", d.Name)
		}
	}

	cfg2 := cfg
	cfg2.Jobs = append(append([]Job(nil), cfg.Jobs...), Job{Name: "b", Every: every, Sleep: 200 * time.Millisecond})
	goodAt := time.Now()
	for _, d := range f.Daemons {
		d.WriteConfig(cfg2)
		d.Reload()
	}
	rb := f.WaitRun("a run of the new job b", 3*every+5*time.Second, func(r Run) bool { return r.Job == "b" && r.Ended() })
	from := time.Unix(rb.Tick, 0).Add(every)
	f.AwaitTicks("a", every, goodAt, from.Add(2*every), true, 5*time.Second)
	f.AwaitTicks("b", every, from, from.Add(2*every), true, 5*time.Second)
	f.CheckSafety()
}

// TestNegativeControlNoSupervisorKill checks the checker: the pause
// scenario with the supervisor's kill switched off
// (LEASECRON_TEST_NO_SUPERVISOR_KILL=1) must let the paused host's job run
// on past its lease, and the oracle must report the overlap with the
// takeover run.
func TestNegativeControlNoSupervisorKill(t *testing.T) {
	t.Parallel() // the overlap it must find does not hinge on tight timing
	cfg := DefaultConfig()
	cfg.Env = []string{"LEASECRON_TEST_NO_SUPERVISOR_KILL=1"}
	cfg.Orphans = true
	cfg.Jobs = []Job{{Name: "slow", Every: 8 * time.Second, Sleep: 4 * time.Second, Deadline: 6 * time.Second, IgnoreTerm: true}}
	f := startVoting(t, cfg)

	r1, pauseAt, d := pauseScenario(t, f, "slow")
	f.WaitRun("takeover of the tick by another host", 10*time.Second, func(r Run) bool {
		return r.Job == "slow" && r.Tick == r1.Tick && r.Host != r1.Host
	})
	time.Sleep(time.Until(pauseAt.Add(cfg.TTL + 1500*time.Millisecond)))
	d.Resume()
	h := f.History()
	var overlaps []Violation
	for _, v := range h.Safety() {
		if v.Rule == "overlap" {
			overlaps = append(overlaps, v)
		}
	}
	if len(overlaps) == 0 {
		t.Fatalf("with the supervisor's kill off (LEASECRON_TEST_NO_SUPERVISOR_KILL=1; does internal/supervisor honour it?) the oracle found no overlap; runs:\n%s", h)
	}
	t.Logf("negative control: the oracle found, as it must:\n%s", FormatViolations(overlaps))
}

// restartScenario runs h0 (on time) and h1 (clock 2s behind, so it fires
// each tick 2s after h0 and never wins it first). While h0 runs a tick, 3
// of the 5 nodes are restarted empty. h1 then tries the same tick on nodes
// that have forgotten h0's lease. The 2s give a slow machine time to bring
// the nodes back before h1 tries. It returns h0's run and when the restart
// began.
//
// With pauseHolder, h0 is SIGSTOPped just before the restart (the caller
// resumes it), so it cannot renew in the meantime. Without restart
// detection that matters: h0's next renewal would take the lease again on
// the emptied nodes (renewals spread the lease) and close the window in
// which h1 can win; a holder stuck in a pause or a slow renewal leaves it
// open, and the pause makes that certain instead of a race.
func restartScenario(t *testing.T, noDetection, pauseHolder bool) (*Fleet, Run, time.Time) {
	cfg := DefaultConfig()
	cfg.Daemons = 2
	cfg.TTL, cfg.Renew = 4*time.Second, time.Second
	if pauseHolder {
		// The paused h0's job runs until it ends (5s) or its supervisor
		// kills it, a safety margin before the lease h0 last renewed runs
		// out; h1 must win and start the same tick before then. h1 tries
		// 2s after the tick, and on a loaded machine retries for a second
		// or more while the restarted nodes come up: a 4s lease left a
		// window of about 1.5s, which such runs missed; with 7s the job's
		// own end bounds it, about 3s after h1's first try. And a node
		// timeout a loaded machine meets (a 7s TTL allows up to 700ms):
		// with 50ms, h1 met no answer from any node for 5s at load 15 and
		// won the tick only past its deadline, so the control found
		// nothing to find.
		cfg.TTL, cfg.Timeout = 7*time.Second, 300*time.Millisecond
	}
	cfg.Jobs = []Job{{Name: "inv", Every: 8 * time.Second, Sleep: 5 * time.Second, Deadline: 7 * time.Second, IgnoreTerm: true}}
	cfg.Args = func(i int) []string {
		var a []string
		if i == 1 {
			a = append(a, "--test-clock-offset=-2s")
		}
		if noDetection {
			a = append(a, "--test-no-restart-detection")
		}
		return a
	}
	f := startVoting(t, cfg)

	// Within a second of its tick, seen within a second of its start: a
	// loaded machine starts jobs late and reads their records late.
	r1 := f.WaitRun("a fresh run of inv on h0", 30*time.Second, func(r Run) bool {
		return r.Job == "inv" && r.Host == "h0" && r.Start.After(f.VotingAt) && !r.Ended() &&
			time.Since(r.Start) < time.Second && r.Start.Sub(time.Unix(r.Tick, 0)) < time.Second
	})
	time.Sleep(time.Until(r1.Start.Add(200 * time.Millisecond)))
	if pauseHolder {
		f.Daemon("h0").Pause()
	}
	restartAt := time.Now()
	for _, n := range f.Redis.Nodes[:3] {
		n.Kill()
	}
	for _, n := range f.Redis.Nodes[:3] {
		n.Restart()
	}
	t.Logf("3 of 5 nodes restarted empty in %s, %s into h0's run of tick %s",
		time.Since(restartAt).Round(time.Millisecond), restartAt.Sub(r1.Start).Round(time.Millisecond), fmtT(time.Unix(r1.Tick, 0)))
	return f, r1, restartAt
}

// TestNodesRestartEmpty: a majority of nodes restarts empty while a job
// runs. Restart detection keeps them from voting for a TTL, so the lagging
// host cannot win the tick again while the first run may still be alive:
// the first run is stopped before its validity ends. Nor do they ever vote
// for that tick, whose completion mark they could have lost: the tick is
// not taken over (the price of never running a completed tick twice), and
// the next tick runs.
func TestNodesRestartEmpty(t *testing.T) {
	f, r1, restartAt := restartScenario(t, false, false)
	cfg := f.Config()
	every := cfg.Jobs[0].Every
	next := f.WaitRun("the next tick's run", 3*every+cfg.TTL, func(r Run) bool {
		return r.Job == "inv" && r.Tick == r1.Tick+int64(every/time.Second)
	})
	// h1 gives the tick up once the restarted nodes vote again and refuse
	// it as younger than their data, with one line saying so; a loaded
	// machine may log it after the next tick's run started.
	explained := func() bool { return f.Daemon("h1").LogContains("no quorum will ever vote for the tick") }
	for end := time.Now().Add(loadSlack); !explained(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			break
		}
	}
	h := f.CheckSafety()
	r1 = runOf(t, h, r1.PID)
	if r1.Ended() {
		t.Errorf("run whose lease could not be renewed completed: %s", r1)
	}
	if !r1.Last.Before(restartAt.Add(cfg.TTL)) {
		t.Errorf("job alive at %s, after its lease's validity (< %s): %s", fmtT(r1.Last), fmtT(restartAt.Add(cfg.TTL)), r1)
	}
	for _, r := range h.Tick("inv", r1.Tick) {
		if r.PID != r1.PID {
			t.Errorf("tick %s was taken over after a majority of nodes lost their data since it: %s", fmtT(time.Unix(r1.Tick, 0)), r)
		}
	}
	if !explained() {
		t.Errorf("h1 did not log why it left the tick alone (no quorum will ever vote for it)")
	}
	t.Logf("first run: %s\nnext tick: %s", r1, next)
}

func TestNegativeControlNoRestartDetection(t *testing.T) {
	t.Parallel()
	f, r1, restartAt := restartScenario(t, true, true)
	cfg := f.Config()
	r2 := f.WaitRun("a run by h1 on the emptied nodes", 2*cfg.TTL+5*time.Second, func(r Run) bool {
		return r.Job == "inv" && r.Host == "h1" && r.Start.After(restartAt)
	})
	f.Daemon("h0").Resume()
	time.Sleep(cfg.TTL)
	var found []Violation
	h := f.History()
	for _, v := range h.Safety() {
		if v.Rule == "overlap" || v.Rule == "rerun" {
			found = append(found, v)
		}
	}
	if len(found) == 0 {
		t.Fatalf("with restart detection off the oracle found no double grant (h0: %s; h1: %s); runs:\n%s", r1, r2, h)
	}
	t.Logf("negative control: the oracle found, as it must:\n%s", FormatViolations(found))
}
