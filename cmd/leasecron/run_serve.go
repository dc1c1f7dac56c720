package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/scheduler"
)

// The running daemon (`leasecron run`): its actors, reloads and the
// systemd watchdog; run.go starts it.

// webServer is --metrics: Prometheus metrics, /healthz and the status
// page on one listener.
type webServer struct {
	metrics *scheduler.Metrics
	mux     *http.ServeMux
	ln      net.Listener
}

// listenWeb registers the metrics and binds addr.
func listenWeb(addr string) (*webServer, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(),
	)
	w := &webServer{metrics: scheduler.NewMetrics(reg), mux: http.NewServeMux()}
	w.mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	w.ln = ln
	return w, nil
}

// metricsOf is w's metrics, nil without --metrics.
func (w *webServer) metricsOf() *scheduler.Metrics {
	if w == nil {
		return nil
	}
	return w.metrics
}

// addr is the address bound, so that --metrics 127.0.0.1:0 shows its
// port; "" without --metrics.
func (w *webServer) addr() string {
	if w == nil {
		return ""
	}
	return w.ln.Addr().String()
}

// serve runs the daemon's actors until one of them stops: termination
// signals, reloads on SIGHUP, the scheduler, the web server and the
// systemd watchdog.
func (c *RunCommand) serve(ctx context.Context, hup <-chan os.Signal, f runFlags, cfg *config.Config,
	sched *scheduler.Scheduler, web *webServer, log *slog.Logger, notify func(string)) error {
	// schedDone is closed when the scheduler's Run has returned: the
	// watchdog keeps pinging until then, also through the shutdown grace.
	schedDone := make(chan struct{})

	var g run.Group
	{
		// Termination: SIGINT or SIGTERM (or ctx) stops the group.
		g.Add(run.SignalHandler(ctx, os.Interrupt, syscall.SIGTERM))
	}
	{
		// Reload: SIGHUP re-reads the config file. A bad file is logged
		// and the running config kept.
		rctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error {
			for {
				select {
				case <-rctx.Done():
					return nil
				case <-hup:
					c.reload(sched, f, log, notify)
				}
			}
		}, func(error) {
			cancel()
		})
	}
	{
		// The scheduler: fires ticks until interrupted, then stops
		// gracefully (running jobs get shutdown_grace).
		sctx, cancel := context.WithCancel(context.Background())
		var once sync.Once
		g.Add(func() error {
			defer close(schedDone)
			notify("READY=1\nSTATUS=started: " + plural(len(cfg.Jobs), "job"))
			log.Info("ready")
			err := sched.Run(sctx)
			if err == nil && sctx.Err() == nil {
				err = errors.New("scheduler stopped unexpectedly")
			}
			return err
		}, func(error) {
			once.Do(func() {
				notify("STOPPING=1")
				log.Info("stopping: no new ticks; running jobs get the shutdown grace")
				cancel()
			})
		})
	}
	if web != nil {
		// Metrics and /healthz over HTTP.
		srv := &http.Server{Handler: readOnly(web.mux), ReadHeaderTimeout: 10 * time.Second}
		g.Add(func() error {
			if err := serveWeb(web.ln, srv, f.webConfig, log); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("metrics server: %w", err)
			}
			return nil
		}, func(error) {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx) // safe to call again
		})
	}
	if wd, err := daemon.SdWatchdogEnabled(true); err != nil {
		log.Warn("systemd watchdog settings unreadable; not pinging", "err", err)
	} else if wd > 0 {
		// systemd watchdog: ping at half the interval while the scheduler
		// is alive (its Run has not returned and it answers StatusLine).
		// A backend outage does not stop the pings: restarting the daemon
		// would not bring the backend back, but would stop running jobs.
		// The pings go on through the shutdown grace; the actor ends when
		// the scheduler has stopped, so its interrupt has nothing to do.
		g.Add(func() error {
			watchdog(sched, wd, schedDone, log, notify)
			return nil
		}, func(error) {})
	}
	return g.Run()
}

// reload re-reads the config file and applies it; on error the running
// config stays. It tells systemd RELOADING=1 (with MONOTONIC_USEC, as
// Type=notify-reload requires) and READY=1 when done.
func (c *RunCommand) reload(sched *scheduler.Scheduler, f runFlags, log *slog.Logger, notify func(string)) {
	notify("RELOADING=1\n" + daemon.SdNotifyMonotonicUsec())
	defer notify("READY=1")
	log.Info("SIGHUP: reloading the config", "config", f.config)
	cfg, err := config.Load(f.config)
	if err != nil {
		log.Error("reload failed; keeping the running config", "config", f.config, "err", err)
		notify("STATUS=reload failed, kept the running config: " + firstLine(err))
		return
	}
	f.apply(cfg)
	for _, w := range cfg.Warnings {
		log.Warn("config: " + w)
	}
	if err := sched.Reload(cfg); err != nil {
		log.Warn("config partly reloaded", "err", err)
	}
	log.Info("config reloaded", "jobs", len(cfg.Jobs))
	debug.FreeOSMemory() // the parse's garbage, as at start-up
}

// watchdog pings systemd's watchdog every wd/2 until done is closed, as
// long as the scheduler answers StatusLine within wd/4 (a deadlocked
// scheduler gets no pings and is restarted by systemd).
func watchdog(sched *scheduler.Scheduler, wd time.Duration, done <-chan struct{}, log *slog.Logger, notify func(string)) {
	var pending atomic.Bool // a StatusLine call has not returned yet
	alive := func() bool {
		if pending.Load() {
			return false
		}
		pending.Store(true)
		answered := make(chan struct{})
		go func() {
			_ = sched.StatusLine()
			pending.Store(false)
			close(answered)
		}()
		t := time.NewTimer(wd / 4)
		defer t.Stop()
		select {
		case <-answered:
			return true
		case <-t.C:
			return false
		}
	}
	t := time.NewTimer(0)
	defer t.Stop()
	warned := false
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if alive() {
			notify("WATCHDOG=1")
			warned = false
		} else if !warned {
			log.Error("scheduler not responding; withholding the systemd watchdog ping", "watchdog", wd)
			warned = true
		}
		t.Reset(wd / 2)
	}
}

// notifier returns the function that sends sd_notify messages; errors are
// logged at debug level (there is nothing else to do about them).
func (c *RunCommand) notifier(log *slog.Logger) func(string) {
	send := c.notify
	if send == nil {
		send = func(state string) error {
			_, err := daemon.SdNotify(false, state)
			return err
		}
	}
	return func(state string) {
		if err := send(state); err != nil {
			log.Debug("sd_notify failed", "state", state, "err", err)
		}
	}
}

// healthHandler answers 200 "ok" when a quorum of the backend's servers answers and
// votes, else 503 with the reason; either way a second line says which
// containment of the jobs' processes is in force ("containment: cgroup
// PATH" or "containment: process tree").
func healthHandler(sched *scheduler.Scheduler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := sched.Healthy(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
		} else {
			fmt.Fprintln(w, "ok")
		}
		fmt.Fprintln(w, "containment:", sched.Containment())
	})
}

// buildInfo is leasecron_build_info{version,goversion} = 1.
func buildInfo() prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leasecron_build_info",
		Help: "A metric with a constant 1 value labelled by leasecron's version and Go version.",
	}, []string{"version", "goversion"})
	g.WithLabelValues(Version(), runtime.Version()).Set(1)
	return g
}
