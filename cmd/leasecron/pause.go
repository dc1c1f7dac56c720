package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/leasecron/leasecron/scheduler"
)

// PauseCommand pauses (or, with resume set, resumes) jobs fleet-wide: it
// writes the jobs' pause flags in the backend, which every host reads
// with its heartbeat; no config edit or reload is needed on any host.
type PauseCommand struct {
	stdout, stderr io.Writer
	resume         bool // `leasecron resume`
}

// cliRequestTimeout is the least per-request timeout of pause, resume
// and history: one-shot commands that --timeout bounds as a whole, and
// that should not fail because a server was slow to answer once.
const cliRequestTimeout = 2 * time.Second

// name is the command's name.
func (c *PauseCommand) name() string {
	if c.resume {
		return "resume"
	}
	return "pause"
}

// Run checks the job names against the config, then writes one flag per
// job (or the "*" flag with --all) and prints what was done. Nothing is
// written when a job is unknown.
func (c *PauseCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet(c.name())
	config := configFlag(fs)
	all := fs.Bool("all", false, "")
	timeout := fs.Duration("timeout", 10*time.Second, "")
	var reason *string
	var stop *bool
	if !c.resume {
		reason = fs.String("reason", "", "")
		stop = fs.Bool("stop", false, "")
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0 && !*all:
		return usageErrorf("name the jobs to %s, or give --all", c.name())
	case len(pos) > 0 && *all:
		return usageErrorf("jobs %q and --all: give one or the other", pos)
	}
	if *timeout <= 0 {
		return usageErrorf("--timeout must be positive")
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	var unknown []string
	for _, n := range pos {
		if cfg.Job(n) == nil {
			unknown = append(unknown, fmt.Sprintf("%q", n))
		}
	}
	if len(unknown) > 0 {
		what := "no job named "
		if len(unknown) > 1 {
			what = "no jobs named "
		}
		return &configError{err: fmt.Errorf("%s%s in %s; nothing %sd", what, strings.Join(unknown, ", "), cfg.File, c.name())}
	}
	info := scheduler.PauseInfo{Paused: !c.resume, By: whoAmI(), At: time.Now().UTC()}
	if reason != nil {
		info.Reason = strings.TrimSpace(*reason)
		info.Stop = *stop
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	be, err := openBackend(ctx, cfg, backendOptions{minTimeout: cliRequestTimeout})
	if err != nil {
		return err
	}
	defer be.Close()
	var jobs []string // nil: every job ("*")
	if !*all {
		jobs = pos
	}
	// A flag written again with the same version changes nothing, so a
	// failed write is retried until --timeout.
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err = scheduler.SetPause(ctx, be, cfg, jobs, info)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
	for _, line := range pauseReport(jobs, info) {
		fmt.Fprintln(c.stdout, line)
	}
	return nil
}

// pauseReport says what a pause or resume did, one line per job ("every
// job" for --all).
func pauseReport(jobs []string, info scheduler.PauseInfo) []string {
	verb := "resumed"
	if info.Paused {
		verb = "paused"
	}
	var extra []string
	if info.Paused && info.Reason != "" {
		extra = append(extra, "reason: "+info.Reason)
	}
	if info.Paused && info.Stop {
		extra = append(extra, "runs in progress are stopped")
	}
	tail := ""
	if len(extra) > 0 {
		tail = " (" + strings.Join(extra, "; ") + ")"
	}
	if jobs == nil {
		what := "every job"
		if !info.Paused {
			what = "every job, also those paused one by one"
		}
		return []string{fmt.Sprintf("%s %s%s", verb, what, tail)}
	}
	out := make([]string, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, fmt.Sprintf("%s %s%s", verb, j, tail))
	}
	return out
}

// whoAmI is "user@host" for PauseInfo.By.
func whoAmI() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return name + "@" + host
}

// Usage prints the command's help.
func (c *PauseCommand) Usage() {
	if c.resume {
		fmt.Fprintf(c.stdout, `Usage: leasecron resume [-c FILE] JOB... | --all

Clears the fleet-wide pause flag of each JOB (or, with --all, of every
job: this also resumes the jobs paused one by one). Every host sees it at
its next heartbeat; ticks due from then on run as usual (the ticks skipped
while it was paused are not made up).

Of a job's own flag and the --all flag, the one written last decides:
"resume JOB" after "pause --all" resumes JOB alone.

Flags:
	-c, --config FILE   config file (default %s)
	--all               resume every job
	--timeout DUR       give up after DUR (default 10s)

Exit codes: 0 resumed, 1 the backend could not be written (no quorum, ...),
2 usage or config error (no job or --all, unknown job: then nothing is
written).
`, defaultConfig)
		return
	}
	fmt.Fprintf(c.stdout, `Usage: leasecron pause [-c FILE] JOB... | --all [--reason TEXT] [--stop]

Pauses each JOB (or, with --all, every job) on every host: a fleet-wide
flag in the backend, read by each host with its heartbeat. A paused job's
ticks are skipped (counted in leasecron_ticks_skipped_total{reason="paused"})
until 'leasecron resume'. The flag records who paused (user@host),
when and why; 'leasecron status' shows it.

Runs in progress go on unless --stop is given: then the hosts stop them
(SIGTERM, SIGKILL after kill_grace) through the abort path: their ticks are
released, not completed (the run's record says "stopped"). A job that had
already ended on its own keeps the result of its exit.

Of a job's own flag and the --all flag, the one written last decides.

Flags:
	-c, --config FILE   config file (default %s)
	--all               pause every job
	--reason TEXT       why (shown by status)
	--stop              also stop the runs in progress
	--timeout DUR       give up after DUR (default 10s)

Exit codes: 0 paused, 1 the backend could not be written (no quorum, ...),
2 usage or config error (no job or --all, unknown job: then nothing is
written).
`, defaultConfig)
}
