package config

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Bounds of the fleet keys.
const (
	maxRetries      = 100
	maxHistoryLimit = 10_000
	maxCandidates   = 1000
	// maxRetryBackoff caps the doubling retry backoff.
	maxRetryBackoff = 10 * time.Minute
	// Standby delay when standby_delay is 0: a tenth of the deadline,
	// within these bounds.
	minAutoStandby = time.Second
	maxAutoStandby = time.Minute
)

// RunOn restricts which hosts may run a job (yaml: run_on). A host is
// eligible when it has every label of Labels with the same value and, if
// Hosts is not empty, its id matches one of the Hosts patterns (shell
// patterns as path.Match reads them: "web-*", "db[12]"). The zero RunOn
// lets every host run the job.
type RunOn struct {
	Labels map[string]string
	Hosts  []string
}

// Eligible reports whether the host with id host and labels may run the
// job.
func (r RunOn) Eligible(host string, labels map[string]string) bool {
	for k, v := range r.Labels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	if len(r.Hosts) == 0 {
		return true
	}
	for _, p := range r.Hosts {
		if ok, _ := path.Match(p, host); ok {
			return true
		}
	}
	return false
}

// String is how status and logs show r: "labels role=db; hosts web-*".
func (r RunOn) String() string {
	var parts []string
	if len(r.Labels) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
			kv = append(kv, k+"="+r.Labels[k])
		}
		parts = append(parts, "labels "+strings.Join(kv, ","))
	}
	if len(r.Hosts) > 0 {
		parts = append(parts, "hosts "+strings.Join(r.Hosts, ","))
	}
	if len(parts) == 0 {
		return "any host"
	}
	return strings.Join(parts, "; ")
}

// validLabel matches a label key: letters, digits, '_', '.', '-' and '/'
// (as in "topology.kubernetes.io/zone").
var validLabel = regexp.MustCompile(`^[A-Za-z0-9_.\-/]{1,63}$`)

// checkLabel reports what is wrong with one label.
func checkLabel(k, v string) error {
	if !validLabel.MatchString(k) {
		return fmt.Errorf("label key %q: want 1 to 63 letters, digits, '_', '.', '-' or '/'", k)
	}
	if len(v) > 255 || strings.ContainsAny(v, ",=\x00\n") {
		return fmt.Errorf("label %s: value %q: at most 255 bytes, without ',', '=', newlines or NUL", k, v)
	}
	return nil
}

// ParseLabels reads host labels written as "k=v,k2=v2" (LEASECRON_LABELS)
// or as one "k=v" per --label flag, adding them to into. Empty items are
// ignored; a key given twice keeps its last value.
func ParseLabels(into map[string]string, s string) error {
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("label %q: want key=value", item)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if err := checkLabel(k, v); err != nil {
			return err
		}
		into[k] = v
	}
	return nil
}

// runOn reads a job's (or the defaults') run_on mapping into j.
func (d *decoder) runOn(j *Job, r *rawRunOn, field string) bool {
	if d.src.isFailed(field) {
		return false
	}
	var ro RunOn
	if r.Labels != nil && !d.src.isFailed(field+".labels") {
		ro.Labels = map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
			t := r.Labels[k]
			d.take(field+".labels."+k, t.leaf)
			ro.Labels[k] = t.v
		}
	}
	ro.Hosts = d.texts(field+".hosts", r.Hosts, "empty host pattern")
	j.RunOn = ro
	return true
}

// checkFleetField returns what is wrong with fleet key key of j; ok is
// false when key is not a fleet key.
func checkFleetField(j *Job, key string) (msgs []string, ok bool) {
	switch key {
	case "retries":
		if j.Retries < 0 || j.Retries > maxRetries {
			msgs = append(msgs, fmt.Sprintf("retries %d: want 0 to %d", j.Retries, maxRetries))
		}
	case "retry_backoff":
		if j.RetryBackoff < 0 {
			msgs = append(msgs, fmt.Sprintf("retry_backoff %s is negative (0 or unset: the default 10s)", j.RetryBackoff))
		}
	case "retry_on_timeout":
	case "history_limit":
		if j.HistoryLimit < 0 || j.HistoryLimit > maxHistoryLimit {
			msgs = append(msgs, fmt.Sprintf("history_limit %d: want 1 to %d (0 or unset: the default 50)", j.HistoryLimit, maxHistoryLimit))
		}
	case "candidates":
		if j.Candidates < 0 || j.Candidates > maxCandidates {
			msgs = append(msgs, fmt.Sprintf("candidates %d: want 0 (every eligible host tries) to %d (default 3)", j.Candidates, maxCandidates))
		}
	case "standby_delay", "jitter":
		if v := map[string]time.Duration{"standby_delay": j.StandbyDelay, "jitter": j.Jitter}[key]; v < 0 {
			msgs = append(msgs, fmt.Sprintf("%s %s is negative", key, v))
		}
	case "run_on":
		for _, k := range slices.Sorted(maps.Keys(j.RunOn.Labels)) {
			if err := checkLabel(k, j.RunOn.Labels[k]); err != nil {
				msgs = append(msgs, "run_on.labels: "+err.Error())
			}
		}
		for i, p := range j.RunOn.Hosts {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				msgs = append(msgs, fmt.Sprintf("run_on.hosts[%d]: bad host pattern %q: use shell patterns such as web-* or db[12]", i, p))
			}
		}
	default:
		return nil, false
	}
	return msgs, true
}

