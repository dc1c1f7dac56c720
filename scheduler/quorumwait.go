package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// noQuorumAttempts bounds the attempts of one tick refused for lack of a
// quorum: the retry backoff grows past noQuorumMax to a deadline's
// 1/noQuorumAttempts, so that a long deadline does not mean thousands of
// retries of each tick (an hourly job: one every 36s at most).
const noQuorumAttempts = 100

// votingRecheck is how often at most the servers' voting state is asked
// for (Backend.Health) when ticks find no quorum, for the whole host.
const votingRecheck = time.Second

// errNotVotingYet: a quorum of servers answers, but some of them started,
// restarted or lost their data less than the restart guard ago and do
// not vote yet.
var errNotVotingYet = errors.New("servers do not vote yet")

// retryPace and retryBurst bound the host's retries of ticks refused for
// lack of a quorum: at most one every retryPace on average (100 a
// second), in bursts of up to retryBurst, whatever the number of jobs.
// Without a quorum nothing is lost by waiting; with thousands of jobs the
// backoff of each tick alone would still mean hundreds of requests a
// second from one host.
const (
	retryPace  = 10 * time.Millisecond
	retryBurst = 100
)

// pacer spaces the host's no-quorum retries (see retryPace).
type pacer struct {
	mu   sync.Mutex
	next time.Time
}

// wait blocks until this retry's turn; false if ctx ended first.
func (p *pacer) wait(ctx context.Context) bool {
	p.mu.Lock()
	now := time.Now()
	slot := p.next
	if floor := now.Add(-retryBurst * retryPace); slot.Before(floor) {
		slot = floor
	}
	p.next = slot.Add(retryPace)
	p.mu.Unlock()
	d := time.Until(slot)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// quorumOutlook is the host-wide view of when a quorum of servers votes
// again, shared by every tick that found none, and the ticks given up
// because no quorum will ever vote for them (for one log line each).
type quorumOutlook struct {
	mu       sync.Mutex
	checked  time.Time // last Health read
	votingAt time.Time // when a quorum votes again; zero: now, or unknown
	logged   time.Time // the votingAt last logged
	// gaveUp holds the ticks (unix seconds) already logged as given up.
	gaveUp map[int64]bool
}

// unvotable reports whether err refuses a tick no quorum will ever vote
// for: the servers whose data is younger than the tick (ErrDataYounger in
// the refusal; a data birth only moves later) leave fewer than a quorum.
func (s *Scheduler) unvotable(err error) bool {
	var rerr *lease.RefusedError
	if s.test.keepUnvotable || !errors.As(err, &rerr) || !errors.Is(rerr.Reason, lease.ErrNoQuorum) {
		return false
	}
	young := 0
	for _, e := range leafErrors(rerr.NodeErrs) {
		if errors.Is(e, lease.ErrDataYounger) {
			young++
		}
	}
	return young > 0 && young > len(s.be.Servers())-s.be.Quorum()
}

// notVotingYet reports whether err is a failure for want of a quorum that
// servers inside their restart guard explain on their own: some answers
// did not count yet (ErrRestarted: the servers started, restarted or lost
// their data less than the guard ago), and the servers that failed for
// any other reason would have left a quorum. It passes with the guard.
func (s *Scheduler) notVotingYet(err error) bool {
	if !errors.Is(err, lease.ErrNoQuorum) {
		return false
	}
	restarted, other := 0, 0
	for _, ne := range nodeErrors(err) {
		if errors.Is(ne, lease.ErrRestarted) {
			restarted++
		} else {
			other++
		}
	}
	return restarted > 0 && other <= len(s.be.Servers())-s.be.Quorum()
}

// nodeErrors returns the *lease.NodeError values found in err's tree
// (through wrapping, errors.Join and a RefusedError's NodeErrs).
func nodeErrors(err error) []*lease.NodeError {
	switch e := err.(type) {
	case nil:
		return nil
	case *lease.NodeError:
		return []*lease.NodeError{e}
	case interface{ Unwrap() []error }:
		var out []*lease.NodeError
		for _, x := range e.Unwrap() {
			out = append(out, nodeErrors(x)...)
		}
		return out
	case interface{ Unwrap() error }:
		return nodeErrors(e.Unwrap())
	}
	return nil
}

// readFailed logs a store read that failed and that the caller gets past
// with what it read before (msg says how). While servers inside their
// restart guard alone explain it (expected after they start or restart)
// it is a debug line: quorumVotingAt says once, at info, when they vote;
// if their voting state does not say it, an info line does. Any other
// failure is a warning.
func (s *Scheduler) readFailed(ctx context.Context, msg string, err error) {
	switch {
	case ctx.Err() != nil:
	case !s.notVotingYet(err):
		s.log.Warn(msg, "err", err)
	case time.Until(s.quorumVotingAt(ctx)) > 0:
		s.log.Debug(msg+": servers do not vote yet", "err", err)
	default:
		s.log.Info(msg+": servers that started, restarted or lost their data recently do not count for reads yet", "err", err)
	}
}

// leafErrors flattens a tree of errors.Join values.
func leafErrors(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		if err == nil {
			return nil
		}
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, leafErrors(e)...)
	}
	return out
}

