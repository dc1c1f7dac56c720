package faultsuite

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"time"
)

// LeaseKey names one acquisition of a job's lease: the host that won it,
// the job and the fencing token it got (LEASECRON_FENCING_TOKEN of the
// run). Tokens increase per job, so two jobs acquired in one batch may get
// the same token.
type LeaseKey struct {
	Host  string
	Job   string
	Fence int64
}

// LeaseLog is what a daemon's log says about one acquisition: when the
// job was started under it, the latest validity end the daemon learned
// (from the acquisition or a renewal), and how the run finished.
type LeaseLog struct {
	Job     string
	Started time.Time // "job started" was logged at (zero: not logged)
	// ValidUntil is the latest validity end the daemon logged for the
	// lease ("job started", then "lease renewed" before each extension of
	// the supervisor's deadline).
	ValidUntil time.Time
	// Validities are the logged validity ends with the time each was
	// logged, in log order.
	Validities []Validity
	Finished   time.Time // "job finished" was logged at (zero: not logged)
	Result     string    // ok, failed, timeout, aborted, shutdown, error
	// Completed is when the tick's completion was confirmed on a quorum:
	// the "job finished" line with completed=true, unless completing
	// failed. Zero if the tick was not (known to be) completed by this run.
	Completed   time.Time
	CompleteErr bool // "could not complete/release the lease" was logged
	// RetryUnstored: the run failed and the daemon could not store the
	// retry state ("could not store the retry state; ..."), so a host
	// that takes the tick over knows nothing of the failed attempt.
	RetryUnstored bool
}

// ResultLost reports whether the failed run r left no trace of its
// outcome on the store: the retry state could not be stored and the
// completion was not confirmed. A host that takes its tick over then
// runs the same attempt again, as after a run stopped before its end.
func ResultLost(leases map[LeaseKey]*LeaseLog, r Run) bool {
	ll := leases[LeaseKey{r.Host, r.Job, r.Token}]
	return ll != nil && ll.RetryUnstored && ll.Completed.IsZero()
}

// Validity is one validity end a daemon logged for a lease, and when.
type Validity struct {
	Logged time.Time
	Until  time.Time
}

// ValidAt returns the latest validity end logged at or before t: what the
// daemon (and so the supervisor, which is extended only after the log
// line) knew at t. Zero if none was logged by then.
func (ll *LeaseLog) ValidAt(t time.Time) time.Time {
	var v time.Time
	for _, x := range ll.Validities {
		if !x.Logged.After(t) && x.Until.After(v) {
			v = x.Until
		}
	}
	return v
}

// retryUnstored is what a daemon logs when it cannot store a failed
// run's retry state.
const retryUnstored = "could not store the retry state; completing the tick without a retry"

// daemonLine is the part of a daemon's JSON log line the audit reads.
type daemonLine struct {
	Time       time.Time `json:"time"`
	Msg        string    `json:"msg"`
	Job        string    `json:"job"`
	Fence      int64     `json:"fence"`
	ValidUntil time.Time `json:"valid_until"`
	Result     string    `json:"result"`
	Completed  *bool     `json:"completed"`
}

// ReadDaemonLog adds what the JSON log of daemon host at path says about
// each of its leases to into. Lines that are not JSON (the harness's own,
// a race report) are skipped.
func ReadDaemonLog(host, path string, into map[LeaseKey]*LeaseLog) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read daemon log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		b := sc.Bytes()
		if len(b) == 0 || b[0] != '{' {
			continue
		}
		var l daemonLine
		if json.Unmarshal(b, &l) != nil || l.Fence == 0 {
			continue
		}
		k := LeaseKey{host, l.Job, l.Fence}
		ll := into[k]
		if ll == nil {
			ll = &LeaseLog{Job: l.Job}
			into[k] = ll
		}
		if !l.ValidUntil.IsZero() {
			ll.Validities = append(ll.Validities, Validity{Logged: l.Time, Until: l.ValidUntil})
			if l.ValidUntil.After(ll.ValidUntil) {
				ll.ValidUntil = l.ValidUntil
			}
		}
		switch l.Msg {
		case "job started":
			ll.Started = l.Time
		case "could not complete/release the lease":
			ll.CompleteErr = true
		case retryUnstored:
			ll.RetryUnstored = true
		case "job finished":
			ll.Finished, ll.Result = l.Time, l.Result
			if l.Completed != nil && *l.Completed && !ll.CompleteErr {
				ll.Completed = l.Time
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read daemon log %s: %w", path, err)
	}
	return nil
}

