package faultsuite

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// What TestRetryOnAnotherHost reads from the daemons' logs and the run
// history to tell a tick it may leave unchecked: a retry the store did not
// take, a tick skipped for overlap, a retry left to the failing host.

// retryDropped reports whether a daemon completed job's tick tk without
// a retry because the store did not take the retry state while that
// daemon held the lease (the store did not answer for longer than the
// lease's validity, as on a machine loaded so that PostgreSQL and
// MariaDB both went silent for 2 s; docs/operations.md, Retries): the
// tick then rightly has fewer attempts, and may have its failed attempt
// run again by a host that took it over (the completion could not be
// confirmed). Such a tick is logged, not checked.
func (c retryCheck) retryDropped(job string, tk time.Time) bool {
	c.t.Helper()
	if host := droppedRetry(c.f, job, tk); host != "" {
		c.t.Logf("tick %s of %s: %s could not store the retry state and completed the tick without a retry; its attempts are not checked", fmtT(tk), job, host)
		return true
	}
	return false
}

// droppedRetry returns the daemon that completed job's tick tk without a
// retry because the store did not take the retry state ("" if none).
func droppedRetry(f *Fleet, job string, tk time.Time) string {
	for _, d := range f.Daemons {
		for _, l := range tickLines(d, job, tk) {
			if l.Msg == retryUnstored {
				return d.Name
			}
		}
	}
	return ""
}

// tickLogLine is a line of a daemon's JSON log.
type tickLogLine struct {
	Time    time.Time `json:"time"`
	Msg     string    `json:"msg"`
	Job     string    `json:"job"`
	Tick    string    `json:"tick"`
	Attempt int       `json:"attempt"`
	RetryAt time.Time `json:"retry_at"` // of "the job failed; retrying the tick"
	Why     string    `json:"why"`      // of "retry of the tick due; taking it"
}

// tickLines returns the lines daemon d logged about job's tick tk.
func tickLines(d *Daemon, job string, tk time.Time) []tickLogLine {
	data, err := os.ReadFile(d.LogPath)
	if err != nil {
		return nil
	}
	want := tk.UTC().Format(time.RFC3339)
	var out []tickLogLine
	for _, line := range strings.Split(string(data), "\n") {
		var l tickLogLine
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &l) == nil && l.Job == job && l.Tick == want {
			out = append(out, l)
		}
	}
	return out
}

// overlapSkipped is what a daemon logs when it skips a tick because the
// previous tick's run still holds the job's lease (overlap: skip).
const overlapSkipped = "previous run still holds the lease; skipping this tick (overlap: skip)"

// skippedFollowed starts what a daemon logs when it finds that another
// host started a tick it had skipped (overlap: skip), holding the lease
// or having left a retry: it follows the tick again from then.
const skippedFollowed = "the skipped tick was started by another host"

// skippedUnread ends what a daemon logs when it could not read the lease
// or the retry state of a tick it skipped (overlap: skip).
const skippedUnread = " of the skipped tick; looking again"

// skippedForOverlap reports whether job's tick tk has no run and a run of
// the tick before it (every earlier) ran into tk: the hosts skipped tk
// (overlap: skip), which is what the job's overlap policy asks for.
func skippedForOverlap(h *History, job string, tk time.Time, every time.Duration) bool {
	return len(h.Tick(job, tk.Unix())) == 0 && previousRanInto(h, job, tk, every)
}

// allSkippedForOverlap reports whether every tick of ticks is
// skippedForOverlap.
func allSkippedForOverlap(h *History, job string, ticks []time.Time, every time.Duration) bool {
	for _, tk := range ticks {
		if !skippedForOverlap(h, job, tk, every) {
			return false
		}
	}
	return true
}

// previousLeftHeld reports whether a run of job's tick before tk (every
// apart) left its lease held past its end, up to at: its host could not
// complete or release the lease (the store did not answer), so the lease
// stayed until its validity ran out, within a TTL of the run's end, and
// a host that found it held then skipped tk (overlap: skip) rightly.
func previousLeftHeld(f *Fleet, h *History, job string, tk time.Time, every time.Duration, at time.Time) bool {
	prev := tk.Add(-every)
	for _, r := range h.Tick(job, prev.Unix()) {
		if !at.Before(r.Until().Add(f.Config().TTL)) {
			continue
		}
		for _, d := range f.Daemons {
			if d.Name != r.Host {
				continue
			}
			for _, l := range tickLines(d, job, prev) {
				if l.Msg == "could not complete/release the lease" {
					return true
				}
			}
		}
	}
	return false
}

// previousRanInto reports whether a run of job's tick before tk (every
// apart) was still running at tk.
func previousRanInto(h *History, job string, tk time.Time, every time.Duration) bool {
	for _, r := range h.Tick(job, tk.Add(-every).Unix()) {
		if !r.Until().Before(tk) {
			return true
		}
	}
	return false
}

