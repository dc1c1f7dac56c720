package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasecron/leasecron/scheduler"
)

// exitNoLease is exec's exit code when the lease could not be taken (no
// quorum, unreadable pause flags) or was lost while the command ran (the
// command was then stopped): EX_TEMPFAIL of sysexits.h.
const exitNoLease = 75

// ExecCommand runs one command under a lease, in front of a crontab line
// on every host: `leasecron exec --name NAME [--schedule SPEC] -- CMD`.
type ExecCommand struct {
	stdout, stderr io.Writer
	redisLog       *redisLogger // see RunCommand
}

// execFlags are exec's settings.
type execFlags struct {
	config, name, schedule, timezone, overlap, id string
	grace, deadline, clockOffset                  time.Duration
	skippedExit                                   int
	logFormat, logLevel                           string
}

func (c *ExecCommand) parse(args []string) (execFlags, []string, error) {
	fs := newFlagSet("exec")
	var f execFlags
	config := configFlag(fs)
	fs.StringVar(&f.name, "name", "", "")
	fs.StringVar(&f.schedule, "schedule", "", "")
	fs.StringVar(&f.timezone, "timezone", "", "")
	fs.DurationVar(&f.grace, "grace", -1, "")
	fs.DurationVar(&f.deadline, "deadline", -1, "")
	fs.StringVar(&f.overlap, "overlap", "skip", "")
	fs.IntVar(&f.skippedExit, "skipped-exit", 0, "")
	fs.StringVar(&f.id, "id", "", "")
	fs.StringVar(&f.logFormat, "log-format", "text", "")
	fs.StringVar(&f.logLevel, "log-level", "warn", "")
	fs.DurationVar(&f.clockOffset, "test-clock-offset", 0, "")
	// Flags end at the first word that is not one (or at "--"): the rest
	// is the command with its own arguments, never exec's flags.
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, nil, err
		}
		return f, nil, &usageError{err: err}
	}
	cmd := fs.Args()
	f.config = *config
	switch {
	case f.name == "":
		return f, nil, usageErrorf("missing --name (the job's name: its lease, history and pause flag)")
	case len(cmd) == 0:
		return f, nil, usageErrorf("missing the command, after --")
	case f.overlap != "skip" && f.overlap != "wait":
		return f, nil, usageErrorf("--overlap %q: want skip or wait", f.overlap)
	case f.skippedExit < 0 || f.skippedExit > 255:
		return f, nil, usageErrorf("--skipped-exit %d: want 0 to 255", f.skippedExit)
	case f.schedule == "" && (f.grace >= 0 || f.timezone != ""):
		return f, nil, usageErrorf("--grace and --timezone need --schedule")
	case f.grace < -1 || f.deadline < -1 || f.grace == -1 && isSet(fs, "grace") || f.deadline == -1 && isSet(fs, "deadline"):
		return f, nil, usageErrorf("--grace and --deadline must not be negative")
	case f.schedule != "" && f.deadline == 0:
		return f, nil, usageErrorf("--deadline 0 with --schedule: no run could ever start (cron fires after the tick)")
	}
	if err := checkIDFlag(f.id); err != nil {
		return f, nil, err
	}
	return f, cmd, nil
}

