package faultsuite

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasecron/leasecron/scheduler"
)

// opsConfig is the fleet of the "Operating a fleet" tests on backend: its
// defaults, with a 2s heartbeat (live hosts and pause flags are read
// soon; a heartbeat lives 6s, so a loaded machine whose writes time out
// now and then does not drop hosts from the view, which would send
// retries back to the host that failed), and on Redis 3 nodes instead of
// 5 (these tests do not need a minority of nodes to fail; fewer
// processes keep make test lighter) with a 150ms timeout and a 3s TTL
// (0.5 + 0.3 + 2*0.15 + 0.03 + 0.002 + 1 = 2.132s <= 3s), so that renewals
// survive a loaded machine.
func opsConfig(backend string) Config {
	cfg := DefaultConfigFor(backend)
	cfg.Heartbeat = 2 * time.Second
	if cfg.Backend == "" || cfg.Backend == "redis" {
		cfg.Nodes, cfg.TTL, cfg.Timeout = 3, 3*time.Second, 150*time.Millisecond
	}
	return cfg
}

// history runs `leasecron history JOB -n n --json` and decodes it.
func history(t *testing.T, f *Fleet, job string, n int) []scheduler.RunRecord {
	t.Helper()
	res := f.MustCLI("history", job, "-n", fmt.Sprint(n), "--json")
	var recs []scheduler.RunRecord
	if err := json.Unmarshal([]byte(res.Stdout), &recs); err != nil {
		t.Fatalf("history of %s: %v\n%s", job, err, res)
	}
	return recs
}

// TestRetryOnAnotherHost: 3 daemons. Job flaky (retries 2, backoff 300ms)
// fails its first attempt of every tick: each tick is retried on another
// host than the one that failed, attempt 2 succeeds, and nothing runs
// after it (the tick is completed: no attempt 3). Job doomed (retries 2)
// always fails: each tick stops after 3 attempts, attempt 2 on another
// host than attempt 1. (The failing host takes a retry itself only after
// leaving it to the others for a TTL and a second past the backoff; a
// store that answered none of them meanwhile is logged, see
// othersRefused.) Job slowpoke times out and is retried once
// (retry_on_timeout), on another host. Control: job once fails the same
// way as flaky but has no retries: its ticks run once, and fail. The
// oracle checks that attempts never overlap, none runs after a success
// and attempt numbers go 1, 2, 3; `leasecron history` shows each
// attempt. On every backend.
func TestRetryOnAnotherHost(t *testing.T) {
	t.Parallel()
	for _, b := range Backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			retryOnAnotherHost(t, b)
		})
	}
}

