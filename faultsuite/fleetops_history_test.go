package faultsuite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/leasecron/leasecron/scheduler"
)

// recordOf returns the history record of run r (same host, tick and
// fencing token), or nil.
func recordOf(recs []scheduler.RunRecord, r Run) *scheduler.RunRecord {
	for i := range recs {
		if recs[i].Host == r.Host && recs[i].Fence == r.Token && recs[i].Tick.Unix() == r.Tick {
			return &recs[i]
		}
	}
	return nil
}

// historyGaveUp reports whether daemon d logged that it could not record
// its run of job under fence in the job's history: the daemon retries
// the write for half a TTL, then gives up, says so (and counts it in
// leasecron_history_lost_total) and completes the tick all the same.
func historyGaveUp(d *Daemon, job string, fence int64) bool {
	b, err := os.ReadFile(d.LogPath)
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.Contains(line, []byte("could not record the run in the job's history")) {
			continue
		}
		var e struct {
			Job   string `json:"job"`
			Fence int64  `json:"fence"`
		}
		if json.Unmarshal(line, &e) == nil && e.Job == job && e.Fence == fence {
			return true
		}
	}
	return false
}

// durableServer returns the index of a server that keeps its data across
// a restart (the last one).
func durableServer(t *testing.T, f *Fleet) int {
	t.Helper()
	for i := len(f.Store.Servers) - 1; i >= 0; i-- {
		if f.Store.Durable(i) {
			return i
		}
	}
	t.Fatalf("%s: no durable server", f.Store.Backend)
	return -1
}

// TestHistoryAfterFaults: 3 daemons run job hist (history_limit 50) and
// job trim (history_limit 4) every second while the daemon running hist
// is SIGKILLed mid-run (and started again) and a durable server of the
// store is killed and restarted (a Redis node with its append-only file,
// the PostgreSQL server, an etcd member, a ZooKeeper server). After a
// graceful stop, `leasecron history --json` must have a record of every
// completed run the oracle saw (same host, tick and fencing token, result
// ok), newest first, and trim's history only its 4 newest runs. Runs cut
// short by the SIGKILL (their daemon could not write) and, on PostgreSQL
// whose one server is the whole store, runs that ended while it was down
// (the record's write gives up after a TTL) are excused, and so is
// a run whose daemon logged that it gave up the record's write (a store
// that stayed too slow for half a TTL): no record is lost silently.
func TestHistoryAfterFaults(t *testing.T) {
	t.Parallel()
	for _, b := range Backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			historyAfterFaults(t, b)
		})
	}
}

