package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/oklog/run"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/lease"
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
	webConfig           string // --web.config.file (webconfig.go)
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
	fs.StringVar(&f.webConfig, "web.config.file", "", "")
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
	if f.webConfig != "" && f.metrics == "" {
		return f, usageErrorf("--web.config.file secures the --metrics listener: give --metrics too")
	}
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

	f, log, cfg, err := c.setup(args)
	if err != nil {
		return err
	}
	notify := c.notifier(log)
	var web *webServer
	if f.metrics != "" {
		if web, err = listenWeb(f.metrics); err != nil {
			return err
		}
		defer web.ln.Close()
	}
	sched, be, err := startScheduler(ctx, f, cfg, log, web.metricsOf(), notify)
	if err != nil {
		return err
	}
	defer sched.Close()
	if web != nil {
		web.mux.Handle("/healthz", healthHandler(sched))
		web.mux.Handle("/", newStatusPage(sched, cfg.File, log)) // the web status page (web.go)
	}
	logStart(log, cfg, sched, len(be.Servers()), web)
	// Parsing the config (yaml.v3's node tree) is the daemon's largest
	// allocation; with 10,000 jobs it peaks near 100 MiB where the
	// daemon then holds about a third of that. Return it to the OS now,
	// so that RSS shows what the daemon holds, not the start-up peak
	// (the runtime would otherwise give it back slowly, if at all).
	debug.FreeOSMemory()

	err = c.serve(ctx, hup, f, cfg, sched, web, log, notify)
	switch {
	case err == nil, errors.Is(err, run.ErrSignal), errors.Is(err, context.Canceled):
		log.Info("stopped", "reason", errString(err))
		return nil
	default:
		log.Error("stopped", "err", err)
		return err
	}
}

// setup reads the command line and the config file, and logs what the
// config and the flags warn of.
func (c *RunCommand) setup(args []string) (runFlags, *slog.Logger, *config.Config, error) {
	f, err := c.parse(args)
	if err != nil {
		return f, nil, nil, err
	}
	log, err := newLogger(c.stderr, f.logFormat, f.logLevel)
	if err != nil {
		return f, nil, nil, err
	}
	c.redisLog.use(log)
	cfg, err := loadConfig(f.config)
	if err != nil {
		return f, nil, nil, err
	}
	if err := checkWebConfig(f.webConfig); err != nil { // webconfig.go
		return f, nil, nil, err
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
		log.Warn("TEST ONLY: restart detection is off; restarted servers vote at once (unsafe)")
	}
	return f, log, cfg, nil
}

// startScheduler opens the config's backend and builds the scheduler on
// it; closing the scheduler closes the backend.
func startScheduler(ctx context.Context, f runFlags, cfg *config.Config, log *slog.Logger, metrics *scheduler.Metrics,
	notify func(string)) (*scheduler.Scheduler, lease.Backend, error) {
	be, err := openBackend(ctx, cfg, backendOptions{log: log, metrics: metrics, unsafeNoRestartDetection: f.noRestartDetection})
	if err != nil {
		return nil, nil, err
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
		return nil, nil, err
	}
	return sched, be, nil
}

// logStart logs what the daemon starts with.
func logStart(log *slog.Logger, cfg *config.Config, sched *scheduler.Scheduler, servers int, web *webServer) {
	log.Info("leasecron starting", "version", Version(), "id", cfg.ID, "config", cfg.File,
		"jobs", len(cfg.Jobs), "backend", cfg.Backend.Name(), "servers", servers, "metrics", web.addr(),
		"labels", formatLabels(cfg.Labels), "max_parallel", cfg.MaxParallel,
		"containment", sched.Containment())
	if why := sched.ContainmentReason(); why != "" {
		log.Warn("jobs are contained by the process tree, not by cgroups: a job's process that escapes it "+
			"(setsid and a double fork are caught; a process moved out by another service is not) is killed only "+
			"while the daemon runs, and a lost supervisor's lease is left to run out until all is confirmed dead",
			"reason", why)
	}
	if have, why := sched.LimitControllers(); why != "" {
		log.Info("per-job limits: not every cgroup controller is available for the jobs; jobs whose limits need a missing one are not run here",
			"controllers", strings.Join(have, ","), "why", why)
	} else if len(have) > 0 {
		log.Info("per-job limits: each applied by its controller on the cgroup hierarchy named (v2: the job's cgroup; v1: a cgroup of the job's in that controller's v1 hierarchy)",
			"controllers", strings.Join(have, ","))
	}
	for _, j := range cfg.Jobs {
		if err := sched.CannotLimit(j); err != nil {
			log.Error("a job's limits cannot be applied on this host; this daemon will not run it", "job", j.Name, "err", err)
		}
	}
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
host, and the host that wins the job's lease for the tick runs it.
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
	--metrics ADDR          serve Prometheus metrics on http://ADDR/metrics,
	                        health on /healthz (200 "ok", or 503 and the reason)
	                        and the status page on / (a page per job at /job/NAME)
	--web.config.file FILE  TLS, client certificates and basic auth (bcrypt) for
	                        the --metrics listener, in the Prometheus exporters'
	                        web config format (exporter-toolkit)
	--log-format FORMAT     text (default) or json; logs go to stderr
	--log-level LEVEL       debug, info (default), warn or error

Testing only (never in production):
	--test-clock-offset DUR       skew this daemon's clock by DUR (e.g. -2s)
	--test-no-restart-detection   let restarted Redis nodes vote at once (unsafe)

Exit codes: 0 stopped cleanly, 1 runtime failure, 2 usage or config error.
`, defaultConfig)
}