// fleetKeys are the job keys checkFleetField knows.
var fleetKeys = []string{"retries", "retry_backoff", "retry_on_timeout", "history_limit", "run_on", "candidates", "standby_delay", "jitter"}

// fleet checks the fleet keys that need the whole config or job: the
// top-level max_parallel and heartbeat, and a jitter that must leave the
// tick time to start before its deadline.
func (v *validator) fleet() {
	c := v.c
	if c.MaxParallel < 0 {
		v.errorf("max_parallel", 0, "max_parallel %d is negative (0: no bound)", c.MaxParallel)
	}
	switch {
	case c.Heartbeat < 100*time.Millisecond:
		v.errorf("heartbeat", 0, "heartbeat %s must be at least 100ms (default 5s)", c.Heartbeat)
	case c.Heartbeat > 10*time.Minute:
		v.errorf("heartbeat", 0, "heartbeat %s is longer than 10m: hosts would be seen dead or alive far too late", c.Heartbeat)
	}
	for k, val := range c.Labels {
		if err := checkLabel(k, val); err != nil {
			v.errs = append(v.errs, &Error{File: c.File, Field: "labels", Msg: err.Error()})
		}
	}
	for _, j := range c.Jobs {
		if j == nil {
			continue
		}
		// Zero (a Job built in code, or 0 in the file): the defaults.
		if j.RetryBackoff == 0 {
			j.RetryBackoff = defaultRetryBackoff
		}
		if j.HistoryLimit == 0 {
			j.HistoryLimit = defaultHistoryLimit
		}
		if j.sched == nil || j.Jitter <= 0 {
			continue
		}
		// The jitter must leave the tick time to start: compare it with
		// the shortest deadline of the next ticks.
		t := j.Next(time.Unix(0, 0))
		if t.IsZero() {
			continue
		}
		if d := j.DeadlineFor(t).Sub(t); j.Jitter >= d {
			v.errorf(j.field(c)+".jitter", j.Line, "jitter %s must be shorter than the tick's deadline (%s): a tick started that late could not run", j.Jitter, d)
		}
	}
	for _, j := range c.Jobs {
		if j == nil || j.sched == nil || j.Candidates == 0 {
			continue
		}
		t := j.Next(time.Unix(0, 0))
		if t.IsZero() {
			continue
		}
		if d := j.DeadlineFor(t).Sub(t); j.StandbyAfter(t) >= d {
			v.warnf(j.field(c)+".standby_delay", j.Line, "standby delay %s is not shorter than the tick's deadline (%s): standby hosts never try, so a tick whose candidates are down does not run; lower standby_delay or set candidates: 0", j.StandbyAfter(t), d)
		}
	}
}

// StandbyAfter is how long after its tick a standby host tries the tick
// (see Candidates): StandbyDelay, or a tenth of the tick's deadline
// between 1s and 1m.
func (j *Job) StandbyAfter(tick time.Time) time.Duration {
	if j.StandbyDelay > 0 {
		return j.StandbyDelay
	}
	return min(max(j.DeadlineFor(tick).Sub(tick)/10, minAutoStandby), maxAutoStandby)
}

// JitterFor is the start delay of tick, in [0, Jitter): a hash of the job's
// name and the tick, so every host computes the same delay. It leaves at
// least jitterRoom before the tick's deadline (a cron spec's ticks may be
// closer together than the first ones Validate checked).
func (j *Job) JitterFor(tick time.Time) time.Duration {
	span := min(j.Jitter, j.DeadlineFor(tick).Sub(tick)-jitterRoom)
	if span <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(j.Name))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(tick.Unix()))
	h.Write(b[:])
	return time.Duration(h.Sum64() % uint64(span))
}

// jitterRoom is how much of a tick's window JitterFor always leaves for the
// run to start in.
const jitterRoom = time.Second

// RetryWait is the backoff before retry number n (1 for the first retry):
// RetryBackoff doubled n-1 times, at most maxRetryBackoff.
func (j *Job) RetryWait(n int) time.Duration {
	w := j.RetryBackoff
	for i := 1; i < n && w < maxRetryBackoff; i++ {
		w *= 2
	}
	return min(w, maxRetryBackoff)
}