func historyAfterFaults(t *testing.T, backend string) {
	cfg := opsConfig(backend)
	if backend == "redis" {
		cfg.AOFNodes = 2
	}
	cfg.Jobs = []Job{
		{Name: "hist", Every: time.Second, Sleep: 300 * time.Millisecond},
		{Name: "trim", Every: time.Second, Sleep: 200 * time.Millisecond, FleetKeys: FleetKeys{HistoryLimit: 4}},
	}
	f := startVoting(t, cfg)

	r1 := youngRunInto(f, "hist", 150*time.Millisecond)
	d := f.Daemon(r1.Host)
	killAt := time.Now()
	d.Kill()
	time.Sleep(time.Second)
	d.Start()

	time.Sleep(2 * time.Second)
	srv := durableServer(t, f)
	downAt := time.Now()
	f.Store.Servers[srv].Kill()
	f.Store.Servers[srv].Restart()
	upAt := time.Now()
	t.Logf("killed %s mid-run at %s; restarted server %d in %s", d.Name, fmtT(killAt), srv, upAt.Sub(downAt).Round(time.Millisecond))

	after := upAt.Add(time.Second)
	f.WaitFor("5 completed runs of each job after the server restart", 30*time.Second, func(h *History) bool {
		for _, job := range []string{"hist", "trim"} {
			n := 0
			for _, r := range h.Job(job) {
				if r.Start.After(after) && r.Succeeded() {
					n++
				}
			}
			if n < 5 {
				return false
			}
		}
		return true
	})
	f.StopAll()
	h := f.CheckAudit()

	// Runs of the killed daemon that were alive at the kill (or ended
	// just before it) may have no record: their daemon died first.
	cutByKill := func(r Run) bool {
		return r.Host == d.Name && r.Start.Before(killAt) && (!r.Ended() || r.End.After(killAt.Add(-500*time.Millisecond)))
	}
	// On a one-server store, a record's write fails while the server is
	// down (plus the write's TTL of retries).
	outage := func(r Run) bool {
		return len(f.Store.Servers) == 1 && r.End.After(downAt) && r.End.Before(upAt.Add(cfg.TTL+time.Second))
	}
	for _, job := range []string{"hist", "trim"} {
		recs := history(t, f, job, 100)
		for i := 1; i < len(recs); i++ {
			if recs[i].Start.After(recs[i-1].Start) {
				t.Errorf("history of %s not newest first: record %d started %s, after record %d (%s)", job, i,
					recs[i].Start.Format(time.RFC3339Nano), i-1, recs[i-1].Start.Format(time.RFC3339Nano))
			}
		}
		runs := h.Job(job)
		for _, rec := range recs {
			if rec.Result == "missed" || rec.Result == "skipped" {
				continue // a tick that did not run (a fault kept it from every host)
			}
			found := false
			for _, r := range runs {
				if r.Host == rec.Host && r.Token == rec.Fence && r.Tick == rec.Tick.Unix() && (r.Succeeded() || rec.Result != "ok") {
					found = true
				}
			}
			if !found {
				t.Errorf("history of %s: record %+v matches no run the recorder saw (with that result)", job, rec)
			}
		}
		if job == "trim" {
			// history_limit 4 runs, and apart from them up to 4 missed
			// or skipped ticks.
			kept, notRun := 0, 0
			for _, rec := range recs {
				if rec.Result == "missed" || rec.Result == "skipped" {
					notRun++
				} else {
					kept++
				}
			}
			if kept != 4 || notRun > 4 {
				t.Errorf("history of trim (history_limit 4) has %d runs and %d missed or skipped ticks, want 4 and at most 4", kept, notRun)
			}
			// Every run of trim after the faults left a record (the
			// daemons were stopped gracefully): the 4 kept are the 4
			// newest runs.
			if len(runs) >= 4 {
				runs = runs[len(runs)-4:]
			}
		}
		checked, excused := 0, 0
		for _, r := range runs {
			if !r.Succeeded() {
				continue
			}
			rec := recordOf(recs, r)
			switch {
			case rec != nil && rec.Result == "ok" && rec.Attempt == 1:
				checked++
			case rec != nil:
				t.Errorf("history of %s: the completed run %s is recorded as %+v", job, r, *rec)
			case cutByKill(r) || outage(r):
				excused++
				t.Logf("history of %s: no record of %s (its daemon was killed, or the one server was down)", job, r)
			case historyGaveUp(f.Daemon(r.Host), job, r.Token):
				// Not silent: the daemon said it gave up (a store too
				// slow for a TTL; seen on a heavily loaded machine).
				excused++
				t.Logf("history of %s: no record of %s; its daemon logged that the write gave up", job, r)
			default:
				t.Errorf("history of %s: no record of the completed run %s", job, r)
			}
		}
		if checked < 4 {
			t.Errorf("history of %s: only %d completed runs checked", job, checked)
		}
		t.Logf("history of %s: %d records; %d completed runs found in it, %d excused", job, len(recs), checked, excused)
		if t.Failed() {
			for _, rec := range recs {
				t.Logf("  %s", fmt.Sprintf("%s tick=%s attempt=%d fence=%d %s", rec.Host, fmtT(rec.Tick), rec.Attempt, rec.Fence, rec.Result))
			}
		}
	}
}
