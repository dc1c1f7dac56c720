package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
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

// RunCommand runs the daemon: it fires the config's jobs under their leases
// until SIGTERM or SIGINT, reloads the config on SIGHUP, and talks to
// systemd (Type=notify: READY, RELOADING, STOPPING, STATUS and watchdog
// pings) when started by it.
type RunCommand struct {
	stdout, stderr io.Writer

	// notify sends an sd_notify message; nil means daemon.SdNotify (a no-op
	// when NOTIFY_SOCKET is unset).
	notify func(state string) error
	// redisLog, when set, gets the logger for go-redis's log lines.
	redisLog *redisLogger
}

// runFlags are the flags of `leasecron run`.
type runFlags struct {
	config, metrics     string
	host                hostFlags
	labels              map[string]string // resolved --label and LEASECRON_LABELS
	maxParallel         int               // override of max_parallel when maxParallelSet
	maxParallelSet      bool
	dryRun              bool
	logFormat, logLevel string
	clockOffset         time.Duration
	noRestartDetection  bool
}

// apply sets what the command line overrides on a loaded config: the
// host's id and labels and max_parallel (at start and on every reload).
func (f *runFlags) apply(cfg *config.Config) {
	f.host.apply(cfg, f.labels)
	if f.maxParallelSet {
		cfg.MaxParallel = f.maxParallel
	}
}

func (c *RunCommand) parse(args []string) (runFlags, error) {
	var f runFlags
	fs := newFlagSet("run")
	config := configFlag(fs)
	f.host.register(fs)
	var mp intFlag
	fs.Var(&mp, "max-parallel", "")
	fs.BoolVar(&f.dryRun, "dry-run", false, "")
	fs.StringVar(&f.metrics, "metrics", "", "")
	fs.StringVar(&f.logFormat, "log-format", "text", "")
	fs.StringVar(&f.logLevel, "log-level", "info", "")
	fs.DurationVar(&f.clockOffset, "test-clock-offset", 0, "")
	fs.BoolVar(&f.noRestartDetection, "test-no-restart-detection", false, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return f, err
	}
	if len(pos) > 0 {
		return f, usageErrorf("unexpected arguments %q (the config file goes after -c)", pos)
	}
	if f.labels, err = f.host.resolve(); err != nil {
		return f, err
	}
	if f.maxParallel, f.maxParallelSet, err = maxParallel(&mp); err != nil {
		return f, err
	}
	f.config = *config
	return f, nil
}

