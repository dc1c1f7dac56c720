package faultsuite

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/scheduler"
)

// hookSink is a webhook on loopback that counts the events it gets by
// job, event and tick, and checks each one's signature.
type hookSink struct {
	t   *testing.T
	key []byte
	mu  sync.Mutex
	got map[string]int // "job event tick"
	bad int
}

func (h *hookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	mac := hmac.New(sha256.New, h.key)
	mac.Write(body)
	var ev scheduler.HookEvent
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Header.Get(scheduler.SignatureHeader) != "sha256="+hex.EncodeToString(mac.Sum(nil)) || json.Unmarshal(body, &ev) != nil {
		h.bad++
		w.WriteHeader(http.StatusForbidden)
		return
	}
	h.got[fmt.Sprintf("%s %s %d", ev.Job, ev.Event, ev.Tick.Unix())]++
}

// count is how many times event of job fired for tick.
func (h *hookSink) count(job, event string, tick int64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[fmt.Sprintf("%s %s %d", job, event, tick)]
}

// hookYAML is a job's hook keys posting every event in events to url,
// signed with the key in keyFile.
func hookYAML(url, keyFile string, events ...string) string {
	var s string
	for _, e := range events {
		s += fmt.Sprintf("    on_%s: {url: %q, secret_file: %q, timeout: 5s, retries: 5}\n", e, url, keyFile)
	}
	return s
}

// TestHooksOncePerEvent: 3 daemons, every backend. Job hooked (on_start,
// on_success) runs 3 s every 15 s; the daemon running one of its ticks
// is SIGKILLed once that tick's on_start arrived, and another host takes
// the tick over and runs it to its end. Job failing (on_failure) always
// fails; job nowhere (on_missed) may run on no live host. Over the
// window checked: every tick of hooked that succeeded fired on_start and
// on_success exactly once (the killed tick too: its takeover does not
// fire on_start again), every tick of failing fired on_failure exactly
// once, and every tick of nowhere has exactly one history record
// (missed, no_eligible_host) and fired on_missed exactly once — but for
// an event of the killed host in the seconds before the kill, which may
// be lost (hooks fire at most once) and never fires twice. Every
// request was signed with the secret_file's key.
func TestHooksOncePerEvent(t *testing.T) {
	t.Parallel()
	for _, b := range Backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			hooksOncePerEvent(t, b)
		})
	}
}

