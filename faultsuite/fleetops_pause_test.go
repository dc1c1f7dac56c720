package faultsuite

import (
	"encoding/json"
	"strings"
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
	text := f.MustCLI("status")
	for job, reason := range paused {
		if !strings.Contains(text.Stdout, reason) {
			t.Errorf("status does not show the reason %q of %s's pause:\n%s", reason, job, text.Stdout)
		}
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
	// Redis only: the pause flags and heartbeats are backend entries
	// that the store's conformance tests and cmd/leasecron's tests cover
	// on every backend; a fleet per backend would add ~25 s of 3 daemons
	// each to make test. Add backends here to run them.
	for _, b := range []string{"redis"} {
		t.Run(b, func(t *testing.T) { pauseResumeFleet(t, b) })
	}
}

func pauseResumeFleet(t *testing.T, backend string) {
	cfg := opsConfig(backend)
	cfg.Jobs = []Job{
		{Name: "a", Every: time.Second, Sleep: 200 * time.Millisecond},
		{Name: "b", Every: time.Second, Sleep: 200 * time.Millisecond},
		{Name: "long", Every: 4 * time.Second, Sleep: 3 * time.Second, Deadline: 3500 * time.Millisecond},
	}
	f := startVoting(t, cfg)

	// pause --stop: the run in progress gets SIGTERM, through the abort
	// path (recorded "stopped"), and is not completed.
	r1, stopAt := stopLong(t, f)

	// pause a: no run of a for a tick after the command returned.
	f.MustCLI("pause", "a", "--reason", "maint window")
	pausedAt := time.Now()
	wantPaused(t, f, map[string]string{"a": "maint window", "long": "drain"}, "b")
	time.Sleep(time.Until(pausedAt.Add(2500 * time.Millisecond)))
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
	time.Sleep(time.Until(allAt.Add(2500 * time.Millisecond)))
	resumeAllAt := time.Now()
	f.MustCLI("resume", "--all")
	wantPaused(t, f, nil, "a", "b", "long")
	for _, job := range []string{"a", "b", "long"} {
		f.WaitRun("a run of "+job+" after resume --all", 20*time.Second, func(r Run) bool {
			return r.Job == job && time.Unix(r.Tick, 0).After(resumeAllAt) && r.Ended()
		})
	}

	h := f.CheckAudit()
	r1 = runOf(t, h, r1.PID)
	if r1.Ended() || !r1.Term {
		t.Errorf("the run stopped by pause --stop: want terminated, not ended: %s", r1)
	}
	for _, r := range h.Job("long") {
		if r.PID != r1.PID && r.Start.After(r1.Until()) && time.Unix(r.Tick, 0).Before(resumeAllAt) {
			t.Errorf("long ran while paused (since %s, its run stopped at %s): %s", fmtT(stopAt), fmtT(r1.Until()), r)
		}
	}
	if rs := runsOfTicks(h, "a", pausedAt, resumeAt); len(rs) > 0 {
		t.Errorf("a ran %d times for ticks between its pause (%s) and resume (%s):\n%s", len(rs), fmtT(pausedAt), fmtT(resumeAt), (&History{Runs: rs}).String())
	}
	if rs := runsOfTicks(h, "b", pausedAt, resumeAt); len(rs) < 1 {
		t.Errorf("control: b, not paused, ran only %d times while a was paused", len(rs))
	}
	for _, job := range []string{"a", "b"} {
		if rs := runsOfTicks(h, job, allAt, resumeAllAt); len(rs) > 0 {
			t.Errorf("%s ran %d times for ticks between pause --all (%s) and resume --all (%s):\n%s", job, len(rs), fmtT(allAt), fmtT(resumeAllAt), (&History{Runs: rs}).String())
		}
	}
}

// youngRunInto waits (up to 20s) for a run of job that started after the
// servers vote and is still young, and returns it once it has been
// running for into. Unlike freshRunInto it does not ask the run to start
// on time: a loaded machine starts jobs late.
func youngRunInto(f *Fleet, job string, into time.Duration) Run {
	f.t.Helper()
	r := f.WaitRun("a young run of "+job, 20*time.Second, func(r Run) bool {
		return r.Job == job && r.Start.After(f.VotingAt) && !r.Ended() && !r.Term && time.Since(r.Start) < time.Second
	})
	time.Sleep(time.Until(r.Start.Add(into)))
	return r
}

// stopLong pauses job long with --stop while it runs, and checks that the
// run got SIGTERM, died, and is recorded in the history as "stopped". On
// a loaded machine the run may lose its lease (and be aborted), or end,
// before the stop reaches it; then long is resumed and the stop tried on
// a later run, 3 times at most. It returns the stopped run and when the pause
// command started.
func stopLong(t *testing.T, f *Fleet) (Run, time.Time) {
	t.Helper()
	for try := 1; ; try++ {
		r1 := youngRunInto(f, "long", 300*time.Millisecond)
		stopAt := time.Now()
		f.MustCLI("pause", "long", "--stop", "--reason", "drain")
		// The daemons read the flags every heartbeat (1s).
		f.WaitRun("the run of long to end", 5*time.Second, func(r Run) bool { return r.PID == r1.PID && (r.Term || r.Ended()) })
		if _, gone := f.WaitGone(r1.PID, 3*time.Second); !gone {
			t.Fatalf("stopped run pid %d still alive", r1.PID)
		}
		r1 = runOf(t, f.History(), r1.PID)
		var rec *scheduler.RunRecord
		end := time.Now().Add(5 * time.Second)
		for rec == nil && time.Now().Before(end) {
			for _, x := range history(t, f, "long", 100) {
				if x.Fence == r1.Token && x.Host == r1.Host {
					rec = &x
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		switch {
		case rec == nil:
			t.Fatalf("no history record of the stopped run %s", r1)
		case rec.Result == "stopped" && r1.Term && !r1.Ended():
			t.Logf("pause --stop: SIGTERM %s after the command started: %s", r1.Last.Sub(stopAt).Round(time.Millisecond), r1)
			return r1, stopAt
		case rec.Result == "stopped":
			t.Fatalf("run recorded as stopped, but the job did not get SIGTERM or ran to its end: %s", r1)
		case try < 3 && (rec.Result == "aborted" || rec.Result == "ok"):
			t.Logf("the run of long was %s before pause --stop reached it (lease lost, or ended: a loaded machine); trying again on a later run: %s", rec.Result, r1)
			f.MustCLI("resume", "long")
		default:
			t.Fatalf("history records the run stopped by pause --stop as %q, want stopped: %+v\nrun: %s", rec.Result, *rec, r1)
		}
	}
}