// Leases reads every daemon's log (see ReadDaemonLog).
func (f *Fleet) Leases() (map[LeaseKey]*LeaseLog, error) {
	m := map[LeaseKey]*LeaseLog{}
	for _, d := range f.Daemons {
		if err := ReadDaemonLog(d.Name, d.LogPath, m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Abort is a run that was stopped before its end, and by how much it beat
// its lease: Slack is the validity end its daemon had logged by the time
// the run died (LeaseLog.ValidAt) minus that moment (the run's last sign
// of life plus a heartbeat, Run.Until). A renewal that succeeded only
// after the run died does not count: the slack is the margin the
// supervisor actually had.
type Abort struct {
	Run        Run
	ValidUntil time.Time
	Slack      time.Duration
}

// Audit is the fault suite's verdict on a history, with the daemons' logs
// at hand.
type Audit struct {
	Violations []Violation
	// Aborts are the runs stopped before their end whose lease validity
	// is known, with their slack.
	Aborts []Abort
	// Unverified are runs whose lease the daemons' logs do not mention
	// (a daemon killed between starting the job and logging it); their
	// validity cannot be checked.
	Unverified []Run
	Runs       int // runs in the history
	Ended      int // runs that ran to their end
}

// Audit checks the invariants under faults:
//
//   - overlap: no two runs of a job overlap in time (as Safety);
//   - token: fencing tokens strictly increase in start order (as Safety);
//   - rerun: no run of a tick starts after an earlier run's completion of
//     that tick was confirmed on a quorum (the daemon logged the run
//     finished with completed=true). A run that ended but whose host died,
//     was paused or cut off before it could record the completion does not
//     count as completed: its tick is rightly taken over;
//   - validity: every run is dead (or ended) before the validity end its
//     daemon had logged by then (LeaseLog.ValidAt): a job never runs
//     without a lease. The daemon logs each validity before it extends the
//     supervisor's deadline, so a renewal the log does not show yet has not
//     moved the kill deadline either.
func (h *History) Audit(leases map[LeaseKey]*LeaseLog) Audit {
	a := Audit{Runs: len(h.Runs)}
	for _, v := range h.Safety() {
		if v.Rule != "rerun" {
			a.Violations = append(a.Violations, v)
		}
	}
	type tk struct {
		job  string
		tick int64
	}
	ticks := map[tk][]Run{}
	var order []tk
	for _, r := range h.Runs {
		k := tk{r.Job, r.Tick}
		if _, ok := ticks[k]; !ok {
			order = append(order, k)
		}
		ticks[k] = append(ticks[k], r)
		if r.Ended() {
			a.Ended++
		}
		ll := leases[LeaseKey{r.Host, r.Job, r.Token}]
		if ll == nil || ll.Started.IsZero() || ll.ValidUntil.IsZero() {
			a.Unverified = append(a.Unverified, r)
			continue
		}
		valid := ll.ValidAt(r.Until())
		if !r.Until().Before(valid) {
			a.Violations = append(a.Violations, Violation{Rule: "validity",
				Msg: fmt.Sprintf("run alive until %s, after its lease's validity (as logged by then) ended at %s (%s late)",
					fmtT(r.Until()), fmtT(valid), r.Until().Sub(valid).Round(time.Millisecond)),
				Runs: []Run{r}})
		}
		if !r.Ended() {
			a.Aborts = append(a.Aborts, Abort{Run: r, ValidUntil: valid, Slack: valid.Sub(r.Until())})
		}
	}
	for _, k := range order {
		rs := ticks[k]
		for _, done := range rs {
			ll := leases[LeaseKey{done.Host, done.Job, done.Token}]
			if ll == nil || ll.Completed.IsZero() {
				continue
			}
			for _, again := range rs {
				if again.Start.After(ll.Completed) {
					a.Violations = append(a.Violations, Violation{Rule: "rerun",
						Msg: fmt.Sprintf("tick %s of %s started again after its completion was confirmed at %s",
							time.Unix(k.tick, 0).UTC().Format(time.RFC3339), k.job, fmtT(ll.Completed)),
						Runs: []Run{done, again}})
				}
			}
		}
	}
	return a
}

// SlackStats summarises abort slacks.
type SlackStats struct {
	N                  int
	Min, P50, P99, Max time.Duration
}

// Stats returns the distribution of the aborts' slack.
func (a Audit) Stats() SlackStats {
	if len(a.Aborts) == 0 {
		return SlackStats{}
	}
	s := make([]time.Duration, len(a.Aborts))
	for i, ab := range a.Aborts {
		s[i] = ab.Slack
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(s)))) - 1 // nearest rank
		return s[min(max(i, 0), len(s)-1)]
	}
	return SlackStats{N: len(s), Min: s[0], P50: q(0.50), P99: q(0.99), Max: s[len(s)-1]}
}

// String renders the stats as "n=… min=… p50=… p99=… max=…".
func (s SlackStats) String() string {
	if s.N == 0 {
		return "n=0"
	}
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("n=%d min=%s p50=%s p99=%s max=%s", s.N, r(s.Min), r(s.P50), r(s.P99), r(s.Max))
}
