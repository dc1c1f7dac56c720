package scheduler

import (
	"strconv"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// The names a scheduler gives what it keeps in the backend: lease keys,
// logs, retry entries, the heartbeat space.

// key is the lease key of a job: one key per job, not per tick (the
// backend adds its own prefix or table). A dry run uses keys of its own,
// so it never takes or completes a live fleet's tick.
func (s *Scheduler) key(job string) string {
	if s.opts.DryRun {
		return dryRunPrefix + job
	}
	return job
}

// dryRunPrefix starts the lease keys, log names and retry entries of a
// dry-run scheduler, and dryRunHosts is its heartbeat space: a dry-run
// fleet is apart from the live one on the same backend.
const (
	dryRunPrefix = "dry-run."
	dryRunHosts  = lease.SpaceHosts + ".dry-run"
)

// logName is the name of job's history log in the backend.
func (s *Scheduler) logName(job string) string { return storeName(s.key(job)) }

// missLogName is the name of the log of job's missed and skipped ticks,
// kept apart from its runs so that a job paused for long keeps its last
// history_limit runs (see missLogOf).
func (s *Scheduler) missLogName(job string) string { return missLogOf(s.key(job)) }

// retryName is the name of the retry state of tick of job: one entry per
// tick, so that a tick's state never hides another's.
func (s *Scheduler) retryName(job string, tick time.Time) string {
	return storeName(s.key(job) + "@" + strconv.FormatInt(tick.Unix(), 10))
}

// hostsSpace is the space of the heartbeats this scheduler writes and
// ranks by.
func (s *Scheduler) hostsSpace() string {
	if s.opts.DryRun {
		return dryRunHosts
	}
	return lease.SpaceHosts
}