func hooksOncePerEvent(t *testing.T, backend string) {
	sink := &hookSink{t: t, key: []byte("fleet-hook-key"), got: map[string]int{}}
	srv := httptest.NewServer(sink)
	t.Cleanup(srv.Close)
	keyFile := filepath.Join(t.TempDir(), "hook.key")
	if err := os.WriteFile(keyFile, append(sink.key, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := opsConfig(backend)
	cfg.Jobs = []Job{
		// Every 15 s: the killed tick's takeover comes one to two TTLs
		// (3 s) after its last renewal on the SQL stores, and its 3 s run
		// must still start before the next tick.
		{Name: "hooked", Every: 15 * time.Second, Sleep: 3 * time.Second, Extra: hookYAML(srv.URL, keyFile, "start", "success")},
		{Name: "failing", Every: 6 * time.Second, Sleep: 200 * time.Millisecond, Fail: Fail{Always: true},
			Extra: hookYAML(srv.URL, keyFile, "failure")},
		{Name: "nowhere", Every: 4 * time.Second, Sleep: 100 * time.Millisecond, Deadline: 2 * time.Second,
			FleetKeys: FleetKeys{RunOnHosts: []string{"nobody"}}, Extra: hookYAML(srv.URL, keyFile, "missed")},
	}
	f := startVoting(t, cfg)
	from := f.ScheduleFrom().Add(time.Second)

	r, killAt := killMidHookedRun(t, f, sink, from)
	// A hook fires at most once per event, and exactly once unless its
	// host dies between writing the tick's done mark and the delivery
	// (docs/operations.md, Hooks): an event of the killed host in the
	// seconds before the kill may be lost, never fired twice.
	lostToKill := func(host string, at time.Time) bool {
		return host == r.Host && !at.After(killAt) && killAt.Sub(at) < 5*time.Second
	}
	f.WaitFor("the killed tick to succeed on another host", 30*time.Second, func(h *History) bool {
		for _, x := range h.Tick("hooked", r.Tick) {
			if x.Succeeded() && x.Host != r.Host {
				return true
			}
		}
		return false
	})
	to := time.Unix(r.Tick, 0).Add(12 * time.Second)
	// Past the deadlines of the window's ticks, their missed records and
	// hooks (a few seconds each).
	f.WaitFor("the window's deadlines and hooks", time.Until(to.Add(25*time.Second)), func(*History) bool {
		return time.Now().After(to.Add(20 * time.Second))
	})
	h := f.CheckAudit()

	for _, tk := range Ticks(15*time.Second, from, to) {
		ok := false
		for _, x := range h.Tick("hooked", tk.Unix()) {
			ok = ok || x.Succeeded()
		}
		if s, st := sink.count("hooked", "success", tk.Unix()), sink.count("hooked", "start", tk.Unix()); ok && (s != 1 || st != 1) || !ok && s != 0 {
			t.Errorf("tick %s of hooked (succeeded: %v): on_start fired %d times, on_success %d; want once each for a tick that succeeded", fmtT(tk), ok, st, s)
		}
	}
	if sink.count("hooked", "success", r.Tick) != 1 {
		t.Errorf("the killed tick %d of hooked: on_success fired %d times, want 1", r.Tick, sink.count("hooked", "success", r.Tick))
	}
	for _, tk := range Ticks(6*time.Second, from, to) {
		ended, excused := false, false
		for _, x := range h.Tick("failing", tk.Unix()) {
			ended = ended || x.Failed()
			excused = excused || x.Failed() && lostToKill(x.Host, x.End)
		}
		n := sink.count("failing", "failure", tk.Unix())
		if ended && n == 0 && excused {
			t.Logf("tick %s of failing: on_failure lost with its host, killed just after the run failed", fmtT(tk))
			continue
		}
		if ended && n != 1 || !ended && n != 0 {
			t.Errorf("tick %s of failing (failed: %v): on_failure fired %d times; want once for a tick that failed", fmtT(tk), ended, n)
		}
	}
	checkMissedHooks(t, f, sink, from, to, lostToKill)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.bad > 0 {
		t.Errorf("%d webhook requests with a bad signature or body", sink.bad)
	}
}

// TestMissedTickNoQuorum: 3 daemons, every backend. Every daemon's links
// to every server are cut from just before a tick of job quiet until
// after its deadline, then healed: that tick has exactly one history
// record, missed with the reason no_quorum, written once the servers are
// reachable again; the ticks before and after it ran.
func TestMissedTickNoQuorum(t *testing.T) {
	t.Parallel()
	for _, b := range Backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			missedTickNoQuorum(t, b)
		})
	}
}

func missedTickNoQuorum(t *testing.T, backend string) {
	cfg := opsConfig(backend)
	const every = 8 * time.Second
	cfg.Jobs = []Job{{Name: "quiet", Every: every, Sleep: 100 * time.Millisecond, Deadline: 2 * time.Second}}
	f := startVoting(t, cfg)
	from := f.ScheduleFrom()
	// The first tick at least 3s ahead: cut 1s before it, heal 1s after
	// its deadline.
	tick := Ticks(every, from.Add(3*time.Second), from.Add(3*time.Second+every))[0]
	if d := time.Until(tick.Add(-time.Second)); d > 0 {
		time.Sleep(d)
	}
	for d := range f.Daemons {
		for n := range f.Store.Servers {
			f.Proxy(d, n).Cut()
		}
	}
	time.Sleep(time.Until(tick.Add(3 * time.Second)))
	for d := range f.Daemons {
		for n := range f.Store.Servers {
			f.Proxy(d, n).Heal()
		}
	}
	var recs []scheduler.RunRecord
	f.WaitFor("the missed record of the cut tick", 60*time.Second, func(*History) bool {
		recs = history(t, f, "quiet", 50)
		for _, r := range recs {
			if r.Tick.Equal(tick) {
				return true
			}
		}
		return false
	})
	// Another tick later, so that a second record would have had time.
	f.WaitFor("the next tick to end", 3*every, func(h *History) bool {
		for _, r := range h.Tick("quiet", tick.Add(every).Unix()) {
			if r.Ended() {
				return true
			}
		}
		return false
	})
	time.Sleep(2 * time.Second)
	recs = history(t, f, "quiet", 50)
	n := 0
	for _, r := range recs {
		if r.Tick.Equal(tick) {
			n++
			if r.Result != "missed" || r.Reason != scheduler.MissNoQuorum {
				t.Errorf("record of the cut tick %s: %+v; want missed, no_quorum", fmtT(tick), r)
			}
		}
	}
	if n != 1 {
		t.Errorf("the cut tick %s has %d records, want 1:\n%+v", fmtT(tick), n, recs)
	}
	if runs := f.History().Tick("quiet", tick.Unix()); len(runs) > 0 {
		t.Errorf("the cut tick ran:\n%s", (&History{Runs: runs}).String())
	}
}

