package scheduler

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasecron/leasecron/internal/supervisor"
)

// Results of a run killed or held back by its job's limits (RunRecord.Result).
const (
	// ResultOOM: the kernel's OOM killer killed a process of the job at
	// its memory_max, and the run failed.
	ResultOOM = "oom"
	// ResultLimit: the run failed at its tasks_max (a fork refused), or
	// timed out while throttled at its cpu_max.
	ResultLimit = "limit"
)

// FailedResult reports whether a run's result is a failure of the job
// itself: failed (non-zero exit or signal), timeout, oom, limit, or error
// (it could not start). A run cut short from outside (aborted, shutdown,
// stopped) is not; on_failure hooks and alerts should use this.
func FailedResult(result string) bool {
	switch result {
	case "failed", "timeout", ResultOOM, ResultLimit, "error":
		return true
	}
	return false
}

// ranToEnd reports whether a run's result means the job ran to its end
// (or to its timeout or limit), which completes the tick unless it is
// retried.
func ranToEnd(result string) bool {
	switch result {
	case "ok", "failed", "timeout", ResultOOM, ResultLimit:
		return true
	}
	return false
}

// jobLimits are j's limits as the supervisor applies them.
func jobLimits(j *Job) supervisor.Limits {
	return supervisor.Limits{MemoryMax: j.MemoryMax, CPUMax: j.CPUMax, TasksMax: j.TasksMax}
}

// limitResult is the result of a run that ended with result and exit,
// once its job's limits are counted: a failed run that the OOM killer hit
// is oom, one that hit its tasks_max is limit, as is one that timed out
// while throttled at its cpu_max.
func limitResult(result string, exit supervisor.Exit) string {
	switch {
	case result == "failed" && exit.Limit == supervisor.LimitMemory:
		return ResultOOM
	case result == "failed" && exit.Limit == supervisor.LimitTasks:
		return ResultLimit
	case result == "timeout" && exit.Limit == supervisor.LimitCPU:
		return ResultLimit
	}
	return result
}

// CannotLimit returns why this host cannot apply j's limits (nil when it
// can, or j has none, or in a dry run, which starts no job): the daemon
// then does not run j. The start-up log names each such job.
func (s *Scheduler) CannotLimit(j *Job) error {
	if !j.HasLimits() || s.opts.DryRun {
		return nil
	}
	if err := s.contain.CanLimit(jobLimits(j)); err != nil {
		return fmt.Errorf("job %s: its limits cannot be applied on this host, so it is not run here: %w", j.Name, err)
	}
	return nil
}

// LimitControllers lists the controllers (among memory, cpu and pids)
// this daemon can limit its jobs with, each with the cgroup hierarchy that
// applies it ("memory:v2", "pids:v1"), and why the others are missing
// ("" when none is): jobs whose limits need a missing one are not run
// here.
func (s *Scheduler) LimitControllers() (have []string, why string) {
	if s.opts.DryRun {
		return nil, "" // starts no job: nothing to limit
	}
	return s.contain.Controllers(), s.contain.NoControllers()
}

// limitable drops from jobs those whose limits this host cannot apply:
// it does not try their ticks, so that a host that can takes them, and
// notes each such tick missed (reason cannot_limit): recorded once its
// deadline passed unless a host ran it.
func (s *Scheduler) limitable(ctx context.Context, wg *sync.WaitGroup, tick time.Time, jobs []*Job) []*Job {
	out := jobs[:0:0]
	for _, j := range jobs {
		if err := s.CannotLimit(j); err != nil {
			s.log.Debug("not trying the tick", "job", j.Name, "err", err)
			if !s.test.noCannotLimitMiss {
				s.noteMiss(ctx, wg, j, tick, MissCannotLimit)
			}
			continue
		}
		out = append(out, j)
	}
	return out
}

// ProbeLimits says whether a daemon running where the calling process runs
// could apply j's limits (see supervisor.ProbeLimits): nil when it could
// or j has none. Config.LimitProblems takes it.
func ProbeLimits(j *Job) error {
	if !j.HasLimits() {
		return nil
	}
	return supervisor.ProbeLimits(jobLimits(j))
}

// ProbeControllers lists the controllers a daemon running where the
// calling process runs could limit jobs with, each with its cgroup
// hierarchy (see supervisor.ProbeControllers).
func ProbeControllers() []string { return supervisor.ProbeControllers() }
