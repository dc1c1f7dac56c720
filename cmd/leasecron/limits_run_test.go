package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/supervisor"
	"github.com/leasecron/leasecron/scheduler"
)

// requireHostLimits fails the test in CI when this host cannot apply j's
// limits (CI runs as root with the controllers on cgroup v2 or on
// writable cgroup v1 hierarchies), and skips it elsewhere, saying why.
func requireHostLimits(t *testing.T, j *scheduler.Job) {
	t.Helper()
	if err := scheduler.ProbeLimits(j); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("limits cannot be applied in CI: %v", err)
		}
		t.Skipf("limits cannot be applied on this host: %v", err)
	}
}

// runOnce runs the job text (a YAML list item) under a daemon on Redis
// until it has a run on record, and returns that run and the daemon's log.
func runOnce(t *testing.T, job string) (scheduler.RunRecord, string) {
	t.Helper()
	path := writeConfig(t, limitsConfig(execBackends["redis"](t), job))
	code, out, errOut := cli(t, "check", "-c", path)
	if code != 0 || strings.Contains(errOut, "cannot be applied") || !regexp.MustCompile(`limits here: .*(memory|pids):v[12]`).MatchString(out) {
		t.Errorf("check: exit %d, stdout:\n%s\nstderr:\n%s\nwant 0, the hierarchy of each limit, no warning", code, out, errOut)
	}
	waitVoting(t, path)
	d := startDaemon(t, "-c", path, "--id", "host-a")
	d.notes.await(t, "READY=1")
	recs := waitRuns(t, path, "job", 1, d)
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon: exit %d", code)
	}
	return recs[len(recs)-1], d.stderr.String()
}

// waitRuns waits until job has n runs on record, leaving out ticks on
// record as missed (a daemon that starts after a tick, or before its
// store has seen one, records it so), and returns them, newest first.
func waitRuns(t *testing.T, path, job string, n int, d *testDaemon) []scheduler.RunRecord {
	t.Helper()
	return waitHistoryFor(t, path, job, d, fmt.Sprintf("%d runs of %s", n, job), func(runs []scheduler.RunRecord) bool {
		return len(runs) >= n
	})
}

// waitHistoryFor waits up to 90s for the runs of job on record (newest
// first, missed ticks left out) to satisfy done, and returns them.
func waitHistoryFor(t *testing.T, path, job string, d *testDaemon, what string, done func([]scheduler.RunRecord) bool) []scheduler.RunRecord {
	t.Helper()
	var runs []scheduler.RunRecord
	for end := time.Now().Add(90 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		runs = runs[:0]
		for _, r := range historyOf(t, path, job) {
			if r.Result != "missed" {
				runs = append(runs, r)
			}
		}
		if done(runs) {
			return runs
		}
	}
	t.Fatalf("no %s on record within 90s: %+v\ndaemon log:\n%s", what, runs, d.stderr)
	return nil
}

// TestLimitsTasksRecorded: a fork bomb under tasks_max is bounded — its
// forks beyond the limit fail, the run fails and is recorded as limit —
// and what it started is gone once the run is over.
func TestLimitsTasksRecorded(t *testing.T) {
	t.Parallel()
	requireHostLimits(t, &scheduler.Job{TasksMax: 16})
	pids := filepath.Join(t.TempDir(), "pids")
	r, log := runOnce(t, fmt.Sprintf(`  - name: job
    schedule: "@every 10s"
    deadline: 8s
    tasks_max: 16
    shell: 'for i in $(seq 64); do sleep 300 & echo $! >> %s.$LEASECRON_TICK_UNIX; done; wait'
`, pids))
	if r.Result != scheduler.ResultLimit {
		t.Errorf("fork bomb: result %s, want limit; run %+v\n%s", r.Result, r, log)
	}
	b, _ := os.ReadFile(fmt.Sprintf("%s.%d", pids, r.Tick.Unix())) // the run's own, not a later tick's
	if n := len(strings.Fields(string(b))); n == 0 || n >= 16 {
		t.Errorf("the fork bomb started %d processes; want some, fewer than its tasks_max 16", n)
	}
}

// TestLimitsNotAppliedRecorded is the negative control of
// TestLimitsOOMRecorded: with the limits not written into the cgroups
// (supervisor.NoLimitsEnv) the same allocating job completes, recorded
// ok — the oom the test asserts comes from the limit.
func TestLimitsNotAppliedRecorded(t *testing.T) {
	requireHostLimits(t, &scheduler.Job{MemoryMax: 16 << 20})
	t.Setenv(supervisor.NoLimitsEnv, "1")
	r, log := runOnce(t, `  - name: job
    schedule: "@every 10s"
    deadline: 8s
    memory_max: 16M
    shell: 'head -c 256M /dev/zero | tail >/dev/null'
`)
	if r.Result != "ok" {
		t.Errorf("unlimited hog: result %s, want ok; run %+v\n%s", r.Result, r, log)
	}
}
