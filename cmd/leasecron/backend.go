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
	// warm opens every server's connection before the command's first
	// request (lease.Backend.Warm), for up to cliWarmTimeout within ctx
	// (the command's --timeout) rather than the per-request timeout: the
	// first contact carries the dial, TLS and the connection's set-up,
	// which a fresh process on a busy machine can take longer than a
	// request, and a server would be reported unreachable for it.
	warm bool
	// unsafeNoRestartDetection lets restarted Redis nodes vote at once:
	// only for the fault suite's negative control.
	unsafeNoRestartDetection bool
}

// cliWarmTimeout bounds a command's first contact with the servers
// (backendOptions.warm): a server that does not answer delays the command
// by no more than this.
const cliWarmTimeout = 3 * time.Second

// openBackend opens the lease backend of cfg's one backend section
// (config.Section.Open). It is the one place the daemon, trigger and
// status open one; the scheduler sees only the lease.Backend interface.
func openBackend(ctx context.Context, cfg *config.Config, o backendOptions) (lease.Backend, error) {
	m := o.metrics
	be, err := cfg.Open(ctx, config.OpenOptions{
		Log:                      o.log,
		OnVote:                   m.Vote,
		OnRestart:                m.NodeRestart,
		MinTimeout:               o.minTimeout,
		UnsafeNoRestartDetection: o.unsafeNoRestartDetection,
	})
	if err == nil && o.warm {
		wctx, cancel := context.WithTimeout(ctx, cliWarmTimeout)
		defer cancel()
		_ = be.Warm(wctx) // a server that failed is reported by the requests that follow
	}
	return be, err
}