// Run starts the daemon and returns when it has stopped: nil after a clean
// stop by SIGTERM/SIGINT (or ctx), a config error if the config file is
// invalid, another error if the daemon could not start or failed.
func (c *RunCommand) Run(ctx context.Context, args []string) error {
	// SIGHUP's default action kills the process: catch it from the start, so
	// a reload that comes early is queued rather than fatal.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	f, err := c.parse(args)
	if err != nil {
		return err
	}
	log, err := newLogger(c.stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	c.redisLog.use(log)
	cfg, err := loadConfig(f.config)
	if err != nil {
		return err
	}
	f.apply(cfg)
	for _, w := range cfg.Warnings {
		log.Warn("config: " + w)
	}
	if f.dryRun {
		log.Warn("dry run: won ticks are recorded and completed without starting their jobs")
	}
	if f.clockOffset != 0 {
		log.Warn("TEST ONLY: this daemon's clock is skewed", "offset", f.clockOffset)
	}
	if f.noRestartDetection {
		log.Warn("TEST ONLY: restart detection is off; restarted Redis nodes vote at once (unsafe)")
	}
	notify := c.notifier(log)

	var metrics *scheduler.Metrics
	var mux *http.ServeMux
	var ln net.Listener
	if f.metrics != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(
			collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			buildInfo(),
		)
		metrics = scheduler.NewMetrics(reg)
		mux = http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		ln, err = net.Listen("tcp", f.metrics)
		if err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		defer ln.Close()
	}

	be, err := openBackend(ctx, cfg, backendOptions{log: log, metrics: metrics, unsafeNoRestartDetection: f.noRestartDetection})
	if err != nil {
		return err
	}
	sched, err := scheduler.New(cfg, scheduler.Options{
		Logger:      log,
		Metrics:     metrics,
		ClockOffset: f.clockOffset,
		Notify:      func(state string) { notify(state) },
		Backend:     be,
		DryRun:      f.dryRun,
		Version:     Version(),
	})
	if err != nil {
		_ = be.Close()
		return err
	}
	defer sched.Close()
	if mux != nil {
		mux.Handle("/healthz", healthHandler(sched))
		mux.Handle("/", newStatusPage(sched, cfg.File, log)) // the web status page (web.go)
	}
	metricsAddr := "" // the address bound, so that --metrics 127.0.0.1:0 shows its port
	if ln != nil {
		metricsAddr = ln.Addr().String()
	}
	log.Info("leasecron starting", "version", Version(), "id", cfg.ID, "config", cfg.File,
		"jobs", len(cfg.Jobs), "backend", cfg.Backend.Name(), "servers", len(be.Servers()), "metrics", metricsAddr,
		"labels", formatLabels(cfg.Labels), "max_parallel", cfg.MaxParallel,
		"containment", sched.Containment())
	if why := sched.ContainmentReason(); why != "" {
		log.Warn("jobs are contained by the process tree, not by cgroups: a job's process that escapes it "+
			"(setsid and a double fork are caught; a process moved out by another service is not) is killed only "+
			"while the daemon runs, and a lost supervisor's lease is left to run out until all is confirmed dead",
			"reason", why)
	}
	// Parsing the config (yaml.v3's node tree) is the daemon's largest
	// allocation; with 10,000 jobs it peaks near 100 MiB where the
	// daemon then holds about a third of that. Return it to the OS now,
	// so that RSS shows what the daemon holds, not the start-up peak
	// (the runtime would otherwise give it back slowly, if at all).
	debug.FreeOSMemory()

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
	if ln != nil {
		// Metrics and /healthz over HTTP.
		srv := &http.Server{Handler: readOnly(mux), ReadHeaderTimeout: 10 * time.Second}
		g.Add(func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
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
		// A Redis outage does not stop the pings: restarting the daemon
		// would not bring Redis back, but would stop running jobs. The
		// pings go on through the shutdown grace; the actor ends when the
		// scheduler has stopped, so its interrupt has nothing to do.
		g.Add(func() error {
			watchdog(sched, wd, schedDone, log, notify)
			return nil
		}, func(error) {})
	}

	err = g.Run()
	switch {
	case err == nil, errors.Is(err, run.ErrSignal), errors.Is(err, context.Canceled):
		log.Info("stopped", "reason", errString(err))
		return nil
	default:
		log.Error("stopped", "err", err)
		return err
	}
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

// healthHandler answers 200 "ok" when a quorum of Redis nodes answers and
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

// newLogger returns a slog logger writing to w in format text or json at
// level (debug, info, warn, error).
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErrorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageErrorf("--log-format %q: want text or json", format)
}

func errString(err error) string {
	if err == nil {
		return "scheduler finished"
	}
	return err.Error()
}

func firstLine(err error) string {
	if lines := errorLines(err); len(lines) > 0 {
		if len(lines) > 1 {
			return fmt.Sprintf("%s (and %d more)", lines[0], len(lines)-1)
		}
		return lines[0]
	}
	return err.Error()
}

// Usage prints the command's help.
func (c *RunCommand) Usage() {
	fmt.Fprintf(c.stdout, `Usage: leasecron run [-c FILE] [flags]

Runs the daemon: every job of the config fires on its schedule on every
host, and the host that wins the job's Redlock lease for the tick runs it.
Runs until SIGTERM or SIGINT: then no new ticks start, running jobs get
shutdown_grace to finish (their leases kept), then are stopped and their
leases released without completing the tick, so another host takes over.
A second SIGINT/SIGTERM during that grace kills the daemon at once (the
jobs' supervisors then kill the jobs).

SIGHUP reloads the config file; an invalid file is logged and the running
config kept. Under systemd (Type=notify) it sends READY=1, RELOADING=1,
STOPPING=1, STATUS= lines and, with WatchdogSec=, watchdog pings.

Flags:
	-c, --config FILE       config file (default %s)
	--id NAME               this host's name in leases, logs and status (overrides id:)
	--label KEY=VALUE       a label of this host, for jobs' run_on (repeatable; added
	                        to $LEASECRON_LABELS "k=v,k2=v2", a flag winning per key)
	--max-parallel N        run at most N jobs at once on this host, 0: no bound
	                        (overrides max_parallel: and $LEASECRON_MAX_PARALLEL,
	                        also after a reload)
	--dry-run               start no job: a won tick is recorded (result dry_run)
	                        and completed, so the fleet's choices can be watched
	--metrics ADDR          serve Prometheus metrics on http://ADDR/metrics and
	                        health on /healthz (200 "ok", or 503 and the reason)
	--log-format FORMAT     text (default) or json; logs go to stderr
	--log-level LEVEL       debug, info (default), warn or error

Testing only (never in production):
	--test-clock-offset DUR       skew this daemon's clock by DUR (e.g. -2s)
	--test-no-restart-detection   let restarted Redis nodes vote at once (unsafe)

Exit codes: 0 stopped cleanly, 1 runtime failure, 2 usage or config error.
`, defaultConfig)
}
