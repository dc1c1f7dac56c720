package faultsuite

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Report is the outcome of a nemesis run: what was done to the fleet, what
// ran, and what the oracle found.
type Report struct {
	Seed     uint64
	Race     bool // the daemons were built with the race detector
	Config   Config
	Started  time.Time // the nemesis started
	Stopped  time.Time // the daemons were stopped
	Faults   []Fault
	Audit    Audit
	Liveness []Violation // ticks of quiet windows that did not run exactly once
	// LivenessChecked is how many ticks fell into quiet windows.
	LivenessChecked int
}

// Violations is every broken invariant: the audit's and liveness's.
func (r *Report) Violations() []Violation {
	return append(append([]Violation(nil), r.Audit.Violations...), r.Liveness...)
}

// Markdown renders the report.
func (r *Report) Markdown() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "## Fault run, seed %d\n\n", r.Seed)
	fmt.Fprintf(&b, "- nemesis from %s to %s UTC (%s), daemons stopped at %s\n", r.Started.UTC().Format(time.RFC3339),
		r.Stopped.UTC().Format(time.RFC3339), r.Stopped.Sub(r.Started).Round(time.Second), fmtT(r.Stopped))
	switch c.Backend {
	case "", "redis":
		fmt.Fprintf(&b, "- fleet: %d daemons, %d redis-server nodes (%d restart empty, %d with appendfsync always); race detector in the daemons: %v\n",
			c.Daemons, c.Nodes, c.Nodes-c.AOFNodes, c.AOFNodes, r.Race)
	default:
		servers := fmt.Sprintf("%d servers", c.Nodes)
		if c.Nodes == 1 {
			servers = "1 server"
		}
		fmt.Fprintf(&b, "- fleet: %d daemons, %s backend with %s (all restart with their data); race detector in the daemons: %v\n",
			c.Daemons, c.Backend, servers, r.Race)
	}
	fmt.Fprintf(&b, "- lease: ttl %s, renew %s, kill_grace %s, per-node timeout %s, drift %g\n", c.TTL, c.Renew, c.KillGrace, c.Timeout, c.Drift)
	for _, j := range c.Jobs {
		dl := "next tick"
		if j.Deadline > 0 {
			dl = j.Deadline.String()
		}
		ov := j.Overlap
		if ov == "" {
			ov = "skip"
		}
		fmt.Fprintf(&b, "- job %s: @every %s, runs %s, deadline %s, overlap %s, ignores SIGTERM: %v\n", j.Name, j.Every, j.Sleep, dl, ov, j.IgnoreTerm)
	}

	kinds := map[FaultKind]int{}
	for _, f := range r.Faults {
		kinds[f.Kind]++
	}
	var ks []string
	for _, k := range AllFaults {
		if kinds[k] > 0 {
			ks = append(ks, fmt.Sprintf("%s %d", k, kinds[k]))
		}
	}
	fmt.Fprintf(&b, "\n### Result\n\n")
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| faults applied | %d (%s) |\n", len(r.Faults), strings.Join(ks, ", "))
	fmt.Fprintf(&b, "| runs | %d (%d ran to their end, %d stopped early) |\n", r.Audit.Runs, r.Audit.Ended, r.Audit.Runs-r.Audit.Ended)
	fmt.Fprintf(&b, "| violations | %d (overlap, rerun, token, validity: %d; ticks of quiet windows not run exactly once: %d of %d checked) |\n",
		len(r.Violations()), len(r.Audit.Violations), len(r.Liveness), r.LivenessChecked)
	st := r.Audit.Stats()
	fmt.Fprintf(&b, "| abort slack (validity end − death), %d aborted runs | p50 %s, p99 %s, min %s, max %s |\n",
		st.N, st.P50.Round(time.Millisecond), st.P99.Round(time.Millisecond), st.Min.Round(time.Millisecond), st.Max.Round(time.Millisecond))
	fmt.Fprintf(&b, "| runs whose lease the logs do not show | %d |\n", len(r.Audit.Unverified))
	unexplained := 0
	for _, a := range r.Audit.Aborts {
		if r.cause(a.Run) == "no fault" {
			unexplained++
		}
	}
	fmt.Fprintf(&b, "| aborted runs no fault explains | %d |\n", unexplained)

	if vs := r.Violations(); len(vs) > 0 {
		fmt.Fprintf(&b, "\n### Violations\n\n```\n%s```\n", FormatViolations(vs))
	}
	if len(r.Audit.Aborts) > 0 {
		fmt.Fprintf(&b, "\n### Aborted runs, least slack first (at most 200), with the fault that cut them short\n\n```\n")
		as := append([]Abort(nil), r.Audit.Aborts...)
		sort.Slice(as, func(i, j int) bool { return as[i].Slack < as[j].Slack })
		for _, a := range as[:min(200, len(as))] {
			fmt.Fprintf(&b, "slack %7s  valid until %s  %s  <- %s\n", a.Slack.Round(time.Millisecond), fmtT(a.ValidUntil), a.Run, r.cause(a.Run))
		}
		b.WriteString("```\n")
	}
	fmt.Fprintf(&b, "\n### Faults\n\n```\n")
	for _, f := range r.Faults {
		b.WriteString(f.String() + "\n")
	}
	b.WriteString("```\n")
	return b.String()
}

// cause names the faults active while run was alive (from a second before
// its start to its last sign of life), "daemons stopped" when the run was
// alive at the end, or "no fault".
func (r *Report) cause(run Run) string {
	var names []string
	for _, f := range r.Faults {
		if f.Start.Before(run.Until()) && run.Start.Before(f.End.Add(time.Second)) {
			names = append(names, fmt.Sprintf("#%d %s", f.N, f.Kind))
		}
	}
	if len(names) == 0 && !run.Until().Before(r.Stopped) {
		return "daemons stopped"
	}
	if len(names) == 0 {
		return "no fault"
	}
	return strings.Join(names, ", ")
}
