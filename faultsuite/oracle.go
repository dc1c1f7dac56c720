package faultsuite

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// HeartbeatInterval is how often the recorder job writes a heartbeat. A run
// without an "end" line is taken to have lasted until its last line plus
// this interval: had it still been alive then, it would have written again.
const HeartbeatInterval = 20 * time.Millisecond

// Event is one line the recorder job appended to the fleet's log.
type Event struct {
	Ev    string `json:"ev"` // start, hb, term, end
	Job   string `json:"job"`
	Tick  int64  `json:"tick"` // LEASECRON_TICK_UNIX
	Host  string `json:"host"` // LEASECRON_HOST
	Token int64  `json:"token"`
	PID   int    `json:"pid"`
	T     int64  `json:"t"` // unix nanoseconds
	// Attempt is LEASECRON_ATTEMPT (0 from a daemon that sets none).
	Attempt int `json:"attempt,omitempty"`
	// Exit is the exit status the run ended with ("end" lines only).
	Exit int `json:"exit,omitempty"`
}

// Run is one execution of a job as the recorder saw it: its start, its last
// sign of life and, if it ran to completion, its end.
type Run struct {
	Job   string
	Tick  int64
	Host  string
	Token int64
	PID   int
	Start time.Time
	Last  time.Time // last line of any kind
	End   time.Time // zero unless it ran to completion
	Term  bool      // it logged a SIGTERM
	// Attempt is the attempt of the tick (LEASECRON_ATTEMPT, from 1).
	Attempt int
	// Exit is the exit status of a run that ended (0: success).
	Exit int
}

// Ended reports whether the run completed (wrote "end"), successfully or
// not.
func (r Run) Ended() bool { return !r.End.IsZero() }

// Succeeded reports whether the run completed with exit status 0.
func (r Run) Succeeded() bool { return r.Ended() && r.Exit == 0 }

// Failed reports whether the run completed with a non-zero exit status.
func (r Run) Failed() bool { return r.Ended() && r.Exit != 0 }

// Until is when the run stopped, as far as the log can tell: its end, or
// its last line plus one heartbeat interval when it was killed.
func (r Run) Until() time.Time {
	if r.Ended() {
		return r.End
	}
	return r.Last.Add(HeartbeatInterval)
}

// String describes the run for failure messages.
func (r Run) String() string {
	state := "ended"
	if r.Failed() {
		state = fmt.Sprintf("failed, exit %d", r.Exit)
	}
	if !r.Ended() {
		state = "killed"
		if r.Term {
			state = "terminated"
		}
	}
	return fmt.Sprintf("%s tick=%s attempt=%d host=%s token=%d pid=%d start=%s last=%s until=%s (%s, %s)",
		r.Job, time.Unix(r.Tick, 0).UTC().Format("15:04:05"), r.Attempt, r.Host, r.Token, r.PID,
		fmtT(r.Start), fmtT(r.Last), fmtT(r.Until()), r.Until().Sub(r.Start).Round(time.Millisecond), state)
}

func fmtT(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// History is every run found in a fleet's log, in start order.
type History struct {
	Runs []Run
}

// ReadHistory parses the recorder log at path. A missing file is an empty
// history; a torn line (a writer killed mid-write) is ignored.
func ReadHistory(path string) (*History, error) {
	return (&HistoryLog{Path: path}).read(true)
}

// Job returns the runs of one job, in start order.
func (h *History) Job(job string) []Run {
	var out []Run
	for _, r := range h.Runs {
		if r.Job == job {
			out = append(out, r)
		}
	}
	return out
}

// Tick returns the runs of one job's tick, in start order.
func (h *History) Tick(job string, tick int64) []Run {
	var out []Run
	for _, r := range h.Runs {
		if r.Job == job && r.Tick == tick {
			out = append(out, r)
		}
	}
	return out
}

// Jobs returns the names of the jobs that ran, sorted.
func (h *History) Jobs() []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range h.Runs {
		if !seen[r.Job] {
			seen[r.Job] = true
			out = append(out, r.Job)
		}
	}
	sort.Strings(out)
	return out
}

// String lists every run, one per line.
func (h *History) String() string {
	var b strings.Builder
	for _, r := range h.Runs {
		b.WriteString("  " + r.String() + "\n")
	}
	return b.String()
}

// Violation is one broken invariant and the runs that break it.
type Violation struct {
	Rule string // overlap, rerun, attempt, missing, once, token
	Msg  string
	Runs []Run
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", v.Rule, v.Msg)
	for _, r := range v.Runs {
		b.WriteString("\n    " + r.String())
	}
	return b.String()
}

// Safety checks the invariants that must hold whatever the faults, for
// every job in the history, when no job has retries (see SafetyRetries).
func (h *History) Safety() []Violation { return h.SafetyRetries(nil) }

// SafetyRetries checks the invariants that must hold whatever the faults,
// for every job in the history; retries gives each job's retries (nil: 0
// for every job):
//
//   - overlap: no two runs of a job overlap in time (so neither do the
//     attempts of a tick);
//   - rerun: a tick starts again only after a run of it that was stopped
//     before its end (a takeover, same attempt) or that failed with
//     attempts left (a retry, the next attempt); never after a successful
//     run;
//   - attempt: attempts never go down within a tick, go up after each
//     failed run, and never beyond retries+1. (A tick's first run is
//     normally attempt 1 and each retry the next attempt, but a run can
//     die before the recorder logs it, say by a timeout right after its
//     start: so gaps are allowed.)
//   - token: fencing tokens strictly increase in start order.
//
// A run whose attempt is unknown (0: a daemon that does not set
// LEASECRON_ATTEMPT) is taken as attempt 1.
func (h *History) SafetyRetries(retries func(job string) int) []Violation {
	return h.SafetyRetriesLost(retries, nil)
}

