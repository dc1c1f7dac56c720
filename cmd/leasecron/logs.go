package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/scheduler"
)

// LogsCommand prints the output of a job's runs from any host: the tail
// each run's record keeps in the backend's history, or (-f) the running
// attempt's tail as its host publishes it.
type LogsCommand struct {
	stdout, stderr io.Writer
}

// followPoll is how often `logs -f` reads the running attempt's tail. With
// the host's publishing period (one second) it bounds how late a line
// shows: about 1.5 s after the job printed it, plus a request.
const followPoll = 500 * time.Millisecond

// logsFlags are the flags of `leasecron logs`.
type logsFlags struct {
	config, tick string
	last         int
	asJSON       bool
	follow       bool
	dryRun       bool
	timeout      time.Duration
	job          string
	tickSet      bool
}

func (c *LogsCommand) parse(args []string) (*logsFlags, error) {
	fs := newFlagSet("logs")
	f := &logsFlags{}
	configPath := configFlag(fs)
	fs.StringVar(&f.tick, "tick", "", "")
	fs.IntVar(&f.last, "last", 1, "")
	fs.BoolVar(&f.asJSON, "json", false, "")
	fs.BoolVar(&f.follow, "f", false, "")
	fs.BoolVar(&f.follow, "follow", false, "")
	fs.BoolVar(&f.dryRun, "dry-run", false, "")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	f.config = *configPath
	switch {
	case len(pos) == 0:
		return nil, usageErrorf("missing the job whose output to show")
	case len(pos) > 1:
		return nil, usageErrorf("one job at a time; got %q", pos)
	}
	f.job = pos[0]
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch {
	case set["tick"] && set["last"]:
		return nil, usageErrorf("--tick and --last exclude each other")
	case f.follow && (set["tick"] || set["last"] || f.asJSON):
		return nil, usageErrorf("-f follows the running attempt: not with --tick, --last or --json")
	case f.last < 1 || f.last > lease.MaxLogLimit:
		return nil, usageErrorf("--last %d: want 1 to %d", f.last, lease.MaxLogLimit)
	case f.timeout <= 0:
		return nil, usageErrorf("--timeout must be positive")
	case !config.ValidJobName(f.job):
		return nil, usageErrorf("job name %q may only contain letters, digits, '_', '.' and '-'", f.job)
	}
	f.tickSet = set["tick"]
	return f, nil
}

// Run prints the output of the job's last run (--last N: of the last N
// runs, oldest first; --tick T: of every attempt of tick T), or follows
// its running attempt (-f).
func (c *LogsCommand) Run(ctx context.Context, args []string) error {
	f, err := c.parse(args)
	if err != nil {
		return err
	}
	var tick time.Time
	if f.tickSet {
		if tick, err = parseTick(f.tick); err != nil {
			return usageErrorf("--tick: %w", err)
		}
	}
	cfg, err := loadConfig(f.config)
	if err != nil {
		return err
	}
	logOf := f.job
	if f.dryRun {
		logOf = scheduler.DryRunJob(f.job)
	}
	octx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	be, err := openBackend(octx, cfg, backendOptions{minTimeout: cliRequestTimeout})
	if err != nil {
		return err
	}
	defer be.Close()
	if f.follow {
		return c.follow(ctx, be, logOf, f.timeout)
	}
	n := f.last
	if f.tickSet {
		n = lease.MaxLogLimit
	}
	recs, err := scheduler.ReadHistory(octx, be, logOf, n)
	if err != nil {
		return err
	}
	if f.tickSet {
		recs = slices.DeleteFunc(recs, func(r scheduler.RunRecord) bool { return !r.Tick.Equal(tick) })
	}
	slices.Reverse(recs) // oldest first, as output reads
	if f.asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if recs == nil {
			recs = []scheduler.RunRecord{}
		}
		if err := enc.Encode(recs); err != nil {
			return fmt.Errorf("write logs: %w", err)
		}
		return nil
	}
	if len(recs) == 0 {
		if f.tickSet {
			return fmt.Errorf("%s: no run of tick %s recorded (history_limit keeps the newest runs only)", f.job, formatTime(tick))
		}
		fmt.Fprintf(c.stdout, "%s: no runs recorded\n", f.job)
		return nil
	}
	for _, r := range recs {
		fmt.Fprintln(c.stdout, runHeader(r.Host, r.Tick, r.Attempt, r.Fence, r.Start))
		if err := r.Output.WriteText(c.stdout, true); err != nil {
			return fmt.Errorf("write logs: %w", err)
		}
		fmt.Fprintln(c.stdout, runFooter(r))
	}
	return nil
}

// parseTick reads --tick: RFC 3339 or Unix seconds.
func parseTick(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want RFC 3339 (2026-01-02T03:04:00Z) or Unix seconds", s)
	}
	return t.UTC(), nil
}

// runHeader is the line before a run's output.
func runHeader(host string, tick time.Time, attempt int, fence int64, start time.Time) string {
	return fmt.Sprintf("== %s · tick %s · attempt %d · fence %d · started %s ==",
		host, formatTick(tick), attempt, fence, formatTime(start))
}

// runFooter is the line after a run's output.
func runFooter(r scheduler.RunRecord) string {
	s := fmt.Sprintf("== %s (exit %s) after %s", r.Result, formatExit(r), r.Duration().Round(time.Millisecond))
	if r.Error != "" {
		s += ": " + r.Error
	}
	return s + " =="
}

// errTailLost is `logs -f`'s error when the followed attempt's host
// stopped publishing its tail and no record of the attempt came.
var errTailLost = errors.New("the attempt's host stopped publishing its output and left no record (did the host die?)")

// Usage prints the command's help.
func (c *LogsCommand) Usage() {
	fmt.Fprintf(c.stdout, `Usage: leasecron logs [-c FILE] JOB [--last N | --tick T] [--json] [--dry-run]
       leasecron logs [-c FILE] -f JOB

Prints the output of JOB's runs from any host: the last output_limit bytes
(default 64KiB) of each run's stdout and stderr, interleaved, each line
with its time (UTC) and stream (out or err), kept with the run's record in
the backend's history (history_limit runs, default 50). A line at the top
says what was cut from the start of a longer output. redact patterns and
secret_env values were replaced by [REDACTED] before anything was stored.

With -f it follows the running attempt of JOB wherever it runs (or waits
for the next one to start): its host publishes the tail to the backend
about once a second while it runs; -f prints the new lines as they come and
exits when the attempt ends, with the rest of its output from its record.

Flags:
	-c, --config FILE   config file (default %s)
	--last N            the last N runs, oldest first (default 1)
	--tick T            every attempt of tick T (RFC 3339 or Unix seconds)
	--json              print the run records, with their output, as JSON
	-f, --follow        follow the running (or next) attempt
	--dry-run           the runs of daemons run with --dry-run
	--timeout DUR       give up reading after DUR (default 10s; with -f:
	                    each read)

Exit codes: 0 success, 1 the backend could not be read, no record of the
tick, or (-f) the attempt's host vanished without a record; 2 usage or
config error.
`, defaultConfig)
}