// giveUpUnvotable counts the ticks of jobs given up because no quorum will
// vote for them (see unvotable) and logs one line per tick for all of
// them: at info for a tick before the daemon started or in its first TTL
// (a fresh start, or a restart after the servers lost their data:
// expected), else a warning (servers lost their data while the tick was
// due).
func (s *Scheduler) giveUpUnvotable(ctx context.Context, tick time.Time, jobs []string, err error) {
	for _, j := range jobs {
		s.opts.Metrics.Acquire(j, "data_younger")
		s.opts.Metrics.Skipped(j, "data_younger")
	}
	o := &s.outlook
	o.mu.Lock()
	first := !o.gaveUp[tick.Unix()]
	if first {
		if o.gaveUp == nil || len(o.gaveUp) > 1024 {
			o.gaveUp = map[int64]bool{}
		}
		o.gaveUp[tick.Unix()] = true
	}
	o.mu.Unlock()
	lvl := slog.LevelDebug
	if first {
		lvl = slog.LevelWarn
		// Ticks from before the daemon started, or within the first TTL
		// after it (the servers it found may have just started: a fresh
		// fleet, the demo), are expected to be given up: info.
		if tick.Before(s.started.Add(s.cfg.Load().Lease.TTL)) {
			lvl = slog.LevelInfo
		}
	}
	s.log.Log(ctx, lvl, "no quorum will ever vote for the tick: servers whose data is younger than it (started, restarted, failed over or flushed since) do not vote for it; giving it up",
		"tick", tick.UTC().Format(time.RFC3339), "jobs", len(jobs), "first_jobs", jobs[:min(len(jobs), 5)], "err", err)
}

// quorumVotingAt returns when a quorum of servers votes again, from the
// servers' voting state (read at most every votingRecheck for the host):
// zero when a quorum votes now, or when servers that do not answer keep
// one away (then nothing says when). The first time a new instant is
// learnt it is logged, once for every tick waiting for it.
func (s *Scheduler) quorumVotingAt(ctx context.Context) time.Time {
	o := &s.outlook
	o.mu.Lock()
	defer o.mu.Unlock()
	if time.Since(o.checked) < votingRecheck {
		return o.votingAt
	}
	o.checked = time.Now()
	voting, later := 0, []time.Time(nil)
	for _, st := range s.be.Health(ctx) {
		switch {
		case st.Err != nil:
		case st.Voting:
			voting++
		case !st.VotingAt.IsZero():
			later = append(later, st.VotingAt)
		}
	}
	o.votingAt = time.Time{}
	if need := s.be.Quorum() - voting; need > 0 && need <= len(later) {
		slices.SortFunc(later, time.Time.Compare)
		o.votingAt = later[need-1]
	}
	if o.votingAt.After(o.logged) {
		o.logged = o.votingAt
		s.log.Info("servers started, restarted or lost their data recently and do not vote yet; ticks refused until a quorum votes are tried again then",
			"voting_at", o.votingAt.UTC().Format(time.RFC3339Nano), "in", time.Until(o.votingAt).Round(time.Millisecond))
	}
	return o.votingAt
}
