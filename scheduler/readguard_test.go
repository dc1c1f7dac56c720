package scheduler

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease/redlock"
)

// heartbeatReadFailed is the start of the line a failed read of the
// hosts' heartbeats logs.
const heartbeatReadFailed = "could not read the hosts' heartbeats"

// readsOnFreshServers starts one dry-run scheduler on three Redis servers
// started just now, the first down of them killed, with a restart guard
// (10s) longer than the test waits: the servers that run answer, but
// their answers to reads do not count yet. It returns the scheduler's
// log, at debug.
func readsOnFreshServers(t *testing.T, down int) *logBuffer {
	t.Helper()
	cluster := redistest.Start(t, 3)
	for _, n := range cluster.Nodes[:down] {
		n.Kill()
	}
	cfg := tickConfig(t, cluster.URLs(), &Job{Name: "hourly", Schedule: "@hourly", Shell: "true"})
	be, err := redlock.Open(context.Background(), redlock.Config{Nodes: redisOf(cfg).Nodes, Prefix: redisOf(cfg).Prefix, Options: []redlock.Option{redlock.WithTimeout(200 * time.Millisecond), redlock.WithRestartGuard(10 * time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	s, err := New(cfg, Options{Self: "/nonexistent/leasecron-supervisor", Backend: be, DryRun: true, Metrics: NewMetrics(prometheus.NewRegistry()),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = s.Close() })
	return logs
}

// waitLine waits (bounded) for a logged line that contains every one of
// subs.
func waitLine(t *testing.T, logs *logBuffer, subs ...string) bool {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); len(logs.lines(subs...)) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

// TestReadsInRestartGuardDoNotWarn: a read of the store that fails only
// because servers are inside their restart guard (one server down, the
// two others fresh: once they vote, a quorum answers) is expected after
// a start, not trouble: a debug line, no warning.
func TestReadsInRestartGuardDoNotWarn(t *testing.T) {
	t.Parallel()
	logs := readsOnFreshServers(t, 1)
	if !waitLine(t, logs, "level=DEBUG", heartbeatReadFailed, "servers do not vote yet") {
		t.Fatalf("no debug line for a heartbeat read refused by servers in their restart guard; lines: %q", logs.lines(heartbeatReadFailed))
	}
	if warns := logs.lines("level=WARN", "could not read the"); len(warns) > 0 {
		t.Errorf("warnings for reads refused by servers in their restart guard: %q", warns)
	}
}

// TestReadsWithoutQuorumWarn is the control: the same fresh servers with
// two of three down leave no quorum whatever the guard does, so the
// failed read is a warning.
func TestReadsWithoutQuorumWarn(t *testing.T) {
	t.Parallel()
	logs := readsOnFreshServers(t, 2)
	if !waitLine(t, logs, "level=WARN", heartbeatReadFailed) {
		t.Errorf("no warning for a heartbeat read without a quorum of servers up; lines: %q", logs.lines(heartbeatReadFailed))
	}
}
