package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/supervisor"
)

// escapeOutcome is what escapeScenario observed.
type escapeOutcome struct {
	escapees   []int // the job's children that left its process group
	killedAt   time.Time
	deadAt     time.Time // when no escapee was seen alive; zero if never
	laterRunAt time.Time // when the first later run was seen; zero if none
	overlap    bool      // a later run started while an escapee lived
	laterRuns  int
}

// escapeScenario runs a job whose children leave its process group — one
// with setsid, one with setsid from a subshell that exits at once (a
// double fork) — SIGKILLs its supervisor once both have, and watches them
// and the runs that follow for watch.
func escapeScenario(t *testing.T, watch time.Duration, env ...string) (*procDaemon, escapeOutcome) {
	d := startProcDaemon(t, `echo $$ >> OUT/runs; setsid sleep 300 & echo $! >> OUT/escapees; `+
		`(setsid sleep 301 & echo $! >> OUT/escapees); sleep 302`, 0, env...)
	job, sup := d.firstRun(t)
	killGroupAtEnd(t, job)
	var o escapeOutcome
	for end := time.Now().Add(10 * time.Second); len(o.escapees) < 2; time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(d.out, "escapees"))
		o.escapees = o.escapees[:0]
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil && len(o.escapees) < 2 {
				o.escapees = append(o.escapees, n)
			}
		}
		if time.Now().After(end) {
			t.Fatalf("the job did not start its two children within 10s; log:\n%s", d.logText())
		}
	}
	for _, pid := range o.escapees {
		killGroupAtEnd(t, pid) // setsid: its own group
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if st, ok := readStat(pid); ok && st.pgid == pid {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("child %d did not leave the job's process group within 10s", pid)
			}
		}
	}
	o.killedAt = time.Now()
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for end := o.killedAt.Add(watch); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		// Once all are dead they are scanned again only when a later run
		// starts (see supervisorLossScenario): each leads a session of
		// its own, which no other process can join.
		later := len(d.runs()) - 1
		alive := false
		for _, pid := range o.escapees {
			if (o.deadAt.IsZero() || later > o.laterRuns) && len(liveMembers(pid)) > 0 {
				alive = true
			}
		}
		if !alive && o.deadAt.IsZero() {
			o.deadAt = time.Now()
		}
		if later > 0 && o.laterRunAt.IsZero() {
			o.laterRunAt = time.Now()
		}
		if later > o.laterRuns && alive {
			o.overlap = true
		}
		o.laterRuns = later
	}
	return d, o
}

// requireContainment fails unless the daemon's start-up log names the
// containment want ("cgroup " or "process tree"). Without cgroups (not
// root, cgroup v1 only) the cgroup case is skipped, but not in CI, which
// runs as root with cgroup v2.
func requireContainment(t *testing.T, d *procDaemon, want string) {
	t.Helper()
	log := d.logText()
	if strings.Contains(log, `containment="`+want) {
		return
	}
	if want == "cgroup " && os.Getenv("CI") != "true" && strings.Contains(log, `containment="process tree"`) {
		t.Skipf("no cgroup containment here; log:\n%s", log)
	}
	t.Fatalf("start-up log does not say containment=%q; log:\n%s", want, log)
}

// assertEscapeesKilled checks the outcome of escapeScenario with a working
// containment: the escaped children dead well within the lease's validity,
// the next run only after that, and the run recorded aborted.
func assertEscapeesKilled(t *testing.T, d *procDaemon, o escapeOutcome) {
	t.Helper()
	if o.deadAt.IsZero() {
		t.Fatalf("escaped children %v alive %v after their supervisor was SIGKILLed; log:\n%s",
			o.escapees, time.Since(o.killedAt).Round(time.Millisecond), d.logText())
	}
	took := o.deadAt.Sub(o.killedAt)
	t.Logf("escaped children dead %v after the supervisor's SIGKILL; first later run after %v",
		took.Round(time.Millisecond), o.laterRunAt.Sub(o.killedAt).Round(time.Millisecond))
	if took >= lossTTL {
		t.Errorf("escaped children dead only %v after the supervisor's death, not within the lease's validity (TTL %v)", took, lossTTL)
	}
	if o.overlap || (!o.laterRunAt.IsZero() && o.laterRunAt.Before(o.deadAt)) {
		t.Errorf("a later run started while an escaped child was alive")
	}
	if o.laterRuns == 0 {
		t.Errorf("no later run within the watch: the lease was not released; log:\n%s", d.logText())
	}
	if log := d.logText(); !strings.Contains(log, "result=aborted") || !strings.Contains(log, "supervisor died without a report") {
		t.Errorf("the run is not recorded as aborted after the supervisor's loss; log:\n%s", log)
	}
}

