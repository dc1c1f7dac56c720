package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/scheduler"
)

// Operating a fleet from the command line, on real redis-server nodes:
// pause/resume as status shows them, history as a daemon wrote it, and
// the host flags of run as the heartbeats announce them. These test the
// commands, with no fault injected; the fault suite (faults, takeovers,
// the invariants under them) is package faultsuite.

// fleetConfig is a config on nodes with a 3 s lease and a 1 s heartbeat,
// followed by jobs (YAML list items).
func fleetConfig(nodes []string, jobs string) string {
	q := make([]string, len(nodes))
	for i, n := range nodes {
		q[i] = fmt.Sprintf("%q", n)
	}
	return fmt.Sprintf("redis:\n  nodes: [%s]\n  timeout: 200ms\nlease:\n  ttl: 3s\nheartbeat: 1s\nshutdown_grace: 2s\ndefaults:\n  kill_grace: 500ms\njobs:\n%s",
		strings.Join(q, ", "), jobs)
}

// readStatus runs `status --json` (whatever its exit code: fresh nodes
// do not vote for one TTL, which does not matter to what is read here).
// A status that could not read the pause flags or heartbeats (a request
// timed out on a loaded machine) is read again, up to 5 times.
func readStatus(t *testing.T, path string, args ...string) *scheduler.Status {
	t.Helper()
	var st scheduler.Status
	for try := 1; ; try++ {
		_, out, errOut := cli(t, append([]string{"status", "-c", path, "--json"}, args...)...)
		st = scheduler.Status{}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v; stdout:\n%s\nstderr:\n%s", err, out, errOut)
		}
		if len(st.Errors) == 0 {
			return &st
		}
		if try == 5 {
			t.Fatalf("status could not read the fleet's state %d times: %q", try, st.Errors)
		}
		time.Sleep(time.Second)
	}
}

// pausedOf returns the pause flag status shows for job.
func pausedOf(t *testing.T, st *scheduler.Status, job string) *scheduler.PauseInfo {
	t.Helper()
	for _, j := range st.Jobs {
		if j.Name == job {
			return j.Paused
		}
	}
	t.Fatalf("status has no job %s", job)
	return nil
}

