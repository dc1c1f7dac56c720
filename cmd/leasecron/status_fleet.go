package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leasecron/leasecron/scheduler"
)

// writeFleet prints the fleet part of the status: each job's pause flag
// and eligible hosts, the live hosts, the newest runs of each job (when
// read) and the errors reading the fleet's state.
func writeFleet(w io.Writer, st *scheduler.Status, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tPAUSED\tRUN ON\tELIGIBLE HOSTS")
	for _, j := range st.Jobs {
		eligible := strings.Join(j.Eligible, ",")
		if eligible == "" {
			eligible = "none live"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", j.Name, formatPause(j.Paused), j.RunOn, eligible)
	}
	_ = tw.Flush()

	fmt.Fprintln(w)
	if len(st.Hosts) == 0 {
		fmt.Fprintln(w, "no live hosts (no daemon has sent a heartbeat lately)")
	} else {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "HOST\tLABELS\tVERSION\tLOAD\tRUNNING\tLAST SEEN\tCONTAINMENT")
		for _, h := range st.Hosts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%s\t%s\n", h.Host, formatLabels(h.Labels), h.Version, h.Load,
				formatRunning(h), formatAgo(h.Seen, now), formatContainment(h.Containment))
		}
		_ = tw.Flush()
	}
	for _, e := range st.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}

	for _, j := range st.Jobs {
		if len(j.Runs) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nlast runs of %s:\n", j.Name)
		writeHistory(w, j.Runs)
	}
}

// formatPause shows a pause flag: "no", or who paused the job, when and
// why.
func formatPause(p *scheduler.PauseInfo) string {
	if p == nil {
		return "no"
	}
	s := "by " + p.By + " at " + formatTime(p.At)
	if p.All {
		s += " (--all)"
	}
	if p.Stop {
		s += " (--stop)"
	}
	if p.Reason != "" {
		s += ": " + strings.Join(strings.Fields(p.Reason), " ")
	}
	return s
}

// formatContainment shows a host's containment, "-" when its heartbeat
// does not say (an older version).
func formatContainment(c string) string {
	if c == "" {
		return "-"
	}
	return c
}

// formatRunning is "running/max_parallel" ("running/-" without a bound).
func formatRunning(h scheduler.HostBeat) string {
	if h.MaxParallel <= 0 {
		return fmt.Sprintf("%d/-", h.Running)
	}
	return fmt.Sprintf("%d/%d", h.Running, h.MaxParallel)
}

// formatAgo shows how long before now t was ("2s ago"); a t after now (a
// host whose clock leads) shows as "now".
func formatAgo(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < time.Second {
		return "now"
	}
	return d.Round(time.Second).String() + " ago"
}
