package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/scheduler"
)

// CheckCommand validates a config file without contacting the backend, the
// same validation the daemon does at start and on SIGHUP.
type CheckCommand struct {
	stdout, stderr io.Writer
}

// Run loads the config file. It prints every error on its own line (file,
// line and field first) and returns a config error (exit code 2) if there
// is any; otherwise it prints the warnings and "ok: N jobs, M nodes" (for
// redis), "ok: N jobs, postgres URL" or "ok: N jobs, mysql DSN" (without
// the password), or
// "ok: N jobs, etcd ENDPOINTS; ..." / "ok: N jobs, zookeeper SERVERS; ...",
// the line going on with how lease.ttl maps onto the backend's leases.
// When this host's id or labels are given (--id, --label,
// LEASECRON_LABELS) or a job has run_on, one line per job follows: whether
// this host may run it.
func (c *CheckCommand) Run(_ context.Context, args []string) error {
	fs := newFlagSet("check")
	config := configFlag(fs)
	var host hostFlags
	host.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("unexpected arguments %q (the config file goes after -c)", pos)
	}
	labels, err := host.resolve()
	if err != nil {
		return err
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		for _, line := range errorLines(err) {
			fmt.Fprintln(c.stderr, line)
		}
		return &exitError{code: exitUsage}
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(c.stderr, "warning: %s\n", w)
	}
	fmt.Fprintf(c.stdout, "ok: %s, %s\n", plural(len(cfg.Jobs), "job"), cfg.Backend.Summary(cfg.Lease))
	if slices.ContainsFunc(cfg.Jobs, (*scheduler.Job).HasLimits) {
		have := strings.Join(scheduler.ProbeControllers(), ", ")
		if have == "" {
			have = "none"
		}
		fmt.Fprintf(c.stdout, "limits here: %s (the cgroup hierarchy applying each controller's limits, in this shell's cgroups)\n", have)
	}
	for _, p := range cfg.LimitProblems(scheduler.ProbeLimits) {
		fmt.Fprintf(c.stderr, "warning: %s\n", p)
	}
	host.apply(cfg, labels)
	if host.given() || hasRunOn(cfg) {
		writeEligibility(c.stdout, cfg)
	}
	return nil
}

// hasRunOn reports whether a job of cfg restricts its hosts.
func hasRunOn(cfg *config.Config) bool {
	for _, j := range cfg.Jobs {
		if len(j.RunOn.Labels) > 0 || len(j.RunOn.Hosts) > 0 {
			return true
		}
	}
	return false
}

// writeEligibility says for each job whether this host (cfg.ID and
// cfg.Labels) may run it.
func writeEligibility(w io.Writer, cfg *config.Config) {
	fmt.Fprintf(w, "host %s (labels %s):\n", cfg.ID, formatLabels(cfg.Labels))
	for _, j := range cfg.Jobs {
		verdict := "eligible"
		if !j.RunOn.Eligible(cfg.ID, cfg.Labels) {
			verdict = "not eligible"
		}
		fmt.Fprintf(w, "  %s: %s (run_on: %s)\n", j.Name, verdict, j.RunOn)
	}
}

// Usage prints the command's help.
func (c *CheckCommand) Usage() {
	fmt.Fprintf(c.stdout, `Usage: leasecron check [-c FILE] [--id NAME] [--label KEY=VALUE]...

Validates a config file the way the daemon does at start and on SIGHUP
(YAML syntax, unknown keys, exactly one backend section, node, database and
etcd URLs, ZooKeeper servers, password, auth and TLS files, duplicate job
names, cron expressions, durations, lease timing) without contacting the
backend. For etcd and ZooKeeper it also says how lease.ttl maps onto the
backend's leases (whole-second etcd leases; the ZooKeeper session timeout). Every problem is printed on
its own line with the file, line and field.

When --id, --label or $LEASECRON_LABELS is given, or a job has run_on, it
then says for each job whether this host (its id and labels, as 'leasecron
run' with the same flags would have them) may run it.

Flags:
	-c, --config FILE   config file (default %s)
	--id NAME           this host's id (default: id: of the file, or the hostname)
	--label KEY=VALUE   a label of this host (repeatable; added to $LEASECRON_LABELS)

A job with memory_max, cpu_max or tasks_max whose limits cannot be applied
on this host (no cgroup v2, or its memory, cpu or pids controller not
available where check runs) gets a warning naming file, line and why: the
daemon does not run such a job on such a host.

Exit codes: 0 valid (warnings may be printed), 2 invalid or unreadable.
`, defaultConfig)
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
