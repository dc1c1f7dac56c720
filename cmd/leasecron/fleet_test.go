package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/scheduler"
)

// Operating a fleet from the command line, on real redis-server nodes:
// pause/resume as status shows them, history as a daemon wrote it, and
// the host flags of run as the heartbeats announce them.

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
func readStatus(t *testing.T, path string, args ...string) *scheduler.Status {
	t.Helper()
	_, out, errOut := cli(t, append([]string{"status", "-c", path, "--json"}, args...)...)
	var st scheduler.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v; stdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	return &st
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

// waitHistory polls `history --json` until it holds at least n records
// of job, and returns them and the raw output.
func waitHistory(t *testing.T, path, job string, n int, d *testDaemon) ([]scheduler.RunRecord, string) {
	t.Helper()
	var out string
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		code, o, errOut := cli(t, "history", "-c", path, job, "--json")
		if code != 0 {
			t.Fatalf("history --json: exit %d: %s", code, errOut)
		}
		out = o
		var recs []scheduler.RunRecord
		if err := json.Unmarshal([]byte(out), &recs); err != nil {
			t.Fatalf("history --json: %v\n%s", err, out)
		}
		if len(recs) >= n {
			return recs, out
		}
	}
	t.Fatalf("fewer than %d runs of %s recorded within 60s:\n%s\ndaemon log:\n%s", n, job, out, d.stderr)
	return nil, ""
}

// TestHistoryOfDaemonRuns: a daemon runs a job that always fails (one
// retry per tick) and one that succeeds; `history` shows their records
// newest first (start and fencing token decreasing), with each tick's
// retry (attempt 2) above its first attempt, the results and exit codes
// the jobs had; --json round-trips; -n bounds the output; the table shows
// the same runs.
func TestHistoryOfDaemonRuns(t *testing.T) {
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
	flaky, raw := waitHistory(t, path, "flaky", 4, d)
	hello, _ := waitHistory(t, path, "hello", 2, d)
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon: exit %d", code)
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
	if err := enc.Encode(flaky); err != nil {
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
	if two[0].Fence != flaky[0].Fence || two[1].Fence != flaky[1].Fence {
		t.Errorf("-n 2 gave fences %d, %d; want the newest %d, %d", two[0].Fence, two[1].Fence, flaky[0].Fence, flaky[1].Fence)
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
		if j.Name == "flaky" && (len(j.Runs) != 3 || j.Runs[0].Fence != flaky[0].Fence) {
			t.Errorf("status --runs 3: flaky runs %+v; want the 3 newest", j.Runs)
		}
	}
}

// TestRunHostFlags: --label and LEASECRON_LABELS (the flag winning per
// key) and --max-parallel over LEASECRON_MAX_PARALLEL reach the host's
// heartbeat as status shows it, with the version; a job whose run_on the
// labels match lists the host as eligible, one whose run_on they do not
// match does not; after a SIGHUP reload of a file with another
// max_parallel, the override still holds.
func TestRunHostFlags(t *testing.T) {
	cl := redistest.Start(t, 3)
	config := fleetConfig(cl.URLs(), `  - name: db-backup
    schedule: "@hourly"
    shell: "true"
    run_on: {labels: {role: db}}
  - name: web-logs
    schedule: "@hourly"
    shell: "true"
    run_on: {labels: {role: web}}
  - name: anywhere
    schedule: "@hourly"
    shell: "true"
    run_on: {hosts: ["host-*"]}
`)
	path := writeConfig(t, "max_parallel: 7\n"+config)
	t.Setenv(envLabels, "role=web,zone=eu-1")
	t.Setenv(envMaxParallel, "2")
	d := startDaemon(t, "-c", path, "--id", "host-a", "--label", "role=db", "--max-parallel", "3")
	d.notes.await(t, "READY=1")

	host := func() scheduler.HostBeat {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if st := readStatus(t, path); len(st.Hosts) > 0 {
				return st.Hosts[0]
			}
		}
		t.Fatalf("no heartbeat within 30s; log:\n%s", d.stderr)
		return scheduler.HostBeat{}
	}
	h := host()
	if h.Host != "host-a" || h.Labels["role"] != "db" || h.Labels["zone"] != "eu-1" || len(h.Labels) != 2 ||
		h.MaxParallel != 3 || h.Version != Version() {
		t.Errorf("heartbeat %+v: want host-a, labels role=db (flag over env), zone=eu-1 (env), max_parallel 3 (flag over env and file), version %s", h, Version())
	}
	want := map[string]string{"db-backup": "host-a", "web-logs": "", "anywhere": "host-a"}
	for _, j := range readStatus(t, path).Jobs {
		if got := strings.Join(j.Eligible, ","); got != want[j.Name] {
			t.Errorf("%s (run_on %s): eligible %q, want %q", j.Name, j.RunOn, got, want[j.Name])
		}
	}

	// Reload a file with another max_parallel: the flag still wins.
	if err := os.WriteFile(path, []byte("max_parallel: 9\n"+config), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.notes.await(t, "RELOADING=1")
	d.notes.await(t, "READY=1")
	reloaded := time.Now().UTC()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		h = host()
		if h.Seen.After(reloaded.Add(100 * time.Millisecond)) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("no heartbeat after the reload within 30s; log:\n%s", d.stderr)
		}
	}
	if h.MaxParallel != 3 || h.Labels["role"] != "db" {
		t.Errorf("after a reload the heartbeat says max_parallel %d, labels %v; want the command line's 3 and role=db", h.MaxParallel, h.Labels)
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon: exit %d", code)
	}
}

// TestRunDryRun: with --dry-run a won tick is recorded as dry_run and the
// job does not start.
func TestRunDryRun(t *testing.T) {
	cl := redistest.Start(t, 3)
	marker := filepath.Join(t.TempDir(), "ran")
	path := writeConfig(t, fleetConfig(cl.URLs(), fmt.Sprintf(`  - name: marker
    schedule: "@every 1s"
    command: ["/bin/touch", %q]
`, marker)))
	d := startDaemon(t, "-c", path, "--id", "host-a", "--dry-run")
	d.notes.await(t, "READY=1")
	recs, _ := waitHistory(t, path, "marker", 2, d)
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon: exit %d", code)
	}
	for _, r := range recs {
		if r.Result != "dry_run" || r.Host != "host-a" {
			t.Errorf("run %+v: want result dry_run on host-a", r)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the job ran under --dry-run")
	}
}
