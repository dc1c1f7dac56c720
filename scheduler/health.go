package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// Healthy returns nil when a quorum of nodes answers and votes (it asks
// them: Backend.Health).
func (s *Scheduler) Healthy(ctx context.Context) error {
	return s.health(s.be.Health(ctx))
}

// health notes the servers' statuses st (metrics, the STATUS= line) and
// returns nil when a quorum of them answers and votes.
func (s *Scheduler) health(st []lease.ServerStatus) error {
	ok, waiting := 0, 0
	var errs []error
	for _, n := range st {
		s.opts.Metrics.NodeUp(n.Server, n.Err == nil, n.Latency)
		switch {
		case n.Err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", n.Server, n.Err))
		case !n.Voting:
			waiting++
			errs = append(errs, fmt.Errorf("%s: restarted recently, votes again in %s", n.Server, time.Until(n.VotingAt).Round(time.Second)))
		default:
			ok++
		}
	}
	var err error
	if ok < s.be.Quorum() {
		err = fmt.Errorf("no quorum: %d of %d nodes usable, %d needed: %w", ok, len(st), s.be.Quorum(), errors.Join(errs...))
		if ok+waiting >= s.be.Quorum() {
			err = fmt.Errorf("%w: %w", errNotVotingYet, err)
		}
	}
	s.opts.Metrics.QuorumHealthy(err == nil)
	s.mu.Lock()
	s.healthNow = healthState{checked: time.Now(), ok: ok, nodes: len(st), err: err}
	s.mu.Unlock()
	return err
}

// noteHealth notes the servers' statuses st as seen by a round of this
// host (the heartbeat's) and logs an unhealthy quorum.
func (s *Scheduler) noteHealth(ctx context.Context, st []lease.ServerStatus) {
	switch err := s.health(st); {
	case err == nil || ctx.Err() != nil:
	case errors.Is(err, errNotVotingYet):
		// Expected after servers start or restart: one info line
		// (quorumVotingAt) says when they vote.
		s.quorumVotingAt(ctx)
	default:
		s.log.Warn("lease store unhealthy: no quorum of servers answers and votes", "err", err)
	}
}

// healthLoop sends the STATUS= line every healthEvery, and asks the
// servers for their health when no heartbeat round noted it for
// healthStale. It returns when ctx ends.
func (s *Scheduler) healthLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// The heartbeat's round notes the servers' health (on etcd
		// and ZooKeeper every other round or so): ask them only when
		// none did for healthStale (a long heartbeat, or a round that
		// has not ended).
		s.mu.Lock()
		stale := time.Since(s.healthNow.checked) >= healthStale
		s.mu.Unlock()
		if stale {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			s.noteHealth(ctx, s.be.Health(pctx))
			cancel()
		}
		if s.opts.Notify != nil {
			s.opts.Notify("STATUS=" + s.StatusLine())
		}
		t.Reset(healthEvery)
	}
}

// healthEvery is how often the STATUS= line is sent; healthStale the
// longest the servers' health goes without a fresh look.
const (
	healthEvery = 5 * time.Second
	healthStale = 4 * healthEvery
)
