package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/scheduler"
)

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
	_, text, _ := cli(t, "status", "-c", path)
	if !strings.HasPrefix(h.Containment, "process tree") && !strings.HasPrefix(h.Containment, "cgroup /") {
		t.Errorf("heartbeat containment %q, want \"cgroup PATH\" or \"process tree\"", h.Containment)
	}
	for _, w := range []string{`host-a +role=db,zone=eu-1 +` + Version() + ` +[0-9.]+ +0/3 +(now|\d+s ago) +(cgroup /|process tree)`,
		`db-backup +no +labels role=db +host-a\n`, `web-logs +no +labels role=web +none live\n`} {
		if !regexp.MustCompile(w).MatchString(text) {
			t.Errorf("status does not match %q:\n%s", w, text)
		}
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

// TestRunDryRun: with --dry-run a won tick is recorded as dry_run (in the
// dry-run history, apart from the live one) and the job does not start.
func TestRunDryRun(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 3)
	marker := filepath.Join(t.TempDir(), "ran")
	path := writeConfig(t, fleetConfig(cl.URLs(), fmt.Sprintf(`  - name: marker
    schedule: "@every 1s"
    command: ["/bin/touch", %q]
`, marker)))
	d := startDaemon(t, "-c", path, "--id", "host-a", "--dry-run")
	d.notes.await(t, "READY=1")
	recs, _ := waitHistory(t, path, "marker", 2, d, "--dry-run")
	if code, out, _ := cli(t, "history", "-c", path, "marker", "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("the live history of a dry-run job: exit %d, %s; want it empty", code, out)
	}
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

// TestPauseStopEndsRun: `pause --stop` ends a run in progress on the
// daemon's host through the abort path: the job's process is gone, its
// record says "stopped", and the tick is released, not completed (status
// shows no completed tick and no holder). The negative control is the
// same pause without --stop: the run goes on.
func TestPauseStopEndsRun(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 3)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	path := writeConfig(t, fleetConfig(cl.URLs(), fmt.Sprintf(`  - name: long
    schedule: "@every 1s"
    overlap: skip
    shell: 'echo $$ > %s.$LEASECRON_TICK_UNIX; exec sleep 120'
`, pidFile)))
	d := startDaemon(t, "-c", path, "--id", "host-a")
	d.notes.await(t, "READY=1")

	// running waits for the run in progress and returns its tick and the
	// job's pid.
	running := func() (tick time.Time, pid int) {
		t.Helper()
		for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			st := readStatus(t, path)
			if j := st.Jobs[0]; j.Holder != "" {
				var unix int64
				if _, err := fmt.Sscanf(j.Holder, "tick=%d", &unix); err != nil {
					t.Fatalf("holder %q", j.Holder)
				}
				b, err := os.ReadFile(fmt.Sprintf("%s.%d", pidFile, unix))
				if err != nil {
					continue // not started yet
				}
				if _, err := fmt.Sscanf(string(b), "%d", &pid); err != nil {
					continue
				}
				return time.Unix(unix, 0).UTC(), pid
			}
		}
		t.Fatalf("the job did not start within 60s; log:\n%s", d.stderr)
		return
	}
	alive := func(pid int) bool { return syscall.Kill(pid, 0) == nil }
	tick, pid := running()

	// Negative control: a pause without --stop lets the run go on.
	if code, _, errOut := cli(t, "pause", "-c", path, "long"); code != 0 {
		t.Fatalf("pause: exit %d: %s", code, errOut)
	}
	time.Sleep(3 * time.Second) // three heartbeats
	if !alive(pid) {
		t.Fatalf("pause without --stop ended the run (pid %d)", pid)
	}

	if code, out, errOut := cli(t, "pause", "-c", path, "long", "--stop", "--reason", "bad data"); code != 0 || !strings.Contains(out, "runs in progress are stopped") {
		t.Fatalf("pause --stop: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	stopped := time.Now()
	for alive(pid) {
		if time.Since(stopped) > 30*time.Second {
			t.Fatalf("the job (pid %d) still runs 30s after pause --stop; log:\n%s", pid, d.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	recs, _ := waitHistory(t, path, "long", 1, d)
	if r := recs[0]; r.Result != "stopped" || !r.Tick.Equal(tick) {
		t.Errorf("record %+v: want result stopped for tick %s", r, tick)
	}
	st := readStatus(t, path)
	if j := st.Jobs[0]; j.Holder != "" || !j.DoneTick.Before(tick) {
		t.Errorf("after pause --stop: holder %q, done up to %s; want the tick %s released, not completed", j.Holder, j.DoneTick, tick)
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon: exit %d", code)
	}
}