// TestSupervisorSIGKILLCgroupKillsEscapees: with each job in a cgroup of
// its own, the daemon kills the cgroup when the job's supervisor is
// SIGKILLed — also the children that left the job's process group with
// setsid and a double fork — and confirms it empty before it releases the
// lease: the next run never starts beside them.
func TestSupervisorSIGKILLCgroupKillsEscapees(t *testing.T) {
	t.Parallel()
	d, o := escapeScenario(t, lossTTL+4*time.Second)
	requireContainment(t, d, "cgroup ")
	assertEscapeesKilled(t, d, o)
}

// TestSupervisorSIGKILLProcessTreeKillsEscapees: the process-tree fallback
// (forced: supervisor.ContainmentEnv) kills the escaped children too: they
// were re-parented to the daemon, a child subreaper.
func TestSupervisorSIGKILLProcessTreeKillsEscapees(t *testing.T) {
	t.Parallel()
	d, o := escapeScenario(t, lossTTL+4*time.Second, supervisor.ContainmentEnv+"=process-tree")
	requireContainment(t, d, "process tree")
	assertEscapeesKilled(t, d, o)
}

// TestSupervisorSIGKILLUnconfirmedLapses: when the fallback cannot confirm
// that the escaped children are dead (here its kill of adopted processes
// is off, so they live), the daemon does not release the lease: it is
// left to run out, and no later run starts until the daemon has given up
// on the kill and the lease's validity has passed.
func TestSupervisorSIGKILLUnconfirmedLapses(t *testing.T) {
	t.Parallel()
	// The daemon tries to confirm for ConfirmTimeout (10s), renewing the
	// lease meanwhile, then stops renewing: it runs out one TTL later.
	d, o := escapeScenario(t, supervisor.ConfirmTimeout+lossTTL+6*time.Second,
		supervisor.ContainmentEnv+"=process-tree-unconfirmed")
	requireContainment(t, d, "process tree")
	if !o.deadAt.IsZero() {
		t.Fatalf("escaped children died without the kill of adopted processes: the check cannot fail")
	}
	log := d.logText()
	if !strings.Contains(log, "leaving its lease to run out instead of releasing it") {
		t.Fatalf("the daemon did not leave the lease to run out; log:\n%s", log)
	}
	if !strings.Contains(log, "completed=false") {
		t.Errorf("the run was not recorded as not completed; log:\n%s", log)
	}
	if !o.laterRunAt.IsZero() && o.laterRunAt.Sub(o.killedAt) < supervisor.ConfirmTimeout+lossTTL-time.Second {
		t.Errorf("a later run started %v after the supervisor's SIGKILL: the lease was released before it ran out",
			o.laterRunAt.Sub(o.killedAt).Round(time.Millisecond))
	}
	t.Logf("lapse: first later run %v after the kill", o.laterRunAt.Sub(o.killedAt).Round(time.Millisecond))
}

// TestNegativeControlGroupKillMissesEscapees: with the process-group kill
// alone (supervisor.ContainmentEnv=group, the old behaviour) the escaped
// children survive the supervisor's loss, the lease is released, and the
// next run starts beside them: the checks above can fail.
func TestNegativeControlGroupKillMissesEscapees(t *testing.T) {
	t.Parallel()
	d, o := escapeScenario(t, lossTTL+4*time.Second, supervisor.ContainmentEnv+"=group")
	if !o.deadAt.IsZero() {
		t.Fatalf("escaped children died %v after the kill with the group kill alone: the check cannot fail",
			o.deadAt.Sub(o.killedAt))
	}
	if !o.overlap {
		t.Errorf("no later run overlapped the escaped children; %d later runs; log:\n%s", o.laterRuns, d.logText())
	}
}