func retryOnAnotherHost(t *testing.T, backend string) {
	cfg := opsConfig(backend)
	retry := FleetKeys{Retries: 2, RetryBackoff: 300 * time.Millisecond}
	// Every 8s: the host whose attempt failed leaves the retry to others
	// for TTL + 1s (4s) past the backoff only if that still ends before
	// the deadline (the next tick); otherwise it retries at once itself.
	// 8s leaves room for an attempt 1 that starts 2s late.
	cfg.Jobs = []Job{
		{Name: "flaky", Every: 8 * time.Second, Sleep: 300 * time.Millisecond, FleetKeys: retry, Fail: Fail{Attempts: []int{1}}},
		{Name: "doomed", Every: 12 * time.Second, Sleep: 200 * time.Millisecond, FleetKeys: retry, Fail: Fail{Always: true}},
		{Name: "once", Every: 8 * time.Second, Sleep: 300 * time.Millisecond, Fail: Fail{Attempts: []int{1}}},
		{Name: "slowpoke", Every: 12 * time.Second, Sleep: 3 * time.Second, Timeout: 800 * time.Millisecond,
			FleetKeys: FleetKeys{Retries: 1, RetryBackoff: 200 * time.Millisecond, RetryOnTimeout: true}},
	}
	f := startVoting(t, cfg)

	// One or two ticks of flaky and once, one of doomed, all past their
	// deadlines (the next tick) before they are checked.
	from := f.ScheduleFrom().Add(time.Second)
	to := from.Add(12 * time.Second)
	// Each tick of flaky succeeded, or ended having lost its retry
	// (retryDropped), or was skipped by every host while the previous
	// tick's run, started late, still held the lease (overlap: skip;
	// then the window takes the next tick too, so that one is checked).
	flakyTicks := Ticks(8*time.Second, from, to)
	f.WaitFor(fmt.Sprintf("ticks %s..%s of flaky to succeed", fmtT(from), fmtT(to)), time.Until(to.Add(28*time.Second)), func(h *History) bool {
		checked := 0
		for _, tk := range flakyTicks {
			rs := h.Tick("flaky", tk.Unix())
			if skippedForOverlap(h, "flaky", tk, 8*time.Second) {
				continue
			}
			checked++
			if !slices.ContainsFunc(rs, Run.Succeeded) && !(slices.ContainsFunc(rs, Run.Ended) && droppedRetry(f, "flaky", tk) != "") {
				return false
			}
		}
		if checked == 0 {
			flakyTicks = append(flakyTicks, flakyTicks[len(flakyTicks)-1].Add(8*time.Second))
			return false
		}
		return true
	})
	awaitMostTicks(f, []string{"once"}, 8*time.Second, from, to, 1, 0, 20*time.Second)
	doomedTicks := Ticks(12*time.Second, from, to)
	// The first ticks after start-up run late: when every tick of the
	// window of doomed or of slowpoke was skipped behind its previous
	// tick's retries, the next tick is checked too.
	if h := f.History(); len(doomedTicks) > 0 &&
		(allSkippedForOverlap(h, "doomed", doomedTicks, 12*time.Second) || allSkippedForOverlap(h, "slowpoke", doomedTicks, 12*time.Second)) {
		doomedTicks = append(doomedTicks, doomedTicks[len(doomedTicks)-1].Add(12*time.Second))
	}
	last := to
	if n := len(doomedTicks); n > 0 {
		last = doomedTicks[n-1].Add(12 * time.Second)
	}
	f.WaitFor("the deadlines of the checked ticks to pass", time.Until(last.Add(2*time.Second)), func(*History) bool {
		return time.Now().After(last.Add(time.Second))
	})
	h := f.CheckAudit()
	rc := retryCheck{t: t, f: f, h: h, moves: &retryMoves{}}
	rc.flaky(flakyTicks, retry.RetryBackoff)
	rc.doomed(doomedTicks, retry.RetryBackoff)
	rc.slowpoke(doomedTicks, cfg.Jobs[3].RetryBackoff)
	// The exemptions of othersRefused read the daemons' own word: a check
	// that excused every retry would pass a scheduler that never moves one.
	if rc.moves.moved == 0 {
		t.Errorf("no retry ran on another host than the failed attempt's (%d left to that host were excused): the check saw no retry move", rc.moves.excused)
	}

	// Control: the oracle finds the retries when told a job has fewer.
	fewer := map[string]int{"flaky": 0, "doomed": 1, "slowpoke": 0}
	found := map[string]bool{}
	for _, v := range h.SafetyRetries(func(job string) int { return fewer[job] }) {
		if v.Rule == "rerun" || v.Rule == "attempt" {
			found[v.Runs[0].Job] = true
		}
	}
	if !found["flaky"] || !found["doomed"] {
		t.Errorf("control: with retries 0 for flaky and 1 for doomed the oracle found extra attempts only in %v", found)
	}
	rc.historyShowsAttempts(flakyTicks)
}

// retryCheck holds what TestRetryOnAnotherHost checks its jobs against.
type retryCheck struct {
	t     *testing.T
	f     *Fleet
	h     *History
	moves *retryMoves
}

