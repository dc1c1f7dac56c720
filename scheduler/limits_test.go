package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/internal/supervisor"
	"github.com/leasecron/leasecron/lease/redlock"
)

// TestLimitResults: a failed run that hit its memory_max is oom, one that
// hit its tasks_max is limit, as is a timeout while throttled at cpu_max;
// those count as failures (on_failure) and complete the tick unless
// retried, like failed. A run that hit nothing keeps its result.
func TestLimitResults(t *testing.T) {
	for _, tc := range []struct {
		result, limit, want string
	}{
		{"failed", supervisor.LimitMemory, ResultOOM},
		{"failed", supervisor.LimitTasks, ResultLimit},
		{"timeout", supervisor.LimitCPU, ResultLimit},
		{"failed", "", "failed"},
		{"ok", supervisor.LimitMemory, "ok"},           // a child was OOM-killed, the job coped
		{"aborted", supervisor.LimitMemory, "aborted"}, // cut short from outside
	} {
		if got := limitResult(tc.result, supervisor.Exit{Limit: tc.limit}); got != tc.want {
			t.Errorf("limitResult(%s, %q) = %s, want %s", tc.result, tc.limit, got, tc.want)
		}
	}
	for _, r := range []string{ResultOOM, ResultLimit} {
		if !FailedResult(r) || !ranToEnd(r) {
			t.Errorf("%s: FailedResult %v, ranToEnd %v; want both", r, FailedResult(r), ranToEnd(r))
		}
	}
	for _, r := range []string{"ok", "aborted", "shutdown", "stopped", "dry_run"} {
		if FailedResult(r) {
			t.Errorf("%s counts as a failure", r)
		}
	}
}

// TestEndedBeforeItsStop: a run cut short for its timeout or a pause
// --stop is recorded as such unless its job had ended on its own before
// the stop was decided (reaped earlier, exited with a status, sent no
// signal); a lost lease and a shutdown always stand.
func TestEndedBeforeItsStop(t *testing.T) {
	at := time.Now()
	own := supervisor.Exit{Reason: supervisor.ReasonExited, Ended: at.Add(-70 * time.Millisecond)}
	late := own
	late.Ended = at.Add(time.Millisecond)
	termed, killed, signal := own, own, own
	termed.TermTime, killed.KillTime, signal.Signal = 1, 1, "SIGTERM"
	for _, tc := range []struct {
		why  string
		exit supervisor.Exit
		want bool
	}{
		{"stopped", own, true},
		{"timeout", own, true},
		{"stopped", late, false},
		{"stopped", termed, false},
		{"stopped", killed, false},
		{"stopped", signal, false},
		{"stopped", supervisor.Exit{}, false}, // not reaped: unknown
		{"shutdown", own, false},
		{"aborted", own, false},
		{"", own, false},
	} {
		if got := endedFirst(runCut{why: tc.why, at: at}, tc.exit); got != tc.want {
			t.Errorf("endedFirst(%q, %+v) = %v, want %v", tc.why, tc.exit, got, tc.want)
		}
	}
	s, j, log := &Scheduler{}, &Job{Name: "j"}, slog.New(slog.DiscardHandler)
	if got, _ := s.exitResult(j, nil, runExit{exit: own}, runCut{why: "stopped", at: at}, log); got != "ok" {
		t.Errorf("a job that exited 0 before pause --stop was decided: result %s, want ok", got)
	}
	if got, _ := s.exitResult(j, nil, runExit{exit: termed}, runCut{why: "stopped", at: at}, log); got != "stopped" {
		t.Errorf("a job stopped by pause --stop: result %s, want stopped", got)
	}
}

// TestLimitsRefusedWithoutCgroups: a scheduler whose containment cannot
// apply limits (the process-tree fallback, forced here) does not try the
// ticks of a job with limits and refuses to start it, with the reason;
// a job without limits is tried as before (the negative control: the
// filter is not dropping everything).
func TestLimitsRefusedWithoutCgroups(t *testing.T) {
	limited, free := config.DefaultJob(), config.DefaultJob()
	limited.Name, limited.Schedule, limited.Shell, limited.MemoryMax = "limited", "@hourly", "true", 64<<20
	free.Name, free.Schedule, free.Shell = "free", "@hourly", "true"
	cfg := tickConfig(t, nil, &limited, &free)
	be, err := redlock.Open(context.Background(), redlock.Config{Nodes: redisOf(cfg).Nodes, Prefix: "limits"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, Options{Self: "/nonexistent/leasecron-supervisor", Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	forceProcessTree(s)
	err = s.CannotLimit(cfg.Jobs[0])
	if err == nil || !strings.Contains(err.Error(), "cannot be applied") || !strings.Contains(err.Error(), "process tree") {
		t.Errorf("CannotLimit(limited) = %v; want the reason", err)
	}
	if err := s.CannotLimit(cfg.Jobs[1]); err != nil {
		t.Errorf("CannotLimit(free) = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if got := s.limitable(ctx, &wg, time.Now().Truncate(time.Second), cfg.Jobs); len(got) != 1 || got[0].Name != "free" {
		t.Errorf("limitable kept %v; want only free", got)
	}
	cancel()
	wg.Wait()
	// The supervisor refuses too, before any process is started (Self
	// does not exist: only the refusal can explain ErrLimits).
	_, err = s.startSupervised(supervisor.Spec{Path: "/bin/true", Deadline: supervisor.BootNow() + 10e9,
		Contain: s.contain, Limits: jobLimits(cfg.Jobs[0])})
	if !errors.Is(err, supervisor.ErrLimits) {
		t.Errorf("starting a job with limits: %v; want ErrLimits", err)
	}
}
