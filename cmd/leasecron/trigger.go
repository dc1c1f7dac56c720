package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/leasecron/leasecron/scheduler"
)

// TriggerCommand runs one job now, once, under its lease (so never at the
// same time as a scheduled run of it on any host), and waits for it. It
// does not mark any tick completed.
type TriggerCommand struct {
	stdout, stderr io.Writer
	redisLog       *redisLogger // see RunCommand
}

// Run acquires the job's lease, runs the job with its output logged to
// stderr, and prints the run's record. It returns an exitError carrying the
// job's exit code when the job failed.
func (c *TriggerCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("trigger")
	config := configFlag(fs)
	id := fs.String("id", "", "")
	asJSON := fs.Bool("json", false, "")
	logFormat := fs.String("log-format", "text", "")
	logLevel := fs.String("log-level", "info", "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usageErrorf("missing the job to run")
	case len(pos) > 1:
		return usageErrorf("one job at a time; got %q", pos)
	}
	if err := checkIDFlag(*id); err != nil {
		return err
	}
	name := pos[0]
	log, err := newLogger(c.stderr, *logFormat, *logLevel)
	if err != nil {
		return err
	}
	c.redisLog.use(log)
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	if cfg.Job(name) == nil {
		return &configError{err: fmt.Errorf("no job named %q in %s", name, cfg.File)}
	}
	if *id != "" {
		cfg.ID = *id
	}

	// SIGINT/SIGTERM stop the job (SIGTERM, SIGKILL after kill_grace) and
	// release the lease.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	be, err := openBackend(ctx, cfg, backendOptions{log: log})
	if err != nil {
		return err
	}
	sched, err := scheduler.New(cfg, scheduler.Options{Logger: log, Backend: be})
	if err != nil {
		_ = be.Close()
		return err
	}
	defer sched.Close()
	rec, err := sched.Trigger(ctx, name)
	if err != nil && rec.Job == "" {
		return err // it did not run: lease held, no quorum, ...
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("write record: %w", err)
		}
	} else {
		writeRecord(c.stdout, rec)
	}
	if err == nil && rec.Result == "ok" {
		return nil
	}
	code := rec.Exit
	if code <= 0 {
		code = exitFailure
	}
	if err == nil {
		err = fmt.Errorf("job %s: %s (exit %d)", name, rec.Result, rec.Exit)
	}
	return &exitError{code: code, err: err}
}

// writeRecord prints a run record, one field a line.
func writeRecord(w io.Writer, r scheduler.RunRecord) {
	fmt.Fprintf(w, "job:      %s\n", r.Job)
	fmt.Fprintf(w, "host:     %s\n", r.Host)
	fmt.Fprintf(w, "fence:    %d\n", r.Fence)
	fmt.Fprintf(w, "start:    %s\n", r.Start.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(w, "end:      %s\n", r.End.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(w, "duration: %s\n", r.Duration().Round(time.Millisecond))
	fmt.Fprintf(w, "result:   %s\n", r.Result)
	fmt.Fprintf(w, "exit:     %d\n", r.Exit)
	if r.Signal != "" {
		fmt.Fprintf(w, "signal:   %s\n", r.Signal)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error:    %s\n", r.Error)
	}
}

// Usage prints the command's help.
func (c *TriggerCommand) Usage() {
	fmt.Fprintf(c.stdout, `Usage: leasecron trigger [-c FILE] [flags] JOB

Runs JOB once, now, on this host, under the job's lease: it fails at once if
the job is running anywhere (the lease is held), and while it runs no
scheduled tick of the job can start on any host. It does not mark any tick
completed. The job gets LEASECRON_MANUAL=1 besides the usual LEASECRON_*
variables; its output is logged to stderr. SIGINT/SIGTERM stop the job and
release the lease. The run's record is printed when it ends.

Flags:
	-c, --config FILE     config file (default %s)
	--id NAME             this host's name in the lease and the record
	--json                print the record as JSON
	--log-format FORMAT   text (default) or json
	--log-level LEVEL     debug, info (default), warn or error

Exit codes: 0 the job succeeded; the job's exit code when it failed (128+n
when killed by signal n); 1 when it could not run (lease held, no quorum) or
ended without an exit code; 2 usage or config error (also an unknown JOB).
`, defaultConfig)
}