// TestPauseResumeStatus: pause writes a flag that status shows with who,
// when and why; of a job's flag and --all's, the newest decides; resume
// --all clears every pause; a pause naming an unknown job writes nothing.
func TestPauseResumeStatus(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 3)
	path := writeConfig(t, fleetConfig(cl.URLs(), `  - name: inventory-sync
    schedule: "@hourly"
    shell: "true"
  - name: report
    schedule: "@daily"
    shell: "true"
`))
	me := whoAmI()

	// An unknown job among known ones: exit 2, the culprit and the file
	// named, nothing written.
	code, out, errOut := cli(t, "pause", "-c", path, "inventory-sync", "nope")
	if code != exitUsage || out != "" || !strings.Contains(errOut, `"nope"`) || !strings.Contains(errOut, path) {
		t.Errorf("pause of an unknown job: exit %d, stdout %q, stderr %q; want %d naming \"nope\" and %s", code, out, errOut, exitUsage, path)
	}
	if p := pausedOf(t, readStatus(t, path), "inventory-sync"); p != nil {
		t.Errorf("a refused pause wrote a flag: %+v", *p)
	}

	before := time.Now()
	code, out, errOut = cli(t, "pause", "-c", path, "inventory-sync", "--reason", "supplier API down")
	if code != 0 || out != "paused inventory-sync (reason: supplier API down)\n" {
		t.Fatalf("pause: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	st := readStatus(t, path)
	p := pausedOf(t, st, "inventory-sync")
	if p == nil || !p.Paused || p.By != me || p.Reason != "supplier API down" || p.All || p.Stop ||
		p.At.Before(before.Add(-time.Second)) || p.At.After(time.Now().Add(time.Second)) {
		t.Errorf("status shows the pause as %+v; want paused by %s for the reason given, at about now", p, me)
	}
	if p := pausedOf(t, st, "report"); p != nil {
		t.Errorf("report paused too: %+v", *p)
	}
	_, text, _ := cli(t, "status", "-c", path)
	if !strings.Contains(text, "by "+me+" at ") || !strings.Contains(text, "supplier API down") {
		t.Errorf("status does not show who paused and why:\n%s", text)
	}

	// --all (with --stop) pauses report too, and is now the newest flag
	// of inventory-sync.
	if code, out, errOut := cli(t, "pause", "--all", "--stop", "-c", path); code != 0 || !strings.HasPrefix(out, "paused every job") {
		t.Fatalf("pause --all: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	st = readStatus(t, path)
	for _, job := range []string{"inventory-sync", "report"} {
		if p := pausedOf(t, st, job); p == nil || !p.All || !p.Stop || p.Reason != "" {
			t.Errorf("%s after pause --all --stop: %+v; want the --all flag", job, p)
		}
	}

	// resume of one job is newer than --all: that job runs again, the
	// other stays paused.
	if code, out, errOut := cli(t, "resume", "-c", path, "report"); code != 0 || out != "resumed report\n" {
		t.Fatalf("resume report: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	st = readStatus(t, path)
	if p := pausedOf(t, st, "report"); p != nil {
		t.Errorf("report still paused after its resume: %+v", *p)
	}
	if p := pausedOf(t, st, "inventory-sync"); p == nil || !p.All {
		t.Errorf("inventory-sync no longer paused by --all: %+v", p)
	}

	// resume --all clears everything, the jobs paused one by one included.
	if code, _, errOut := cli(t, "pause", "-c", path, "report"); code != 0 {
		t.Fatalf("pause report: exit %d: %s", code, errOut)
	}
	if code, out, errOut := cli(t, "resume", "--all", "-c", path); code != 0 || !strings.HasPrefix(out, "resumed every job") {
		t.Fatalf("resume --all: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	st = readStatus(t, path)
	for _, job := range []string{"inventory-sync", "report"} {
		if p := pausedOf(t, st, job); p != nil {
			t.Errorf("%s still paused after resume --all: %+v", job, *p)
		}
	}
	if _, text, _ = cli(t, "status", "-c", path); strings.Contains(text, "by "+me) {
		t.Errorf("status still shows a pause:\n%s", text)
	}
}

// waitHistory polls `history --json` until it holds at least n runs of
// job (missed and skipped ticks left out), and returns them and the raw
// output.
func waitHistory(t *testing.T, path, job string, n int, d *testDaemon, extra ...string) ([]scheduler.RunRecord, string) {
	t.Helper()
	var out string
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		code, o, errOut := cli(t, append([]string{"history", "-c", path, job, "--json"}, extra...)...)
		if code != 0 { // a slow server on a loaded machine: read again
			out = errOut
			continue
		}
		out = o
		var recs []scheduler.RunRecord
		if err := json.Unmarshal([]byte(out), &recs); err != nil {
			t.Fatalf("history --json: %v\n%s", err, out)
		}
		// Only runs count: the ticks that did not run (fresh servers,
		// paused) are on record too, as missed or skipped.
		if recs = runsOnly(recs); len(recs) >= n {
			return recs, out
		}
	}
	t.Fatalf("fewer than %d runs of %s recorded within 60s:\n%s\ndaemon log:\n%s", n, job, out, d.stderr)
	return nil, ""
}

// runsOnly drops the records of ticks that did not run (missed, skipped).
func runsOnly(recs []scheduler.RunRecord) []scheduler.RunRecord {
	var out []scheduler.RunRecord
	for _, r := range recs {
		if r.Result != "missed" && r.Result != "skipped" {
			out = append(out, r)
		}
	}
	return out
}

// TestHistoryOfDaemonRuns: a daemon runs a job that always fails (one
// retry per tick) and one that succeeds; `history` shows their records
// newest first (start and fencing token decreasing), with each tick's
// retry (attempt 2) above its first attempt, the results and exit codes
// the jobs had; --json round-trips; -n bounds the output; the table shows
// the same runs.
func TestHistoryOfDaemonRuns(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 3)
	path := writeConfig(t, fleetConfig(cl.URLs(), `  - name: flaky
    schedule: "@every 3s"
    retries: 1
    retry_backoff: 200ms
    shell: "exit 3"
  - name: hello
    schedule: "@every 1s"
    shell: "true"
`))
	d := startDaemon(t, "-c", path, "--id", "host-a")
	d.notes.await(t, "READY=1")
	waitHistory(t, path, "flaky", 4, d)
	waitHistory(t, path, "hello", 2, d)
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon: exit %d", code)
	}
	// Read once the daemon stopped, so that no record lands meanwhile.
	// The fresh servers do not vote for the first ticks: those are on
	// record as missed (data_younger); the checks below are of runs.
	flaky, raw := waitHistory(t, path, "flaky", 4, d)
	hello, _ := waitHistory(t, path, "hello", 2, d)
	var all []scheduler.RunRecord // every record, missed ones too
	if err := json.Unmarshal([]byte(raw), &all); err != nil {
		t.Fatalf("history --json: %v\n%s", err, raw)
	}

	for _, r := range hello {
		if r.Job != "hello" || r.Host != "host-a" || r.Result != "ok" || r.Exit != 0 || r.Attempt != 1 || r.Tick.IsZero() {
			t.Errorf("hello run %+v: want ok, exit 0, attempt 1 on host-a at a tick", r)
		}
	}
	for i, r := range flaky {
		if r.Job != "flaky" || r.Host != "host-a" || r.Result != "failed" || r.Exit != 3 || r.Tick.IsZero() {
			t.Errorf("flaky run %d %+v: want failed with exit 3 on host-a at a tick", i, r)
		}
		if r.Attempt < 1 || r.Attempt > 2 {
			t.Errorf("flaky run %d: attempt %d; want 1 or 2 (retries: 1)", i, r.Attempt)
		}
		if i == 0 {
			continue
		}
		prev := flaky[i-1] // newer
		if !prev.Start.After(r.Start) || prev.Fence <= r.Fence {
			t.Errorf("not newest first: run %d started %s (fence %d), run %d started %s (fence %d)",
				i-1, prev.Start, prev.Fence, i, r.Start, r.Fence)
		}
		if prev.Tick.Equal(r.Tick) && (prev.Attempt != 2 || r.Attempt != 1) {
			t.Errorf("tick %s: attempts %d above %d; want the retry (2) above the first attempt (1)", r.Tick, prev.Attempt, r.Attempt)
		}
	}
	retried := false
	for i := 1; i < len(flaky); i++ {
		retried = retried || (flaky[i-1].Tick.Equal(flaky[i].Tick) && flaky[i-1].Attempt == 2)
	}
	if !retried {
		t.Errorf("no tick of flaky shows its retry:\n%s", raw)
	}

	// --json round-trips: the records decode and encode back to the same
	// text, with snake_case keys.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(all); err != nil {
		t.Fatal(err)
	}
	if buf.String() != raw {
		t.Errorf("history --json does not round-trip:\n%s\nre-encoded:\n%s", raw, buf.String())
	}
	for _, k := range []string{`"job"`, `"host"`, `"tick"`, `"attempt"`, `"fence"`, `"start"`, `"end"`, `"exit"`, `"result"`} {
		if !strings.Contains(raw, k+":") {
			t.Errorf("history --json lacks key %s", k)
		}
	}

	// -n 2 is the two newest; the table shows them in the same order.
	code, out, errOut := cli(t, "history", "-c", path, "flaky", "-n", "2", "--json")
	var two []scheduler.RunRecord
	if code != 0 || json.Unmarshal([]byte(out), &two) != nil || len(two) != 2 {
		t.Fatalf("history -n 2 --json: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if two[0].Fence != all[0].Fence || two[1].Fence != all[1].Fence {
		t.Errorf("-n 2 gave fences %d, %d; want the newest %d, %d", two[0].Fence, two[1].Fence, all[0].Fence, all[1].Fence)
	}
	code, out, errOut = cli(t, "history", "flaky", "-c", path, "-n", "2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "HOST") {
		t.Fatalf("history -n 2: exit %d, want a header and 2 rows; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for i, r := range two {
		f := strings.Fields(lines[i+1])
		want := []string{"host-a", formatTime(r.Tick), fmt.Sprint(r.Attempt), formatTime(r.Start), "", "failed", "3", fmt.Sprint(r.Fence)}
		for c, w := range want {
			if w != "" && (len(f) != len(want) || f[c] != w) {
				t.Errorf("table row %d %q: column %d is not %q", i, lines[i+1], c, w)
				break
			}
		}
	}

	// status --runs 3 reads the same history.
	st := readStatus(t, path, "--runs", "3")
	for _, j := range st.Jobs {
		if j.Name == "flaky" && (len(j.Runs) != 3 || j.Runs[0].Fence != all[0].Fence) {
			t.Errorf("status --runs 3: flaky runs %+v; want the 3 newest", j.Runs)
		}
	}
}

// TestCheckEligibility: check says for each job whether this host (--id,
// --label over LEASECRON_LABELS) may run it; without host flags or
// run_on its output stays the one "ok:" line.
func TestCheckEligibility(t *testing.T) {
	path := writeConfig(t, unreachable+`jobs:
  - name: db-backup
    schedule: "@hourly"
    shell: "true"
    run_on: {labels: {role: db, zone: eu-1}}
  - name: web-logs
    schedule: "@hourly"
    shell: "true"
    run_on: {hosts: ["web-*"]}
  - name: anywhere
    schedule: "@hourly"
    shell: "true"
`)
	t.Setenv(envLabels, "zone=eu-1,role=web")
	code, out, errOut := cli(t, "check", "-c", path, "--id", "db-1", "--label", "role=db")
	want := `ok: 3 jobs, 3 nodes
host db-1 (labels role=db,zone=eu-1):
  db-backup: eligible (run_on: labels role=db,zone=eu-1)
  web-logs: not eligible (run_on: hosts web-*)
  anywhere: eligible (run_on: any host)
`
	if code != 0 || out != want {
		t.Errorf("exit %d, stdout:\n%s\nwant:\n%s\nstderr:\n%s", code, out, want, errOut)
	}
	t.Setenv(envLabels, "")
	if code, out, _ := cli(t, "check", "-c", writeConfig(t, goodConfig)); code != 0 || out != "ok: 2 jobs, 3 nodes\n" {
		t.Errorf("without host flags or run_on: exit %d, stdout %q; want the ok line alone", code, out)
	}
}
