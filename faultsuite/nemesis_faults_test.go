package faultsuite

import (
	"cmp"
	"testing"
	"time"
)

// escapeeJobConfig is a job whose command leaves a child in a session of
// its own (setsid) that lives on for 5 s after the run's start: longer
// than the period, so an escapee that survives its supervisor overlaps the
// next tick's run.
func escapeeJobConfig() Job {
	return Job{Name: "escapee", Every: 3 * time.Second, Sleep: 1500 * time.Millisecond, Escapee: 5 * time.Second}
}

// runFault runs cfg under a nemesis that applies only kind, for dur, and
// fails the test on any violation of the audit, the liveness oracle or a
// pause. It returns the report.
func runFault(t *testing.T, cfg Config, kind FaultKind, seed uint64, dur time.Duration) *Report {
	t.Helper()
	rep, _ := runNemesis(t, cfg, NemesisOptions{
		Seed: seed, Duration: dur, Kinds: []FaultKind{kind},
		MinGap: time.Second, MaxGap: 2 * time.Second,
	}, 5*time.Second)
	t.Logf("report:\n%s", rep.Markdown())
	if len(rep.Faults) == 0 {
		t.Fatalf("%s: no fault applied", kind)
	}
	if vs := rep.Violations(); len(vs) > 0 {
		t.Errorf("%s on %s, seed %d: %d violations:\n%s", kind, cmp.Or(cfg.Backend, "redis"), seed, len(vs), FormatViolations(vs))
	}
	return rep
}

// TestFrozenServer: the ensemble's leader (etcd, ZooKeeper) or a Redis
// node is frozen (SIGSTOP) for longer than the TTL while a quorum stays
// up: every tick must still run (a ZooKeeper ensemble's within the
// takeover bound after it has elected another leader, which the nemesis
// must have seen for every freeze), none twice.
//
// The fault is a frozen node, which answers no request whatever the
// timeout, so the Redis nodes get one a loaded test machine meets (150ms,
// as TestPausedRestartEmpty's): with 50ms, at load 17.7 and 21 the nodes
// that were not frozen missed it for seconds (the machine's load, not the
// fault), and the liveness oracle rightly found ticks missed (one, and
// three).
func TestFrozenServer(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"redis", "etcd", "zookeeper"} {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			cfg := backendNemesisConfig(b)
			if b == "redis" {
				cfg = nemesisConfig()
				cfg.Timeout = 150 * time.Millisecond
			}
			rep := runFault(t, cfg, FreezeLeader, 5, 16*time.Second)
			for _, ft := range rep.Faults {
				if b == "zookeeper" && ft.Unserved.IsZero() {
					t.Errorf("the nemesis saw no leader elected after freezing the ZooKeeper leader: %s", ft)
				}
			}
		})
	}
}

// TestPausedRestartEmpty: a job is paused, then the Redis nodes without
// persistence (a minority) restart empty; the job must not run until it
// is resumed, and then run again.
//
// The fault is not about latency, so the nodes get a timeout a loaded
// machine meets (the TTL's tenth is 200ms): with 50ms, the three nodes
// with appendfsync always answered neither daemon for 2 s at load 11 in
// a quiet moment, and the liveness oracle rightly found ticks missed.
func TestPausedRestartEmpty(t *testing.T) {
	t.Parallel()
	cfg := nemesisConfig()
	cfg.Timeout = 150 * time.Millisecond
	runFault(t, cfg, PausedRestartEmpty, 5, 16*time.Second)
}

// TestFailbackFromFormerReplica: on 3 Redis nodes (2 without
// persistence), the two fail back from their former replicas while the
// daemons keep their connections: no two runs may overlap, no completed
// tick run again.
func TestFailbackFromFormerReplica(t *testing.T) {
	t.Parallel()
	cfg := nemesisConfig()
	cfg.Nodes, cfg.AOFNodes = 3, 1
	runFault(t, cfg, Failback, 5, 16*time.Second)
}

// TestSetsidEscapee: the supervisor of a job that left a setsid child is
// SIGKILLed; the child must be dead before another host (or the next
// tick) takes the lease: no overlap.
func TestSetsidEscapee(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"redis", "postgres"} {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfigFor(b)
			cfg.Jobs = []Job{escapeeJobConfig()}
			runFault(t, cfg, Escapee, 5, 14*time.Second)
		})
	}
}

// TestServerClockStep: the PostgreSQL server's wall clock steps 1 to 3 s
// ahead for a while: no lease may be taken from a holder that still
// counts validity (no overlap), and ticks go on.
func TestServerClockStep(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfigFor("postgres")
	cfg.ClockStep = true
	cfg.Jobs = []Job{{Name: "long", Every: 5 * time.Second, Sleep: 2500 * time.Millisecond, Deadline: 4 * time.Second, IgnoreTerm: true},
		{Name: "short", Every: 2 * time.Second, Sleep: 300 * time.Millisecond}}
	runFault(t, cfg, ServerClockStep, 5, 16*time.Second)
}
