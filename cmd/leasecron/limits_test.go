package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/supervisor"
	"github.com/leasecron/leasecron/internal/testkit/mysqltest"
	"github.com/leasecron/leasecron/scheduler"
)

// everyBackend is the backend sections of the exec tests and MySQL's:
// each starts its servers.
func everyBackend() map[string]func(t *testing.T) string {
	m := map[string]func(t *testing.T) string{
		"mysql": func(t *testing.T) string {
			return fmt.Sprintf("mysql:\n  dsn: %q\n  timeout: 500ms\n", mysqltest.Start(t).DSN())
		},
	}
	for k, v := range execBackends {
		m[k] = v
	}
	return m
}

// limitsConfig is a config on section with a 1 s heartbeat, followed by
// jobs (YAML list items).
func limitsConfig(section, jobs string) string {
	return section + "lease:\n  ttl: 10s\n  renew: 2s\nheartbeat: 1s\nshutdown_grace: 2s\ndefaults:\n  kill_grace: 1s\njobs:\n" + jobs
}

// historyOf reads the run records of job (none: an empty list).
func historyOf(t *testing.T, path, job string) []scheduler.RunRecord {
	t.Helper()
	for range 5 {
		code, out, _ := cli(t, "history", "-c", path, job, "--json")
		var recs []scheduler.RunRecord
		if code == 0 && json.Unmarshal([]byte(out), &recs) == nil {
			return recs
		}
		time.Sleep(time.Second) // a slow server on a loaded machine
	}
	t.Fatalf("history of %s could not be read", job)
	return nil
}

// TestLimitsRefusedWithoutCgroups: on a host whose jobs are contained by
// the process tree (forced through LEASECRON_TEST_CONTAINMENT, as on a
// host without cgroup v2), a daemon never runs a job with limits — it
// does not run it unlimited — and says so in its start-up log, and check
// warns naming the file, the line and the field, and exec and trigger of
// the job fail (exit 1) without running it; on every backend. The
// job beside it without limits runs (the negative control: the daemon
// runs jobs, and the test would see the limited one run).
func TestLimitsRefusedWithoutCgroups(t *testing.T) {
	t.Setenv(supervisor.ContainmentEnv, "process-tree")
	backends := everyBackend()
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range backends {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Run(name, func(t *testing.T) {
			// In parallel with each other (the variable set above is for
			// all of them); no other test runs meanwhile.
			t.Parallel()
			dir := t.TempDir()
			limited, free := filepath.Join(dir, "limited"), filepath.Join(dir, "free")
			text := limitsConfig(backends[name](t), fmt.Sprintf(`  - {name: free, schedule: "@every 1s", command: [touch, %q]}
  - {name: limited, schedule: "@every 1s", memory_max: 64M, command: [touch, %q]}
`, free, limited))
			path := writeConfig(t, text)
			line := 1 + strings.Count(text[:strings.Index(text, "name: limited")], "\n")

			code, _, errOut := cli(t, "check", "-c", path)
			want := fmt.Sprintf("warning: %s:%d: jobs[1].memory_max: job limited: its limits cannot be applied on this host", path, line)
			if code != 0 || !strings.Contains(errOut, want) {
				t.Errorf("check: exit %d, stderr:\n%s\nwant 0 and %q", code, errOut, want)
			}

			waitVoting(t, path)
			if code, _, e := cli(t, "exec", "-c", path, "--name", "limited", "--", "touch", limited); code != exitFailure || !strings.Contains(e, "limits cannot be applied") {
				t.Errorf("exec of the job with limits: exit %d, stderr:\n%s\nwant %d and why", code, e, exitFailure)
			}
			if code, _, e := cli(t, "trigger", "limited", "-c", path); code != exitFailure || !strings.Contains(e, "limits cannot be applied") {
				t.Errorf("trigger of the job with limits: exit %d, stderr:\n%s\nwant %d and why", code, e, exitFailure)
			}
			d := startDaemon(t, "-c", path, "--id", "host-a")
			d.notes.await(t, "READY=1")
			waitHistory(t, path, "free", 3, d)
			if _, err := os.Stat(free); err != nil {
				t.Fatalf("negative control: the job without limits did not run: %v", err)
			}
			if _, err := os.Stat(limited); err == nil {
				t.Error("the job with limits ran on a host that cannot apply them")
			}
			// Its ticks are on record as missed, with why; none ran.
			for _, r := range historyOf(t, path, "limited") {
				if r.Result != "missed" || r.Reason != "cannot_limit" {
					t.Errorf("record of the job with limits %+v: want only missed ticks (cannot_limit)", r)
				}
			}
			if log := d.stderr.String(); !strings.Contains(log, "limits cannot be applied") || !strings.Contains(log, "job=limited") {
				t.Errorf("the daemon's log does not say why it does not run the job:\n%s", log)
			}
			if code := d.stop(t); code != 0 {
				t.Errorf("daemon: exit %d", code)
			}
		})
	}
}

