package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/leasecron/leasecron/internal/supervisor"
	"github.com/leasecron/leasecron/lease"
)

// The end of a run: what its result is, how its tick ends, which hook
// fires.

// result names the result of a run that ended as w (cut: why it was
// stopped early, if it was) and the error to record, its job's limits counted: a
// failed run the OOM killer or tasks_max hit is oom or limit (see
// limitResult). A run cut short is counted in leasecron_job_aborts_total
// here, once, by the reason its result gives (see exitResult).
func (s *Scheduler) result(j *Job, r *activeRun, w runExit, cut runCut, log *slog.Logger) (result, errText string) {
	result, errText, abort := s.exitResult(j, r, w, cut, log)
	if lr := limitResult(result, w.exit); lr != result {
		log.Warn("the job ran into its limit", "limit", w.exit.Limit, "memory_max", j.MemoryMax, "tasks_max", j.TasksMax, "cpu_max", j.CPUMax)
		result, abort = lr, "limit_"+w.exit.Limit
	}
	if abort != "" {
		s.opts.Metrics.Abort(j.Name, abort)
	}
	return result, errText
}

// stopAborts maps the result of a run its stop ended (runCut.why) to the
// reason leasecron_job_aborts_total counts it under.
var stopAborts = map[string]string{"aborted": "lease_lost", "timeout": "timeout", "shutdown": "shutdown", "stopped": "paused"}

// exitResult is result before the limits are counted; abort is the
// reason to count the run under in leasecron_job_aborts_total, "" for a
// run not cut short. A job that ended on its own before its stop
// (endedFirst) keeps its exit's result and is not counted.
func (s *Scheduler) exitResult(j *Job, r *activeRun, w runExit, cut runCut, log *slog.Logger) (result, errText, abort string) {
	if w.err == nil && endedFirst(cut, w.exit) {
		log.Info("the job ended on its own before it was stopped; its exit is its result", "stop", cut.why)
		cut.why = ""
	}
	switch {
	case errors.Is(w.err, supervisor.ErrSupervisorLost):
		// Never completed: the job did not run to its end under watch.
		log.Error("the job's supervisor died without a report; killed what the job started",
			"pgid", r.proc.JobPID(), "containment", s.contain.String(), "job_dead", w.exit.DeadTime > 0, "err", w.err)
		return "aborted", w.err.Error(), "supervisor_lost"
	case w.err != nil:
		return "error", w.err.Error(), ""
	case cut.why != "":
		return cut.why, "", stopAborts[cut.why]
	case w.exit.Reason == supervisor.ReasonSuspended:
		// The host was suspended: the lease may have expired on the
		// servers while no timer ran here. The job is dead; its tick
		// goes to whoever wins it next.
		log.Error("the host was suspended while the job ran; its supervisor killed it, as its lease may have expired meanwhile")
		return "aborted", "", "suspended"
	case w.exit.Reason == "deadline" || w.exit.Reason == "daemon-gone":
		return "aborted", "", ""
	case w.exit.Code == 0 && w.exit.Signal == "":
		return "ok", "", ""
	}
	return "failed", "", ""
}

// endedFirst reports whether a job stopped for its timeout or a pause
// --stop (cut) had ended on its own before: it exited with a status (no
// signal), the supervisor sent it none, and it was reaped before the stop
// was decided. Its exit is then its result — a run that finished as its
// job was paused with --stop is ok and completes its tick, rather than
// stopped and released. A lost lease or a shutdown stands whatever the
// job did: the tick is no longer this host's, or the daemon is going away
// (a retry could not be stored).
func endedFirst(cut runCut, e supervisor.Exit) bool {
	if cut.why != "stopped" && cut.why != "timeout" {
		return false
	}
	return e.Signal == "" && e.TermTime == 0 && e.KillTime == 0 && !e.Ended.IsZero() && e.Ended.Before(cut.at)
}

// settle decides how a finished run's tick ends: complete (the job ran
// to its end, whatever its exit status, or hit its timeout or limit, and no retry
// is due), lapse (processes of the job may live on: the lease is left to
// run out), or released (a run cut short by a lost lease or by shutdown,
// so another host takes over; or a failure with a retry due at retryAt).
func (s *Scheduler) settle(ctx context.Context, j *Job, tick time.Time, l lease.Lease, hold *lease.Hold, rec RunRecord, w runExit, manual bool, log *slog.Logger) (complete, lapse bool, retryAt time.Time) {
	complete = ranToEnd(rec.Result)
	// Processes of the job that could not be confirmed dead may still be
	// working: leave the lease to run out instead of handing it on now.
	lapse = errors.Is(w.err, supervisor.ErrNotConfirmedDead) ||
		errors.Is(w.err, supervisor.ErrSupervisorLost) && w.exit.DeadTime == 0
	if lapse {
		log.Error("the job's processes could not be confirmed dead; leaving its lease to run out instead of releasing it",
			"valid_until", l.ValidUntil())
		return false, true, time.Time{}
	}
	if complete && !manual {
		// A failed run with retries left is released for the retry
		// (stored first, while the lease is still renewed), not
		// completed.
		if retryAt = s.planRetry(ctx, j, tick, hold, rec, log); !retryAt.IsZero() {
			complete = false
		}
	}
	return complete, false, retryAt
}

// endEvent is the hook event of a finished run: success for ok; failure
// for a run that failed, timed out, hit its limit (oom, limit) or could
// not start (FailedResult) with no retry due, and for a manual run that
// ended any other way; "" for a dry run, a retried failure or a run cut
// short (aborted, shutdown, stopped), whose tick goes on (another host
// takes it over, or it is missed).
func endEvent(rec RunRecord, manual, retrying bool) string {
	switch {
	case rec.Result == "ok":
		return EventSuccess
	case rec.Result == "dry_run" || retrying:
		return ""
	case manual, FailedResult(rec.Result):
		return EventFailure
	}
	return ""
}

// runEnded fires the hook of rec's end, if any.
func (s *Scheduler) runEnded(j *Job, rec RunRecord, manual, retrying bool) {
	if ev := endEvent(rec, manual, retrying); ev != "" {
		s.fireHook(j, runEvent(ev, rec, manual))
	}
}

// runEvent is the hook event of run rec.
func runEvent(event string, rec RunRecord, manual bool) HookEvent {
	ev := HookEvent{Event: event, Job: rec.Job, Tick: rec.Tick, Manual: manual, Attempt: rec.Attempt, Fence: rec.Fence}
	if event != EventStart {
		ev.Result, ev.Exit, ev.Signal = rec.Result, rec.Exit, rec.Signal
		ev.Duration = rec.Duration().Seconds()
		ev.OutputTail, ev.output = hookTail(rec.Output, hookTailSize), rec.Output
	}
	return ev
}
