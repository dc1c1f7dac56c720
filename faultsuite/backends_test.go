package faultsuite

import (
	"testing"
	"time"
)

// otherBackends are the backends besides Redis, which the rest of the
// package's tests cover.
func otherBackends() []string {
	var bs []string
	for _, b := range Backends {
		if b != "redis" {
			bs = append(bs, b)
		}
	}
	return bs
}

// TestBackendExactlyOnce is TestExactlyOnce on every other backend: 3
// daemons, no faults; every tick of a 2 s job runs exactly once, to its
// end, runs never overlap, tokens increase.
func TestBackendExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, b := range otherBackends() {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfigFor(b)
			cfg.Jobs = []Job{{Name: "report", Every: 2 * time.Second, Sleep: 500 * time.Millisecond}}
			t.Logf("runs by host: %v", runQuietly(t, cfg))
		})
	}
}

// backendNemesisConfig is nemesisConfig's fleet and jobs on backend.
func backendNemesisConfig(backend string) Config {
	cfg := DefaultConfigFor(backend)
	cfg.Jobs = nemesisConfig().Jobs
	return cfg
}

// TestBackendNemesis is TestNemesis on every other backend: a seeded 20 s
// schedule of every fault kind that applies (server kill and restart of a
// minority and a majority, server pause, slow links, a host cut from a
// majority, link swizzle, daemon pause, kill and clock skew; none
// restarts a server empty, as every server keeps its data), then a quiet
// tail. The oracle must find no violation.
func TestBackendNemesis(t *testing.T) {
	t.Parallel()
	for _, b := range otherBackends() {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			rep, _ := runNemesis(t, backendNemesisConfig(b), NemesisOptions{
				Seed: 11, Duration: 20 * time.Second, Scale: 0.6, Kinds: BaseFaults,
				MinGap: 500 * time.Millisecond, MaxGap: 1500 * time.Millisecond,
			}, 6*time.Second)
			t.Logf("report:\n%s", rep.Markdown())
			if vs := rep.Violations(); len(vs) > 0 {
				t.Errorf("%s, seed %d: %d violations:\n%s", b, rep.Seed, len(vs), FormatViolations(vs))
			}
			if len(rep.Faults) < 3 {
				t.Errorf("only %d faults applied", len(rep.Faults))
			}
		})
	}
}

// TestBackendNemesisNegativeControl is TestNemesisNegativeControl on every
// other backend: with the supervisor's kill switched off
// (LEASECRON_TEST_NO_SUPERVISOR_KILL=1), pausing the daemon that runs a
// long job for longer than the takeover time lets its lease be taken over
// while the job runs on; another host runs the job too, and the oracle
// must report the overlap (or a run past its validity). It shows the
// checker can fail on that backend.
func TestBackendNemesisNegativeControl(t *testing.T) {
	t.Parallel()
	for _, b := range otherBackends() {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			cfg, opts := negativeControlSetup(b)
			rep, _ := runNemesis(t, cfg, opts, time.Second)
			var n int
			for _, v := range rep.Audit.Violations {
				if v.Rule == "overlap" || v.Rule == "validity" {
					n++
				}
			}
			if n == 0 {
				t.Fatalf("%s: with the supervisor's kill off the oracle found no overlap or validity violation:\n%s", b, rep.Markdown())
			}
			t.Logf("negative control on %s: the oracle found, as it must:\n%s", b, FormatViolations(rep.Audit.Violations))
		})
	}
}

// negativeControlSetup is the fleet and the nemesis of
// TestBackendNemesisNegativeControl on backend.
//
// On etcd and ZooKeeper a lease lapses a TTL after the holder's last
// renewal, so TestNemesisNegativeControl's setup serves: a 7 s job every
// 8 s, pauses of a TTL and more.
//
// PostgreSQL and MySQL take a held row over only once the contender has
// seen its version unchanged for a TTL on its own clock: a contender that
// waits for the row's expiry on the server first sees the last version up
// to a TTL after it was written, so the takeover comes 1 to 2 TTLs after
// the holder's last renewal. A pause of a TTL and a little more mostly
// ends before that, and a takeover must also come before the tick's
// deadline. So there every pause outlasts 2 TTLs and a second, and the job
// runs for far longer than a tick with overlap: wait, so that the hosts
// keep trying the job (at least every second) whenever a run holds it:
// each pause of the daemon running it ends in a takeover while its job
// runs on.
func negativeControlSetup(backend string) (Config, NemesisOptions) {
	cfg := DefaultConfigFor(backend)
	cfg.Env = []string{"LEASECRON_TEST_NO_SUPERVISOR_KILL=1"}
	cfg.Orphans = true
	cfg.Jobs = []Job{{Name: "slow", Every: 8 * time.Second, Sleep: 7 * time.Second, Deadline: 6 * time.Second, IgnoreTerm: true}}
	opts := NemesisOptions{
		Seed: 3, Duration: 20 * time.Second, Kinds: []FaultKind{Pause},
		MinGap: 500 * time.Millisecond, MaxGap: time.Second,
	}
	switch backend {
	case "postgres", "mysql":
		cfg.Jobs = []Job{{Name: "slow", Every: 8 * time.Second, Sleep: time.Minute, Overlap: "wait", IgnoreTerm: true}}
		opts.MinPause = 2*cfg.TTL + time.Second
	}
	return cfg, opts
}