// TestLimitsOOMRecorded: a job allocating beyond its memory_max is killed
// by the OOM killer and recorded as oom, retried once (retries: 1) and
// then not run again for that tick; on every backend. The start-up log
// names the hierarchy (cgroup v2 or v1) that applies the limit. It needs
// the memory controller on cgroup v2 or v1 (see requireHostLimits);
// TestLimitsNotAppliedRecorded is its negative control.
func TestLimitsOOMRecorded(t *testing.T) {
	t.Parallel()
	requireHostLimits(t, &scheduler.Job{MemoryMax: 16 << 20})
	backends := everyBackend()
	for name, section := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ticks := filepath.Join(t.TempDir(), "ticks")
			// tail keeps an unterminated line in memory: 256MiB of it.
			path := writeConfig(t, limitsConfig(section(t), fmt.Sprintf(`  - name: hog
    schedule: "@every 20s"
    deadline: 15s
    retries: 1
    retry_backoff: 1s
    memory_max: 16M
    shell: 'echo $LEASECRON_TICK_UNIX >> %s; head -c 256M /dev/zero | tail >/dev/null'
`, ticks)))
			waitVoting(t, path)
			d := startDaemon(t, "-c", path, "--id", "host-a")
			d.notes.await(t, "READY=1")
			if log := d.stderr.String(); !regexp.MustCompile(`per-job limits.*controllers=\S*memory:v[12]`).MatchString(log) {
				t.Errorf("the start-up log does not say which hierarchy applies memory_max:\n%s", log)
			}
			// The first tick whose retry ran. A tick whose first run ended
			// too near its deadline for a retry (a loaded machine) is
			// completed after one run, rightly; it is not the one checked.
			var first scheduler.RunRecord
			recs := waitHistoryFor(t, path, "hog", d, "a retried tick of hog", func(recs []scheduler.RunRecord) bool {
				for _, r := range recs {
					if r.Attempt == 2 {
						first = r
					}
				}
				return first.Attempt == 2
			})
			out := fmt.Sprintf("%+v", recs)
			for _, r := range recs {
				if r.Tick.Equal(first.Tick) && r.Result != scheduler.ResultOOM {
					t.Errorf("run %+v: result %s, want oom\n%s", r, r.Result, out)
				}
			}
			// Past the tick's deadline: no third run of it.
			time.Sleep(time.Until(first.Tick.Add(17 * time.Second)))
			n := 0
			for _, r := range historyOf(t, path, "hog") {
				if r.Tick.Equal(first.Tick) && r.Result != "missed" {
					n++
				}
			}
			if n != 2 {
				t.Errorf("tick %s ran %d times; want 2 (the run and its one retry)\n%s", first.Tick, n, out)
			}
			if code := d.stop(t); code != 0 {
				t.Errorf("daemon: exit %d", code)
			}
		})
	}
}

// TestCheckBadLimits: a limit below what a process needs and a size that
// cannot be read make check exit 2, naming the file, the line and the
// field of each.
func TestCheckBadLimits(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `redis:
  nodes: ["redis://127.0.0.1:1/0"]
jobs:
  - name: small
    schedule: "@hourly"
    shell: "true"
    memory_max: 512K
  - name: garbled
    schedule: "@hourly"
    shell: "true"
    memory_max: 12XB
    tasks_max: 1
`)
	code, _, errOut := cli(t, "check", "-c", path)
	if code != exitUsage {
		t.Errorf("check: exit %d, want %d", code, exitUsage)
	}
	for _, want := range []string{
		path + ":7: jobs[0].memory_max: memory_max 512K is below 4M",
		path + ":11: jobs[1].memory_max: bad size \"12XB\"",
		path + ":12: jobs[1].tasks_max: tasks_max 1 is below 4",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("check's stderr lacks %q:\n%s", want, errOut)
		}
	}
}
