package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/scheduler"
)

// defaultHistoryRuns is how many runs `leasecron history` shows without -n.
const defaultHistoryRuns = 20

// HistoryCommand shows the last runs of a job, from any host: the run
// records each host writes to the job's history in the backend.
type HistoryCommand struct {
	stdout, stderr io.Writer
}

// Run reads up to -n records of the job's history, newest first, and
// prints them as a table or (--json) as a JSON array of run records.
func (c *HistoryCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("history")
	configPath := configFlag(fs)
	n := fs.Int("n", defaultHistoryRuns, "")
	asJSON := fs.Bool("json", false, "")
	dryRun := fs.Bool("dry-run", false, "")
	timeout := fs.Duration("timeout", 10*time.Second, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usageErrorf("missing the job whose history to show")
	case len(pos) > 1:
		return usageErrorf("one job at a time; got %q", pos)
	}
	if *n < 1 || *n > lease.MaxLogLimit {
		return usageErrorf("-n %d: want 1 to %d", *n, lease.MaxLogLimit)
	}
	if *timeout <= 0 {
		return usageErrorf("--timeout must be positive")
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	name := pos[0]
	if !config.ValidJobName(name) {
		return usageErrorf("job name %q may only contain letters, digits, '_', '.' and '-'", name)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	be, err := openBackend(ctx, cfg, backendOptions{minTimeout: cliRequestTimeout})
	if err != nil {
		return err
	}
	defer be.Close()
	logOf := name
	if *dryRun {
		logOf = scheduler.DryRunJob(name)
	}
	recs, err := scheduler.ReadHistory(ctx, be, logOf, *n)
	if err != nil {
		return err
	}
	for i := range recs {
		recs[i].Output = nil // `leasecron logs` shows it
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(recs); err != nil {
			return fmt.Errorf("write history: %w", err)
		}
		return nil
	}
	if len(recs) == 0 {
		fmt.Fprintf(c.stdout, "%s: no runs recorded\n", name)
		return nil
	}
	writeHistory(c.stdout, recs)
	return nil
}

// writeHistory prints run records as a table, in the order given.
func writeHistory(w io.Writer, recs []scheduler.RunRecord) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tTICK\tATTEMPT\tSTART\tDURATION\tRESULT\tEXIT\tFENCE")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\n",
			r.Host, formatTick(r.Tick), r.Attempt, formatTime(r.Start),
			r.Duration().Round(time.Millisecond), formatResult(r), formatExit(r), r.Fence)
	}
	_ = tw.Flush()
}

// formatTick is a run's tick, "manual" for a manual trigger.
func formatTick(t time.Time) string {
	if t.IsZero() {
		return "manual"
	}
	return formatTime(t)
}

// formatResult is a run's result, with the reason of a missed or skipped
// tick.
func formatResult(r scheduler.RunRecord) string {
	if r.Reason != "" {
		return r.Result + " (" + r.Reason + ")"
	}
	return r.Result
}

// formatExit is a run's exit code, or the signal that ended it.
func formatExit(r scheduler.RunRecord) string {
	if r.Signal != "" {
		return r.Signal
	}
	return strconv.Itoa(r.Exit)
}

// Usage prints the command's help.
func (c *HistoryCommand) Usage() {
	fmt.Fprintf(c.stdout, `Usage: leasecron history [-c FILE] JOB [-n N] [--json] [--dry-run]

Shows the last runs of JOB from any host, newest first: host, tick
("manual" for a trigger), attempt (1, then 2... for retries), start,
duration, result (ok, failed, timeout, aborted, shutdown, stopped, error,
dry_run; missed or skipped with its reason for a tick that did not run,
recorded once by one host after its deadline), exit code (or the signal that ended the job) and fencing token.
Each host records its runs in the backend (history_limit per job, default
50) before it completes the tick.

Flags:
	-c, --config FILE   config file (default %s)
	-n N                show up to N runs (default %d, at most %d)
	--json              print the run records as a JSON array
	--dry-run           the history of daemons run with --dry-run (kept
	                    apart from the live fleet's)
	--timeout DUR       give up after DUR (default 10s)

Exit codes: 0 success, 1 the backend could not be read, 2 usage or config
error (unknown job, bad -n).
`, defaultConfig, defaultHistoryRuns, lease.MaxLogLimit)
}