// retryMoves counts the retries placed checks: on another host than the
// failed attempt's, or on that host and excused (othersRefused).
type retryMoves struct{ moved, excused int }

// placed reports whether retry, the attempt after failed, ran where the
// scheduler's rule puts it: on another host, or on failed's host when
// othersRefused excuses it. It counts both.
func (c retryCheck) placed(job string, every time.Duration, tk time.Time, failed, retry Run, backoff time.Duration) bool {
	if retry.Host != failed.Host {
		c.moves.moved++
		return true
	}
	if c.othersRefused(job, every, tk, failed, retry, backoff) {
		c.moves.excused++
		return true
	}
	return false
}

// flaky: attempt 1 failed, attempt 2 succeeded on another host, nothing
// after it; once (no retries) failed once. Exact counts: on a machine so
// loaded that the store times out, a run whose completion could not be
// confirmed is rightly run again (CheckAudit's rerun rule), with the same
// attempt; the counts allow that, never a further attempt.
func (c retryCheck) flaky(ticks []time.Time, backoff time.Duration) {
	t, h := c.t, c.h
	for _, tk := range ticks {
		rs := h.Tick("flaky", tk.Unix())
		if skippedForOverlap(h, "flaky", tk, 8*time.Second) {
			t.Logf("flaky %s: skipped, the previous tick's run still held the lease (overlap: skip)", fmtT(tk))
			continue
		}
		var retry *Run
		for i := range rs {
			if rs[i].Attempt == 2 && retry == nil {
				retry = &rs[i]
			}
			if rs[i].Attempt > 2 || (rs[i].Attempt == 2 && !rs[i].Succeeded() && rs[i].Ended()) {
				t.Errorf("tick %s of flaky: attempt %d %s; attempt 2 cannot fail", fmtT(tk), rs[i].Attempt, rs[i])
			}
		}
		if len(rs) == 0 || !rs[0].Failed() || rs[0].Attempt != 1 || retry == nil || !rs[len(rs)-1].Succeeded() {
			if !c.retryDropped("flaky", tk) {
				t.Errorf("tick %s of flaky: want attempt 1 failed, then attempt 2 succeeded; got:\n%s", fmtT(tk), (&History{Runs: rs}).String())
			}
			continue
		}
		if !c.placed("flaky", 8*time.Second, tk, rs[0], *retry, backoff) {
			t.Errorf("tick %s of flaky: the retry ran on %s, the host whose attempt failed", fmtT(tk), retry.Host)
		}
		t.Logf("flaky %s: attempt 1 on %s failed, attempt 2 on %s %s later", fmtT(tk), rs[0].Host, retry.Host,
			retry.Start.Sub(rs[0].End).Round(time.Millisecond))
		once := h.Tick("once", tk.Unix())
		if len(once) > 0 && !once[0].Failed() {
			t.Errorf("tick %s of once (no retries): want a failed run; got:\n%s", fmtT(tk), (&History{Runs: once}).String())
		}
		for _, r := range once {
			if r.Attempt != 1 {
				t.Errorf("tick %s of once (no retries) was retried: %s", fmtT(tk), r)
			}
		}
	}
}

