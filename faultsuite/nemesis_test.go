package faultsuite

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nemesisConfig is the fleet the nemesis runs on: 3 daemons, 5 nodes of
// which 2 restart empty and 3 keep an AOF (appendfsync always), and three
// jobs: a short one, a long one that ignores SIGTERM (only the
// supervisor's SIGKILL stops it) and one with overlap: wait.
func nemesisConfig() Config {
	cfg := DefaultConfig()
	cfg.AOFNodes = 3
	cfg.Jobs = []Job{
		{Name: "short", Every: 2 * time.Second, Sleep: 300 * time.Millisecond},
		{Name: "long", Every: 5 * time.Second, Sleep: 2500 * time.Millisecond, Deadline: 4 * time.Second, IgnoreTerm: true},
		{Name: "waiter", Every: 3 * time.Second, Sleep: 1500 * time.Millisecond, Deadline: 2500 * time.Millisecond, Overlap: "wait"},
	}
	return cfg
}

// runNemesis runs a fleet with cfg under a nemesis with opts, then a quiet
// tail, stops the daemons and audits the history with their logs.
func runNemesis(t *testing.T, cfg Config, opts NemesisOptions, tail time.Duration) (*Report, *Fleet) {
	t.Helper()
	f := New(t, binaries(t), cfg)
	f.StartAll()
	f.WaitVoting()
	from := f.ScheduleFrom()
	opts.Logf = t.Logf
	n := NewNemesis(f, opts)
	rep := &Report{Seed: opts.Seed, Race: raceEnabled, Config: f.Config(), Started: time.Now()}
	t.Logf("nemesis: seed %d for %s (reproduce with this seed)", opts.Seed, opts.Duration)
	n.Run()
	time.Sleep(tail)
	rep.Stopped = time.Now()
	f.StopAll()
	h := f.History()
	leases, err := f.Leases()
	if err != nil {
		t.Fatal(err)
	}
	rep.Faults = n.Faults
	rep.Audit = h.Audit(leases)
	rep.Liveness, rep.LivenessChecked = n.Liveness(h, from.Add(time.Second), rep.Stopped.Add(-500*time.Millisecond))
	rep.Liveness = append(rep.Liveness, n.Paused(h)...)
	return rep, f
}

// TestNemesis is the short fault run of `make test`: one fixed seed, a
// 22 s schedule with hold times scaled to 60 %, every fault kind possible,
// then a 6 s quiet tail. The oracle must find no violation.
func TestNemesis(t *testing.T) {
	t.Parallel()
	rep, _ := runNemesis(t, nemesisConfig(), NemesisOptions{
		Seed: 7, Duration: 22 * time.Second, Scale: 0.6, Kinds: BaseFaults,
		MinGap: 500 * time.Millisecond, MaxGap: 1500 * time.Millisecond,
	}, 6*time.Second)
	t.Logf("report:\n%s", rep.Markdown())
	if vs := rep.Violations(); len(vs) > 0 {
		t.Errorf("seed %d: %d violations:\n%s", rep.Seed, len(vs), FormatViolations(vs))
	}
	if len(rep.Faults) < 3 {
		t.Errorf("only %d faults applied", len(rep.Faults))
	}
}

// TestSoak is `make soak`: a long nemesis run, configured by environment
// variables, skipped without them. LEASECRON_SOAK_SECONDS is how long the
// nemesis runs, LEASECRON_SOAK_SEED its seed (default 1),
// LEASECRON_SOAK_REPORT where the Markdown report goes (default: the test
// log only; on a violation the logs are kept beside it),
// LEASECRON_SOAK_FAULTS a comma-separated subset of the fault kinds
// (default: all), LEASECRON_SOAK_LOGS a directory to keep the run and
// daemon logs in, LEASECRON_SOAK_BACKEND the backend (default redis; one
// of Backends).
func TestSoak(t *testing.T) {
	secs, err := strconv.Atoi(os.Getenv("LEASECRON_SOAK_SECONDS"))
	if err != nil || secs <= 0 {
		t.Skip("set LEASECRON_SOAK_SECONDS (make soak SECONDS=1800 SEED=1) to run the soak")
	}
	seed := uint64(1)
	if s := os.Getenv("LEASECRON_SOAK_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("LEASECRON_SOAK_SEED=%q: %v", s, err)
		}
	}
	var kinds []FaultKind
	if s := os.Getenv("LEASECRON_SOAK_FAULTS"); s != "" {
		for _, k := range strings.Split(s, ",") {
			if !slices.Contains(AllFaults, FaultKind(k)) {
				t.Fatalf("LEASECRON_SOAK_FAULTS: unknown fault %q; known: %v", k, AllFaults)
			}
			kinds = append(kinds, FaultKind(k))
		}
	}
	cfg := nemesisConfig()
	if b := os.Getenv("LEASECRON_SOAK_BACKEND"); b != "" && b != "redis" {
		if !slices.Contains(Backends, b) {
			t.Fatalf("LEASECRON_SOAK_BACKEND=%q: unknown backend; known: %v", b, Backends)
		}
		cfg = backendNemesisConfig(b)
	}
	// The soak also draws the Escapee fault, which needs a job that
	// leaves one, and the server clock step where the store allows it.
	cfg.Jobs = append(cfg.Jobs, escapeeJobConfig())
	cfg.ClockStep = cfg.Backend == "postgres"
	rep, f := runNemesis(t, cfg, NemesisOptions{
		Seed: seed, Duration: time.Duration(secs) * time.Second, Kinds: kinds,
		CalmEvery: 8, CalmFor: 20 * time.Second,
	}, 20*time.Second)
	md := rep.Markdown()
	if path := os.Getenv("LEASECRON_SOAK_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
			t.Error(err)
		}
		t.Logf("report written to %s", path)
	}
	t.Logf("report:\n%s", md)
	if dir := os.Getenv("LEASECRON_SOAK_LOGS"); dir != "" {
		keepLogs(t, f, dir)
	}
	if vs := rep.Violations(); len(vs) > 0 {
		t.Errorf("seed %d: %d violations", rep.Seed, len(vs))
		if path := os.Getenv("LEASECRON_SOAK_REPORT"); path != "" {
			keepLogs(t, f, path+".logs")
		}
	}
}

