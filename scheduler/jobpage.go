package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrUnknownJob is matched by JobDetail's error for a job the config does
// not have.
var ErrUnknownJob = errors.New("no such job")

// JobDetail is what the status page shows of one job beyond its row: its
// schedule, its next ticks, its recent runs with their output and the
// tail of a running attempt.
type JobDetail struct {
	Name     string
	Schedule string
	Timezone string
	Timeout  time.Duration
	Deadline time.Duration
	// OutputLimit is the job's output_limit (bytes kept per run).
	OutputLimit int
	// NextTicks are the job's next ticks on this host's clock.
	NextTicks []time.Time
	// Runs are the newest runs from the job's history, newest first, with
	// their output.
	Runs []RunRecord
	// Live is the running attempt's published tail, nil when none runs
	// (or its host does not publish).
	Live *LiveTail
}

// JobDetail reads job name's detail: next ticks from the config, up to
// runs records of its history and its live tail from the backend.
func (s *Scheduler) JobDetail(ctx context.Context, name string, ticks, runs int) (*JobDetail, error) {
	j := s.cfg.Load().Job(name)
	if j == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownJob, name)
	}
	d := &JobDetail{Name: j.Name, Schedule: j.Schedule, Timezone: j.Timezone, Timeout: j.Timeout,
		Deadline: j.Deadline, OutputLimit: j.OutputLimit}
	if d.OutputLimit == 0 {
		d.OutputLimit = defaultOutputLimit
	}
	for t := s.now(); len(d.NextTicks) < ticks; {
		t = j.Next(t)
		if t.IsZero() {
			break
		}
		d.NextTicks = append(d.NextTicks, t)
	}
	recs, err := ReadHistory(ctx, s.be, s.key(name), runs)
	if err != nil {
		return d, err
	}
	d.Runs = recs
	if lt, ok, err := ReadLiveTail(ctx, s.be, s.key(name)); err == nil && ok && !lt.Done {
		d.Live = &lt
	}
	return d, nil
}
