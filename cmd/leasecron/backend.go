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
	// warm opens the backend's connections before the command's first
	// request (lease.Backend.Warm), for up to cliWarmTimeout and a third
	// of what is left of ctx (the command's --timeout), rather than within
	// the per-request timeout: on Redis the first contact carries the
	// dial, TLS and the connection's set-up, which a fresh process on a
	// busy host can take longer than a health check, and status would
	// report the server unreachable for it.
	warm bool
	// unsafeNoRestartDetection lets restarted Redis nodes vote at once:
	// only for the fault suite's negative control.
	unsafeNoRestartDetection bool
}

// cliWarmTimeout bounds a command's first contact with the servers
// (backendOptions.warm): a server that accepts connections but does not
// answer delays the command by no more than this.
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
		wctx, cancel := context.WithTimeout(ctx, warmBudget(ctx))
		defer cancel()
		_ = be.Warm(wctx) // a server that failed is reported by the requests that follow
	}
	return be, err
}

// warmBudget is how long a command may spend on its first contact:
// cliWarmTimeout, and no more than a third of what is left of ctx, so
// that the requests keep the rest.
func warmBudget(ctx context.Context) time.Duration {
	d := cliWarmTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)/3)
	}
	return d
}