// keepLogs copies the fleet's run log and daemon logs to dir, so that a
// failed soak can be investigated after its temporary directory is gone.
func keepLogs(t *testing.T, f *Fleet, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Error(err)
		return
	}
	paths := []string{f.LogPath}
	for _, d := range f.Daemons {
		paths = append(paths, d.LogPath)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644)
		}
		if err != nil {
			t.Error(err)
		}
	}
	t.Logf("logs kept in %s", dir)
}

// TestNemesisNegativeControl checks the checker under the nemesis: with
// the supervisor's kill switched off (LEASECRON_TEST_NO_SUPERVISOR_KILL=1)
// pauses longer than the TTL of the daemon running a long job must make
// the oracle report an overlap (the paused host's job runs on while
// another host takes the tick over).
func TestNemesisNegativeControl(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.AOFNodes = 3
	cfg.Env = []string{"LEASECRON_TEST_NO_SUPERVISOR_KILL=1"}
	cfg.Orphans = true
	// The job runs 7 of every 8 s, so a pause (which hits the daemon
	// running it) nearly always comes early enough for the job to outlive
	// its lease; one that comes in the last seconds of a run lets the job
	// end in time, so the run needs several pauses.
	cfg.Jobs = []Job{{Name: "slow", Every: 8 * time.Second, Sleep: 7 * time.Second, Deadline: 6 * time.Second, IgnoreTerm: true}}
	rep, _ := runNemesis(t, cfg, NemesisOptions{
		Seed: 3, Duration: 16 * time.Second, Kinds: []FaultKind{Pause},
		MinGap: 500 * time.Millisecond, MaxGap: time.Second,
	}, time.Second)
	var n int
	for _, v := range rep.Audit.Violations {
		if v.Rule == "overlap" || v.Rule == "validity" {
			n++
		}
	}
	if n == 0 {
		t.Fatalf("with the supervisor's kill off the oracle found no overlap or validity violation:\n%s", rep.Markdown())
	}
	t.Logf("negative control: the oracle found, as it must:\n%s", FormatViolations(rep.Audit.Violations))
}

// TestAuditLogs audits logs kept by a soak (LEASECRON_SOAK_LOGS, or the
// .logs directory kept beside a failed soak's report) again:
// LEASECRON_AUDIT_DIR=dir go test -run TestAuditLogs ./faultsuite.
// It is skipped without the variable.
func TestAuditLogs(t *testing.T) {
	dir := os.Getenv("LEASECRON_AUDIT_DIR")
	if dir == "" {
		t.Skip("set LEASECRON_AUDIT_DIR to a directory with runs.jsonl and h*.log")
	}
	h, err := ReadHistory(filepath.Join(dir, "runs.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "h*.log"))
	leases := map[LeaseKey]*LeaseLog{}
	for _, l := range logs {
		if err := ReadDaemonLog(strings.TrimSuffix(filepath.Base(l), ".log"), l, leases); err != nil {
			t.Fatal(err)
		}
	}
	a := h.Audit(leases)
	t.Logf("runs %d (ended %d), unverified %d, abort slack %s", a.Runs, a.Ended, len(a.Unverified), a.Stats())
	for _, ab := range a.Aborts {
		t.Logf("slack %7s  valid until %s  %s", ab.Slack.Round(time.Millisecond), fmtT(ab.ValidUntil), ab.Run)
	}
	if len(a.Violations) > 0 {
		t.Errorf("%d violations:\n%s", len(a.Violations), FormatViolations(a.Violations))
	}
}
