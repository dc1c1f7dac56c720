package scheduler

import (
	"context"
	"errors"
	"time"

	"github.com/leasecron/leasecron/internal/supervisor"
)

// maxSpares bounds how many idle supervisors a daemon keeps ready.
const maxSpares = 8

// startSupervised starts spec under a supervisor: a spare one when there
// is one (the job then starts with a single exec), else a fresh one.
func (s *Scheduler) startSupervised(spec supervisor.Spec) (*supervisor.Process, error) {
	select {
	case sp := <-s.spares:
		select {
		case s.spareWake <- struct{}{}:
		default:
		}
		proc, err := sp.Start(context.Background(), spec)
		_ = sp.Close() // a no-op once the spare started the job
		if err == nil || errors.Is(err, supervisor.ErrStart) ||
			errors.Is(err, supervisor.ErrDeadlinePassed) || errors.Is(err, supervisor.ErrInvalidSpec) ||
			errors.Is(err, supervisor.ErrLimits) {
			return proc, err
		}
		// The spare's supervisor is gone (killed while it waited, say):
		// start afresh.
		s.log.Warn("spare supervisor unusable; starting a new one", "err", err)
	default:
	}
	return supervisor.Start(context.Background(), s.opts.Self, spec)
}

// spareLoop keeps up to maxSpares supervisors (no more than there are
// jobs) started and waiting for a job, refilling after each use, so that a
// tick's jobs do not wait for the supervisor's own exec. It closes the
// unused ones when ctx is done.
func (s *Scheduler) spareLoop(ctx context.Context) {
	defer func() {
		for {
			select {
			case sp := <-s.spares:
				_ = sp.Close()
			default:
				return
			}
		}
	}()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		want := min(maxSpares, len(s.cfg.Load().Jobs))
		for len(s.spares) < want && ctx.Err() == nil {
			sp, err := supervisor.Prepare(s.opts.Self)
			if err != nil {
				s.log.Warn("could not start a spare supervisor; jobs start without one", "err", err)
				retry.Reset(5 * time.Second)
				break
			}
			select {
			case s.spares <- sp:
			default:
				_ = sp.Close()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.spareWake:
			// Refill once the tick's jobs have started: a supervisor's
			// exec now would compete with theirs for the CPU.
			settle := time.NewTimer(spareRefillDelay)
			select {
			case <-ctx.Done():
				settle.Stop()
				return
			case <-settle.C:
			}
		case <-retry.C:
		}
	}
}

// spareRefillDelay is how long after a spare was taken spareLoop waits
// before starting new ones.
const spareRefillDelay = 250 * time.Millisecond