// checkMissedHooks checks job nowhere's ticks in [from, to]: each has
// exactly one history record (missed, no_eligible_host) and fired
// on_missed once, unless lostToKill excuses a lost one.
func checkMissedHooks(t *testing.T, f *Fleet, sink *hookSink, from, to time.Time, lostToKill func(string, time.Time) bool) {
	t.Helper()
	recs := history(t, f, "nowhere", 100)
	byTick := map[int64]int{}
	for _, rec := range recs {
		byTick[rec.Tick.Unix()]++
		if rec.Result != "missed" || rec.Reason != scheduler.MissNoEligibleHost {
			t.Errorf("record of nowhere %+v: want missed, no_eligible_host", rec)
		}
	}
	for _, tk := range Ticks(4*time.Second, from, to) {
		n := sink.count("nowhere", "missed", tk.Unix())
		if byTick[tk.Unix()] == 1 && n == 0 && lostToKill(missedBy(recs, tk), tk.Add(2*time.Second)) {
			t.Logf("tick %s of nowhere: on_missed lost with its recorder, killed just after the deadline", fmtT(tk))
			continue
		}
		if byTick[tk.Unix()] != 1 || n != 1 {
			t.Errorf("tick %s of nowhere: %d history records, on_missed fired %d times; want 1 and 1",
				fmtT(tk), byTick[tk.Unix()], sink.count("nowhere", "missed", tk.Unix()))
		}
	}
}

// missedBy is the host that recorded tick missed in recs ("" if none).
func missedBy(recs []scheduler.RunRecord, tick time.Time) string {
	for _, rec := range recs {
		if rec.Tick.Unix() == tick.Unix() && rec.Result == "missed" {
			return rec.Host
		}
	}
	return ""
}

// killMidHookedRun SIGKILLs the daemon of a fresh run of hooked once the
// run's on_start arrived. The run must have started within 2 s of its
// tick (a late run, such as a tick tried only once the daemons were up,
// leaves its takeover no time before the deadline) and still have at
// least a second to go (its job sleeps 3 s; on a loaded machine the hook
// can arrive after the run ended, and a tick whose end was recorded has
// nothing to take over); otherwise it waits for the next tick's run, 3
// times at most. It returns the run and when its daemon was killed.
func killMidHookedRun(t *testing.T, f *Fleet, sink *hookSink, from time.Time) (Run, time.Time) {
	t.Helper()
	for try := 1; ; try++ {
		r := f.WaitRun("a fresh run of hooked", 30*time.Second, func(r Run) bool {
			return r.Job == "hooked" && !r.Start.Before(from) && !r.Ended() && time.Since(r.Start) < 2*time.Second &&
				r.Start.Sub(time.Unix(r.Tick, 0)) < 2*time.Second
		})
		f.WaitFor("on_start of the fresh run", 10*time.Second, func(*History) bool { return sink.count("hooked", "start", r.Tick) == 1 })
		if cur := runOf(t, f.History(), r.PID); !cur.Ended() && time.Since(r.Start) < 2*time.Second {
			t.Logf("killing %s, which runs tick %d of hooked", r.Host, r.Tick)
			killAt := time.Now()
			f.Daemon(r.Host).Kill()
			return r, killAt
		}
		if try == 3 {
			t.Fatalf("on_start of 3 runs of hooked arrived 2 s or more after the run started; the last: %s", r)
		}
		t.Logf("on_start of %s arrived %s after it started; trying the next tick", r, time.Since(r.Start).Round(time.Millisecond))
		from = time.Unix(r.Tick, 0).Add(time.Second)
	}
}
