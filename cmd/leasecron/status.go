package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/scheduler"
)

// StatusCommand shows, from any host, every job's next tick, the current
// lease holder and its time left, the newest completed tick and the last run,
// its pause flag and the hosts that may run it, the live hosts (from their
// heartbeats), and the health of every server of the backend.
type StatusCommand struct {
	stdout, stderr io.Writer
}

// Run reads the state from the config's lease store and prints it as tables
// (or JSON with --json). It fails (exit code 1) when fewer than a quorum of
// nodes answered and vote, after printing what it could read.
func (c *StatusCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("status")
	config := configFlag(fs)
	asJSON := fs.Bool("json", false, "")
	timeout := fs.Duration("timeout", 10*time.Second, "")
	runs := fs.Int("runs", 0, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("unexpected arguments %q", pos)
	}
	if *runs < 0 || *runs > lease.MaxLogLimit {
		return usageErrorf("--runs %d: want 0 to %d", *runs, lease.MaxLogLimit)
	}
	if *timeout <= 0 {
		return usageErrorf("--timeout must be positive")
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	be, err := openBackend(ctx, cfg, backendOptions{minTimeout: 500 * time.Millisecond, warm: true})
	if err != nil {
		return err
	}
	defer be.Close()
	now := time.Now() // after the first contact, which may take seconds
	st, err := scheduler.ReadStatus(ctx, cfg, be, now, *runs)
	if err != nil {
		return err
	}
	if st.Hosts == nil {
		st.Hosts = []scheduler.HostBeat{}
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return fmt.Errorf("write status: %w", err)
		}
	} else {
		writeStatus(c.stdout, st, now)
	}
	reachable, voting := 0, 0
	for _, n := range st.Nodes {
		if n.OK {
			reachable++
			if n.Voting {
				voting++
			}
		}
	}
	if voting < st.Quorum {
		return fmt.Errorf("no quorum: %d of %d nodes reachable, %d of them voting, %d needed", reachable, len(st.Nodes), voting, st.Quorum)
	}
	return nil
}

// writeStatus prints st as two tables, jobs and nodes.
func writeStatus(w io.Writer, st *scheduler.Status, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tNEXT TICK\tHOLDER\tTTL LEFT\tLAST RUN HOST\tLAST TICK\tRESULT\tDURATION")
	var errs []string
	for _, j := range st.Jobs {
		holder, ttl := "-", "-"
		if j.Holder != "" {
			holder, ttl = formatHolder(j.Holder), j.TTL.Round(time.Millisecond).String()
		}
		host, tick, result, dur := "-", "-", "never run", "-"
		if j.Err != "" {
			result = "unknown (read failed)" // the error is printed below
		}
		if r := j.Last; r != nil {
			host, tick, dur = r.Host, "manual", r.Duration().Round(time.Millisecond).String()
			if !r.Tick.IsZero() {
				tick = formatTime(r.Tick)
			}
			result = fmt.Sprintf("%s (exit %d)", r.Result, r.Exit)
			if r.Signal != "" {
				result = fmt.Sprintf("%s (%s)", r.Result, r.Signal)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			j.Name, formatNext(j.Next, now), holder, ttl, host, tick, result, dur)
		if j.Err != "" {
			errs = append(errs, fmt.Sprintf("%s: %s", j.Name, j.Err))
		}
	}
	_ = tw.Flush()
	for _, e := range errs {
		fmt.Fprintf(w, "error: %s\n", e)
	}

	fmt.Fprintln(w)
	writeFleet(w, st, now)
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tREACHABLE\tLATENCY\tVOTING\tERROR")
	reachable, voting := 0, 0
	for _, n := range st.Nodes {
		ok, lat, vote, errText := "no", "-", "no", n.Err
		if n.OK {
			reachable++
			ok, lat = "yes", formatLatency(n.Latency)
			if n.Voting {
				voting++
				vote = "yes"
			} else {
				vote = "no: restarted"
				if !n.RestartedAt.IsZero() {
					vote += " " + now.Sub(n.RestartedAt).Round(time.Second).String() + " ago"
				}
				if !n.VotingAt.IsZero() {
					vote += ", votes in " + max(n.VotingAt.Sub(now), 0).Round(time.Second).String()
				}
			}
		}
		if errText == "" {
			errText = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Node, ok, lat, vote, errText)
	}
	_ = tw.Flush()
	state := "ok"
	if voting < st.Quorum {
		state = "LOST"
	}
	fmt.Fprintf(w, "\nquorum %s: %d of %d nodes reachable, %d voting, %d needed",
		state, reachable, len(st.Nodes), voting, st.Quorum)
	if st.Host != "" {
		fmt.Fprintf(w, " (as seen from %s)", st.Host)
	}
	fmt.Fprintln(w)
}

// formatHolder turns a lease owner "tick=UNIX host=H" into "H, tick TIME"
// ("tick=manual host=H" into "H, manual trigger"); other values are shown
// as they are.
func formatHolder(owner string) string {
	t, host, ok := strings.Cut(owner, " host=")
	if !ok || !strings.HasPrefix(t, "tick=") {
		return owner
	}
	t = strings.TrimPrefix(t, "tick=")
	if t == "manual" {
		return host + ", manual trigger"
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return owner
	}
	return host + ", tick " + formatTime(time.Unix(n, 0))
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// formatNext shows the next tick and how far away it is.
func formatNext(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return fmt.Sprintf("%s (in %s)", formatTime(t), max(t.Sub(now), 0).Round(time.Second))
}

func formatLatency(d time.Duration) string {
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(100 * time.Microsecond).String()
}

// Usage prints the command's help.
func (c *StatusCommand) Usage() {
	fmt.Fprintf(c.stdout, `Usage: leasecron status [-c FILE] [--json] [--runs N] [--timeout DUR]

Shows, as seen from the servers of the config's backend (it works on any
host, with or without a running daemon):

  jobs:  next tick (by this host's clock), current lease holder (host and
         tick) and its time left, last run (host, tick, result and exit
         code, duration); whether it is paused (by whom, when, why: see
         'leasecron pause'), which hosts may run it (run_on) and which of
         the live hosts that is
  hosts: the live hosts from their heartbeats: id, labels, version, load
         average, jobs running / max_parallel, last heartbeat, containment
         of the jobs' processes ("cgroup PATH" or "process tree")
  runs:  with --runs N, the last N runs of each job (as 'leasecron history')
  nodes: URL (password redacted), reachable, latency, voting (a node that
         restarted recently does not vote until one lease TTL has passed)

Flags:
	-c, --config FILE   config file (default %s)
	--json              print the status as JSON (snake_case keys, durations
	                    in nanoseconds)
	--runs N            also show the last N runs of each job (default 0)
	--timeout DUR       give up after DUR (default 10s)

Exit codes: 0 a quorum of nodes is reachable and votes, 1 it is not (the
status is still printed), 2 usage or config error.
`, defaultConfig)
}