// Run takes the lease, runs the command and exits as the Usage says.
func (c *ExecCommand) Run(ctx context.Context, args []string) error {
	f, argv, err := c.parse(args)
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
	if f.id != "" {
		cfg.ID = f.id
	}
	j, err := cfg.ExecJob(f.name, f.schedule, execTimezone(f.timezone), argv, "")
	if err != nil {
		return usageErrorf("%w", err)
	}
	req := scheduler.ExecRequest{Job: j, Wait: f.overlap == "wait"}
	if f.schedule != "" {
		if err := slotOf(&req, f, time.Now().Add(f.clockOffset)); err != nil {
			return err
		}
	} else if f.deadline > 0 {
		req.Deadline = time.Now().Add(f.deadline)
	} else {
		req.Deadline = time.Now().Add(cfg.Lease.TTL)
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	be, err := openBackend(ctx, cfg, backendOptions{log: log})
	if err != nil {
		return &exitError{code: exitNoLease, err: err}
	}
	sched, err := scheduler.New(cfg, scheduler.Options{Logger: log, Backend: be, ClockOffset: f.clockOffset,
		JobStdout: c.stdout, JobStderr: c.stderr})
	if err != nil {
		_ = be.Close()
		return err
	}
	defer sched.Close()
	rec, err := sched.Exec(ctx, req)
	var skipped *scheduler.ExecSkipped
	switch {
	case errors.As(err, &skipped) && skipped.Reason == scheduler.SkipLate:
		// Cron fired after the slot's deadline: the schedule, the time
		// zone or --deadline is off — say so where cron mails it.
		log.Warn("not run: the slot's deadline had passed", "job", j.Name, "why", skipped.Error())
		return &exitError{code: f.skippedExit}
	case errors.As(err, &skipped):
		log.Info("not run", "job", j.Name, "why", skipped.Error())
		return &exitError{code: f.skippedExit}
	case errors.Is(err, scheduler.ErrNoLease):
		return &exitError{code: exitNoLease, err: err}
	case err != nil && rec.Job == "":
		return err
	case rec.Result == "shutdown":
		// exec itself was asked to stop (SIGTERM, SIGINT): as a shell
		// reports a command killed by that signal.
		return &exitError{code: 128 + int(syscall.SIGTERM)}
	case rec.Result == "error":
		return &exitError{code: startFailure(rec.Error), err: err}
	}
	return execResult(rec, err)
}

// isSet reports whether flag name was given.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// execTimezone is the zone exec reads --schedule in, as cron reads its
// crontab: --timezone, else $CRON_TZ, else the host's local time ("" when
// neither is set: a job NAME in the file gives its timezone, else Local).
func execTimezone(flagTZ string) string {
	if flagTZ != "" {
		return flagTZ
	}
	return os.Getenv("CRON_TZ")
}

// slotOf maps now to the schedule's slot: the latest tick at or before
// now + grace, so that hosts whose clocks or cron daemons are a little
// early or late agree on it; a run may start until the slot + deadline.
func slotOf(req *scheduler.ExecRequest, f execFlags, now time.Time) error {
	j := req.Job
	period := j.Period(now)
	grace, deadline := f.grace, f.deadline
	if grace < 0 {
		grace = min(period/10, 30*time.Second)
	}
	if deadline < 0 {
		deadline = period / 2
	}
	if grace >= period {
		return usageErrorf("--grace %s is not shorter than the schedule's period %s", grace, period)
	}
	req.Tick = j.Prev(now.Add(grace))
	req.Deadline = req.Tick.Add(deadline)
	return nil
}

// startFailure is the exit code of a command that could not start, as a
// shell reports it: 127 when it was not found, 126 when it may not run.
func startFailure(msg string) int {
	switch {
	case strings.Contains(msg, "not found") || strings.Contains(msg, "no such file"):
		return 127
	case strings.Contains(msg, "permission denied") || strings.Contains(msg, "exec format error"):
		return 126
	}
	return exitFailure
}

// execResult is exec's exit for a command that ran: its own code, 128+n
// when a signal killed it, exitNoLease when it was stopped because its
// lease was lost.
func execResult(rec scheduler.RunRecord, err error) error {
	switch {
	case rec.Result == "ok":
		return nil
	case rec.Result == "aborted" || rec.Result == "stopped":
		return &exitError{code: exitNoLease, err: fmt.Errorf("%s: %s: the command was stopped", rec.Job, rec.Result)}
	case rec.Exit > 0:
		return &exitError{code: rec.Exit}
	case rec.Signal != "":
		return &exitError{code: 128 + signalNumber(rec.Signal)}
	}
	if err == nil {
		err = fmt.Errorf("%s: %s", rec.Job, rec.Result)
	}
	return &exitError{code: exitFailure, err: err}
}

// signalNumber is the number of a signal as the supervisor names it
// (unix.SignalName: "SIGKILL", or "signal 9"); 0 when unknown.
func signalNumber(name string) int {
	if n := unix.SignalNum(name); n != 0 {
		return int(n)
	}
	var n int
	if _, err := fmt.Sscanf(name, "signal %d", &n); err == nil {
		return n
	}
	return 0
}

// Usage prints the command's help.
func (c *ExecCommand) Usage() {
	fmt.Fprintf(c.stderr, `Usage: leasecron exec [-c FILE] --name NAME [--schedule SPEC] [flags] -- COMMAND [ARGS...]

Runs COMMAND under the lease of job NAME, in front of the same crontab line
on every host: no daemon needed. It reads the backend and lease sections of
the config (the daemon's file works; so does one with no jobs); a job NAME
in the file gives its timeout, kill_grace, env, dir, history_limit and
limits (memory_max, cpu_max, tasks_max: exit 1, nothing run, when this
host cannot apply them).

With --schedule (the crontab's own spec, or @every D) "now + grace" maps to
the schedule's latest tick, the slot, which is the lease's epoch: a slot
completed on any host never runs again, and a slot held by another host is
skipped (or waited for with --overlap wait, until the deadline). Flags end at the first word that is
not one: the rest is the command. Without
--schedule the lease is a fleet-wide mutex for the command's lifetime.
Either way the command runs as a daemon's job does: the lease renewed while
it runs, the command killed before the lease could be lost, the
LEASECRON_* environment (fencing token included), a record in 'leasecron
history NAME', 'pause NAME' honoured ('pause --stop NAME' stops the running
command: the flags are read every heartbeat). Its output goes to this command's
stdout and stderr, as the command's would.

Flags:
	-c, --config FILE   config file (default %s)
	--name NAME         the job's name (required)
	--schedule SPEC     the slot's schedule: 5 cron fields, @hourly, @every 10m, ...
	--timezone ZONE     the zone SPEC is read in (default $CRON_TZ, else the file's
	                    job NAME's timezone, else this host's local time, as cron)
	--grace D           skew grace: default a tenth of the period, at most 30s
	--deadline D        no run starts after slot + D (default: half the period;
	                    without --schedule: how long to wait, default lease.ttl)
	--overlap skip|wait skip (default) or wait for a run that holds the lease
	--skipped-exit N    exit code when the slot is done, held or paused (default 0)
	--id NAME           this host's name in the lease and the record
	--log-format FORMAT text (default) or json
	--log-level LEVEL   warn (default), info, debug or error

Exit codes: the command's own code when it ran (128+n when killed by signal
n; 127 when not found, 126 when it may not run; 143 when exec itself got
SIGTERM or SIGINT and stopped it); 0 (or --skipped-exit) when the slot was
done, held elsewhere, paused or past its deadline (the last one logged as a
warning); 75 when the lease could not be taken (no quorum) or was lost
while the command ran, or 'pause --stop NAME' stopped it; 2 usage or
config error
(nothing run).
`, defaultConfig)
}