// SafetyRetriesLost is SafetyRetries where a failed run for which lost
// reports true (its outcome never reached the store: see ResultLost) is
// followed rightly by the same attempt, as a run stopped before its end
// is: the host that takes the tick over cannot know it failed.
func (h *History) SafetyRetriesLost(retries func(job string) int, lost func(Run) bool) []Violation {
	var vs []Violation
	for _, job := range h.Jobs() {
		runs := h.Job(job)
		for i := range runs {
			for j := i + 1; j < len(runs); j++ {
				a, b := runs[i], runs[j]
				if a.Start.Before(b.Until()) && b.Start.Before(a.Until()) {
					vs = append(vs, Violation{Rule: "overlap", Msg: fmt.Sprintf("two runs of %s overlap by %s", job,
						minTime(a.Until(), b.Until()).Sub(b.Start).Round(time.Millisecond)), Runs: []Run{a, b}})
				}
			}
		}
		maxAttempt := 1
		if retries != nil {
			maxAttempt += retries(job)
		}
		ticks := map[int64][]Run{}
		var order []int64
		for _, r := range runs {
			if ticks[r.Tick] == nil {
				order = append(order, r.Tick)
			}
			ticks[r.Tick] = append(ticks[r.Tick], r)
		}
		for _, tick := range order {
			vs = append(vs, tickAttempts(job, tick, ticks[tick], maxAttempt, lost)...)
		}
		for i := 1; i < len(runs); i++ {
			if runs[i].Token <= runs[i-1].Token {
				vs = append(vs, Violation{Rule: "token", Msg: fmt.Sprintf("fencing token of %s did not increase", job),
					Runs: []Run{runs[i-1], runs[i]}})
			}
		}
	}
	return vs
}

// tickAttempts checks the runs of one tick, in start order, against the
// rerun and attempt rules of SafetyRetries (lost: see SafetyRetriesLost;
// nil: none).
func tickAttempts(job string, tick int64, rs []Run, maxAttempt int, lost func(Run) bool) []Violation {
	at := time.Unix(tick, 0).UTC().Format(time.RFC3339)
	attempt := func(r Run) int { return max(r.Attempt, 1) }
	var vs []Violation
	if a := attempt(rs[0]); a > maxAttempt {
		vs = append(vs, Violation{Rule: "attempt", Msg: fmt.Sprintf("tick %s of %s: attempt %d, beyond %d attempts", at, job, a, maxAttempt), Runs: rs})
	}
	for i := 1; i < len(rs); i++ {
		prev, r := rs[i-1], rs[i]
		switch {
		case prev.Succeeded():
			return append(vs, Violation{Rule: "rerun", Msg: fmt.Sprintf("tick %s of %s ran again after a successful run", at, job), Runs: rs})
		case prev.Failed() && lost != nil && lost(prev) && attempt(r) == attempt(prev):
			// Taken over after a failure that never reached the store.
		case prev.Failed() && attempt(prev) >= maxAttempt:
			return append(vs, Violation{Rule: "rerun", Msg: fmt.Sprintf("tick %s of %s ran again after attempt %d failed (at most %d attempts)",
				at, job, attempt(prev), maxAttempt), Runs: rs})
		case prev.Failed() && attempt(r) <= attempt(prev):
			return append(vs, Violation{Rule: "attempt", Msg: fmt.Sprintf("tick %s of %s: attempt %d failed, the next run is attempt %d",
				at, job, attempt(prev), attempt(r)), Runs: rs})
		case attempt(r) < attempt(prev):
			// A takeover repeats the attempt; a retry after a timeout
			// (retry_on_timeout) is a later one.
			return append(vs, Violation{Rule: "attempt", Msg: fmt.Sprintf("tick %s of %s: attempt %d was stopped, the next run is attempt %d",
				at, job, attempt(prev), attempt(r)), Runs: rs})
		case attempt(r) > maxAttempt:
			return append(vs, Violation{Rule: "attempt", Msg: fmt.Sprintf("tick %s of %s: attempt %d, beyond %d attempts", at, job, attempt(r), maxAttempt), Runs: rs})
		}
	}
	return vs
}

// Liveness checks that every tick of job in [from, to] (ticks of an
// @every schedule: multiples of every since the Unix epoch) has at least one
// run, and, when exactlyOnce is set, exactly one, which ran to its end.
func (h *History) Liveness(job string, every time.Duration, from, to time.Time, exactlyOnce bool) []Violation {
	var vs []Violation
	for _, tick := range Ticks(every, from, to) {
		rs := h.Tick(job, tick.Unix())
		switch {
		case len(rs) == 0:
			vs = append(vs, Violation{Rule: "missing", Msg: fmt.Sprintf("tick %s of %s never ran", tick.UTC().Format(time.RFC3339), job)})
		case exactlyOnce && (len(rs) > 1 || !rs[0].Ended()):
			vs = append(vs, Violation{Rule: "once", Msg: fmt.Sprintf("tick %s of %s did not run exactly once to its end",
				tick.UTC().Format(time.RFC3339), job), Runs: rs})
		}
	}
	return vs
}

// Ticks returns the ticks of an @every schedule (aligned to the Unix epoch)
// in [from, to].
func Ticks(every time.Duration, from, to time.Time) []time.Time {
	var out []time.Time
	if every <= 0 {
		return nil
	}
	n := from.UnixNano() / int64(every)
	for t := time.Unix(0, n*int64(every)); !t.After(to); t = t.Add(every) {
		if !t.Before(from) {
			out = append(out, t)
		}
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// FormatViolations renders violations for a failure message.
func FormatViolations(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString("  " + v.String() + "\n")
	}
	return b.String()
}