// othersRefused reports whether the failing host rightly took the retry
// itself: at once, because leaving it to the others (a TTL and a second
// past the retry's backoff) would have ended past the tick's deadline
// (the next tick: an attempt 1 that started late), or only after leaving
// it to them (half a second of slack) while every other daemon was
// refused by the store in between: it tried to take job's tick tk over
// and got no answer, or it had given the tick up before the retry because
// the previous tick's run (every before tk; one did run into tk, or left
// its lease held: see previousLeftHeld) still held the lease at its first
// attempt (overlap: skip), and could not read the tick's lease or retry
// state since the failure, which would have had it follow the tick again
// (docs/operations.md, Retries). A store that answers none of them
// meanwhile (a loaded machine) rightly leaves the retry to the failing
// host. Such a tick is logged, not failed.
func (c retryCheck) othersRefused(job string, every time.Duration, tk time.Time, failed, retry Run, backoff time.Duration) bool {
	t, f := c.t, c.f
	t.Helper()
	if at, ok := retryAt(f, job, tk, failed); ok && !at.Add(f.Config().TTL+time.Second).Before(tk.Add(every-lastTryMargin)) {
		t.Logf("tick %s of %s: the retry ran on %s, the host whose attempt failed, at once: leaving it to the others from %s would have ended past the deadline",
			fmtT(tk), job, retry.Host, at.Format("15:04:05.000"))
		return true
	}
	if sawNoOther(f, job, tk, failed) {
		t.Logf("tick %s of %s: the retry ran on %s, the host whose attempt failed, at once: its view of the heartbeats, read again, showed no other live host",
			fmtT(tk), job, retry.Host)
		return true
	}
	if retry.Start.Before(failed.Until().Add(backoff + f.Config().TTL + time.Second - 500*time.Millisecond)) {
		return false
	}
	for _, d := range f.Daemons {
		if d.Name == failed.Host {
			continue
		}
		refused, skipped, unread := false, false, false
		for _, l := range tickLines(d, job, tk) {
			if !l.Time.Before(retry.Start) {
				continue
			}
			switch {
			case l.Msg == "no quorum for the job's lease; retrying" && !l.Time.Before(failed.Until()):
				refused = true
			case l.Msg == overlapSkipped && (previousRanInto(c.h, job, tk, every) || previousLeftHeld(f, c.h, job, tk, every, l.Time)):
				skipped = true
			case strings.HasPrefix(l.Msg, skippedFollowed):
				skipped, unread = false, false
			case strings.HasSuffix(l.Msg, skippedUnread) && !l.Time.Before(failed.Until()):
				unread = true
			}
		}
		if !refused && !(skipped && unread) {
			return false
		}
	}
	t.Logf("tick %s of %s: the retry ran on %s, the host whose attempt failed, after the store refused every other host in between",
		fmtT(tk), job, retry.Host)
	return true
}

// lastTryMargin is the scheduler's: a retry left to the others must end
// that long before the tick's deadline.
const lastTryMargin = 50 * time.Millisecond

// sawNoOther reports whether the host whose attempt failed took the
// retry because its view of the heartbeats, read again, showed no other
// live host that may run the job (a store too slow for the heartbeats
// to be read within their TTL, on a loaded machine).
func sawNoOther(f *Fleet, job string, tk time.Time, failed Run) bool {
	for _, d := range f.Daemons {
		if d.Name != failed.Host {
			continue
		}
		for _, l := range tickLines(d, job, tk) {
			if l.Msg == "retry of the tick due; taking it" && l.Attempt == failed.Attempt+1 &&
				l.Why == "backoff; no other live host may run the job" {
				return true
			}
		}
	}
	return false
}

// retryAt returns when the host whose attempt failed scheduled the retry
// (its log's retry_at).
func retryAt(f *Fleet, job string, tk time.Time, failed Run) (time.Time, bool) {
	for _, d := range f.Daemons {
		if d.Name != failed.Host {
			continue
		}
		for _, l := range tickLines(d, job, tk) {
			if l.Msg == "the job failed; retrying the tick" && l.Attempt == failed.Attempt {
				return l.RetryAt, true
			}
		}
	}
	return time.Time{}, false
}

// TestOverlapSkipExemptionNeedsOverlap: a host's overlap skip excuses it
// from a retry (othersRefused) only when a run of the previous tick did
// run into the tick: one that ended 300ms before does not count, one that
// ended 90ms after does.
func TestOverlapSkipExemptionNeedsOverlap(t *testing.T) {
	tk := time.Date(2026, 11, 27, 9, 9, 12, 0, time.UTC)
	prev := tk.Add(-12 * time.Second)
	run := func(end time.Time) *History {
		return &History{Runs: []Run{{Job: "doomed", Tick: prev.Unix(), Start: end.Add(-200 * time.Millisecond), Last: end, End: end, Exit: 3}}}
	}
	if previousRanInto(run(tk.Add(-300*time.Millisecond)), "doomed", tk, 12*time.Second) {
		t.Errorf("a previous tick's run that ended before the tick counts as running into it")
	}
	if !previousRanInto(run(tk.Add(90*time.Millisecond)), "doomed", tk, 12*time.Second) {
		t.Errorf("a previous tick's run that ended after the tick does not count as running into it")
	}
}