// doomed: 3 failed attempts, attempt 2 on another host than attempt 1.
func (c retryCheck) doomed(ticks []time.Time, backoff time.Duration) {
	t, h := c.t, c.h
	if len(ticks) == 0 {
		t.Fatalf("no tick of doomed to check")
	}
	checked := 0
	for _, tk := range ticks {
		rs := h.Tick("doomed", tk.Unix())
		if len(rs) == 0 && previousRanInto(h, "doomed", tk, 12*time.Second) {
			// The previous tick's last attempts (started late on a
			// loaded machine) still held the job at tk: overlap: skip
			// gave tk up, as designed.
			t.Logf("tick %s of doomed skipped: the previous tick's retries ran into it", fmtT(tk))
			continue
		}
		checked++
		if len(rs) != 3 {
			if !c.retryDropped("doomed", tk) {
				t.Errorf("tick %s of doomed (retries 2, always fails): %d runs, want 3:\n%s", fmtT(tk), len(rs), (&History{Runs: rs}).String())
			}
			continue
		}
		for i, r := range rs {
			if !r.Failed() || r.Attempt != i+1 {
				t.Errorf("tick %s of doomed: run %d is not a failed attempt %d: %s", fmtT(tk), i, i+1, r)
			}
		}
		// Attempt 2 goes to another host as flaky's does. Attempt 3 may
		// come back to the host of attempt 2 when the third host is too
		// slow to take it in its turn (a loaded machine): not checked.
		if !c.placed("doomed", 12*time.Second, tk, rs[0], rs[1], backoff) {
			t.Errorf("tick %s of doomed: attempt 2 ran on %s, the host whose attempt 1 failed", fmtT(tk), rs[1].Host)
		}
		t.Logf("doomed %s: attempts on %s, %s, %s", fmtT(tk), rs[0].Host, rs[1].Host, rs[2].Host)
	}
	if checked == 0 {
		t.Errorf("no tick of doomed could be checked: each was skipped behind the previous tick's retries")
	}
}

// slowpoke (retry_on_timeout): both attempts time out (SIGTERM), on two
// hosts.
func (c retryCheck) slowpoke(ticks []time.Time, backoff time.Duration) {
	t, h := c.t, c.h
	checked := 0
	for _, tk := range ticks {
		rs := h.Tick("slowpoke", tk.Unix())
		if len(rs) == 0 && previousRanInto(h, "slowpoke", tk, 12*time.Second) {
			t.Logf("tick %s of slowpoke skipped: the previous tick's retry ran into it", fmtT(tk))
			continue
		}
		checked++
		// (Attempt 1 may be missing from the log when its timeout hit
		// before the recorder's first line, on a loaded machine.)
		var a1, a2 *Run
		for i := range rs {
			switch {
			case rs[i].Attempt == 1 && a1 == nil:
				a1 = &rs[i]
			case rs[i].Attempt == 2 && a2 == nil:
				a2 = &rs[i]
			}
		}
		if a2 == nil && c.retryDropped("slowpoke", tk) {
			continue
		}
		if a2 == nil || (a1 != nil && !c.placed("slowpoke", 12*time.Second, tk, *a1, *a2, backoff)) {
			t.Errorf("tick %s of slowpoke (timeout, retries 1, retry_on_timeout): want attempts 1 and 2 on two hosts; got:\n%s",
				fmtT(tk), (&History{Runs: rs}).String())
			continue
		}
		for _, r := range rs {
			if r.Ended() || !r.Term {
				t.Errorf("tick %s of slowpoke: a run did not time out (SIGTERM before its end): %s", fmtT(tk), r)
			}
		}
	}
	if checked == 0 {
		t.Errorf("no tick of slowpoke could be checked: each was skipped behind the previous tick's retry")
	}
}

// historyShowsAttempts: the history has every attempt of flaky, with its
// attempt number and result.
func (c retryCheck) historyShowsAttempts(ticks []time.Time) {
	recs := history(c.t, c.f, "flaky", 100)
	for _, tk := range ticks {
		got := map[int]string{}
		for _, rec := range recs {
			if rec.Tick.Equal(tk) {
				got[rec.Attempt] = rec.Host + " " + rec.Result
			}
		}
		rs := c.h.Tick("flaky", tk.Unix())
		if len(rs) == 2 && (got[1] != rs[0].Host+" failed" || got[2] != rs[1].Host+" ok" || len(got) != 2) {
			c.t.Errorf("history of flaky, tick %s: attempts %v, want 1: %s failed, 2: %s ok", fmtT(tk), got, rs[0].Host, rs[1].Host)
		}
	}
}
