package fleettest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leasecron/leasecron/scheduler"
)

// fleetStatus runs `leasecron status --json` and returns each job's status
// by name.
func fleetStatus(t *testing.T, f *Fleet) map[string]scheduler.JobStatus {
	t.Helper()
	res := f.MustCLI("status", "--json")
	var st scheduler.Status
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		t.Fatalf("status: %v\n%s", err, res)
	}
	out := map[string]scheduler.JobStatus{}
	for _, j := range st.Jobs {
		out[j.Name] = j
	}
	return out
}

// wantPaused fails the test unless status shows each job of paused paused
// with the reason given, and each of running not paused.
func wantPaused(t *testing.T, f *Fleet, paused map[string]string, running ...string) {
	t.Helper()
	st := fleetStatus(t, f)
	for job, reason := range paused {
		p := st[job].Paused
		switch {
		case p == nil:
			t.Errorf("status: %s is not shown paused", job)
		case p.Reason != reason || p.By == "":
			t.Errorf("status: %s paused by %q with reason %q, want reason %q", job, p.By, p.Reason, reason)
		}
	}
	for _, job := range running {
		if p := st[job].Paused; p != nil {
			t.Errorf("status: %s shown paused (%+v), want running", job, *p)
		}
	}
}

// runsOfTicks returns the runs of job whose ticks are in (after, before).
func runsOfTicks(h *History, job string, after, before time.Time) []Run {
	var out []Run
	for _, r := range h.Job(job) {
		if tk := time.Unix(r.Tick, 0); tk.After(after) && tk.Before(before) {
			out = append(out, r)
		}
	}
	return out
}

// TestPauseResumeFleet: 3 daemons, jobs a and b every second and a long
// job. `pause long --stop` stops the long job's run in progress through
// the abort path (the job gets SIGTERM, the run is recorded "stopped", the
// tick is not completed nor run again). `pause a --reason ...` keeps
// every daemon from starting a run of a for a tick after the command
// returned, while b runs on (the control: the same window does see runs
// of a job that is not paused); status shows a paused with the reason;
// `resume a` brings it back. `pause --all` stops every job's new ticks,
// `resume --all` brings every job back, also long, paused on its own.
func TestPauseResumeFleet(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"redis"} {
		t.Run(b, func(t *testing.T) { pauseResumeFleet(t, b) })
	}
}

func pauseResumeFleet(t *testing.T, backend string) {
	cfg := opsConfig(backend)
	cfg.Jobs = []Job{
		{Name: "a", Every: time.Second, Sleep: 200 * time.Millisecond},
		{Name: "b", Every: time.Second, Sleep: 200 * time.Millisecond},
		{Name: "long", Every: 6 * time.Second, Sleep: 5 * time.Second, Deadline: 5500 * time.Millisecond},
	}
	f := startVoting(t, cfg)

	// pause --stop: the run in progress gets SIGTERM and is not completed.
	r1 := freshRunInto(f, "long", 300*time.Millisecond)
	stopAt := time.Now()
	f.MustCLI("pause", "long", "--stop", "--reason", "drain")
	// The daemons read the flags every heartbeat (1s).
	termd := f.WaitRun("SIGTERM of the run of long", 5*time.Second, func(r Run) bool { return r.PID == r1.PID && r.Term })
	if _, gone := f.WaitGone(r1.PID, 3*time.Second); !gone {
		t.Errorf("stopped run pid %d still alive", r1.PID)
	}
	t.Logf("pause --stop: SIGTERM %s after the command started: %s", termd.Last.Sub(stopAt).Round(time.Millisecond), termd)

	// pause a: no run of a for a tick after the command returned.
	f.MustCLI("pause", "a", "--reason", "maint window")
	pausedAt := time.Now()
	wantPaused(t, f, map[string]string{"a": "maint window", "long": "drain"}, "b")
	time.Sleep(time.Until(pausedAt.Add(3 * time.Second)))
	resumeAt := time.Now()
	f.MustCLI("resume", "a")
	wantPaused(t, f, map[string]string{"long": "drain"}, "a", "b")
	resumed := f.WaitRun("a run of a after resume", 8*time.Second, func(r Run) bool {
		return r.Job == "a" && time.Unix(r.Tick, 0).After(resumeAt) && r.Ended()
	})
	t.Logf("a runs again %s after resume: %s", resumed.Start.Sub(resumeAt).Round(time.Millisecond), resumed)

	// pause --all, resume --all.
	f.MustCLI("pause", "--all", "--reason", "freeze")
	allAt := time.Now()
	wantPaused(t, f, map[string]string{"a": "freeze", "b": "freeze", "long": "freeze"})
	time.Sleep(time.Until(allAt.Add(3 * time.Second)))
	resumeAllAt := time.Now()
	f.MustCLI("resume", "--all")
	wantPaused(t, f, nil, "a", "b", "long")
	for _, job := range []string{"a", "b", "long"} {
		f.WaitRun("a run of "+job+" after resume --all", 10*time.Second, func(r Run) bool {
			return r.Job == job && time.Unix(r.Tick, 0).After(resumeAllAt) && r.Ended()
		})
	}

	h := f.CheckSafety()
	r1 = runOf(t, h, r1.PID)
	if r1.Ended() || !r1.Term {
		t.Errorf("the run stopped by pause --stop: want terminated, not ended: %s", r1)
	}
	for _, r := range runsOfTicks(h, "long", time.Unix(r1.Tick-1, 0), resumeAllAt) {
		if r.PID != r1.PID {
			t.Errorf("long ran while paused (since %s): %s", fmtT(stopAt), r)
		}
	}
	if rs := runsOfTicks(h, "a", pausedAt, resumeAt); len(rs) > 0 {
		t.Errorf("a ran %d times for ticks between its pause (%s) and resume (%s):\n%s", len(rs), fmtT(pausedAt), fmtT(resumeAt), (&History{Runs: rs}).String())
	}
	if rs := runsOfTicks(h, "b", pausedAt, resumeAt); len(rs) < 2 {
		t.Errorf("control: b, not paused, ran only %d times while a was paused", len(rs))
	}
	for _, job := range []string{"a", "b"} {
		if rs := runsOfTicks(h, job, allAt, resumeAllAt); len(rs) > 0 {
			t.Errorf("%s ran %d times for ticks between pause --all (%s) and resume --all (%s):\n%s", job, len(rs), fmtT(allAt), fmtT(resumeAllAt), (&History{Runs: rs}).String())
		}
	}
	// The stopped run is in the history as stopped, and its tick was
	// never completed.
	var rec *scheduler.RunRecord
	for _, x := range history(t, f, "long", 100) {
		if x.Fence == r1.Token && x.Host == r1.Host {
			rec = &x
		}
	}
	switch {
	case rec == nil:
		t.Errorf("no history record of the stopped run %s", r1)
	case rec.Result != "stopped":
		t.Errorf("history records the stopped run as %q, want stopped: %+v", rec.Result, *rec)
	}
}
