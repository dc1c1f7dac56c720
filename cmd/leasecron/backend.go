package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/scheduler"
)

// backendOptions are what a command asks of the backend beyond the config.
type backendOptions struct {
	log     *slog.Logger       // restarts and failovers of servers (nil: none)
	metrics *scheduler.Metrics // votes and restarts (nil: none)
	// minTimeout raises the per-request timeout (status reads from a
	// terminal, where 50 ms would only make it fail on a busy node).
	minTimeout time.Duration
	// unsafeNoRestartDetection lets restarted Redis nodes vote at once:
	// only for the fault suite's negative control.
	unsafeNoRestartDetection bool
}

// openBackend opens the lease backend of cfg's one backend section
// (config.Section.Open). It is the one place the daemon, trigger and
// status open one; the scheduler sees only the lease.Backend interface.
func openBackend(ctx context.Context, cfg *config.Config, o backendOptions) (lease.Backend, error) {
	m := o.metrics
	return cfg.Open(ctx, config.OpenOptions{
		Log:                      o.log,
		OnVote:                   m.Vote,
		OnRestart:                m.NodeRestart,
		MinTimeout:               o.minTimeout,
		UnsafeNoRestartDetection: o.unsafeNoRestartDetection,
	})
}
