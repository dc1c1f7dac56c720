package config

import (
	"fmt"
	"time"
)

// ExecJob returns the job `leasecron exec --name NAME` runs: a copy of the
// file's job NAME when there is one (its timeout, kill_grace, env, dir,
// history_limit, timezone, limits; its command replaced by command or
// shell), else a job with the documented defaults and the host's local
// time zone, as cron reads a crontab. schedule, when not empty, is
// compiled in timezone (when not empty, else the job's) and replaces the
// job's. The file's defaults section is not applied to a name the file
// does not have.
func (c *Config) ExecJob(name, schedule, timezone string, command []string, shell string) (*Job, error) {
	if !validJobName.MatchString(name) {
		return nil, fmt.Errorf("name %q may only contain letters, digits, '_', '.' and '-'", name)
	}
	j := &Job{Name: name, KillGrace: defaultKillGrace, Timezone: "Local",
		HistoryLimit: defaultHistoryLimit, RetryBackoff: defaultRetryBackoff, Candidates: defaultCandidates}
	if in := c.Job(name); in != nil {
		cp := *in
		j = &cp
	}
	j.Command, j.Shell, j.Retries = command, shell, 0
	if schedule == "" {
		return j, nil
	}
	if timezone != "" {
		j.Timezone = timezone
	}
	loc, err := loadLocation(j.Timezone)
	if err != nil {
		return nil, err
	}
	sched, err := parseSchedule(schedule, loc)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", schedule, err)
	}
	j.Schedule, j.sched = schedule, sched
	return j, nil
}

// Period is the time between the job's tick at or before at and the next
// one (the schedule's period there; cron periods vary).
func (j *Job) Period(at time.Time) time.Duration {
	prev := j.Prev(at)
	return j.Next(prev).Sub(prev)
}
