package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/internal/supervisor"
	"github.com/leasecron/leasecron/lease/redlock"
	"github.com/prometheus/client_golang/prometheus"
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
	if got, _, _ := s.exitResult(j, nil, runExit{exit: own}, runCut{why: "stopped", at: at}, log); got != "ok" {
		t.Errorf("a job that exited 0 before pause --stop was decided: result %s, want ok", got)
	}
	if got, _, _ := s.exitResult(j, nil, runExit{exit: termed}, runCut{why: "stopped", at: at}, log); got != "stopped" {
		t.Errorf("a job stopped by pause --stop: result %s, want stopped", got)
	}
}

// TestAbortCountedByResult: leasecron_job_aborts_total counts a run once
// its result is known, once, by the reason of that result: a run whose
// job ended before its stop (endedFirst) keeps its exit's result and is
// not counted; a run its stop ended is, by the stop (the result stopped
// as paused, aborted as lease_lost); a lost supervisor, a suspend or a
// limit counts under its own reason only, also when a stop was decided
// too.
func TestAbortCountedByResult(t *testing.T) {
	at := time.Now()
	own := supervisor.Exit{Reason: supervisor.ReasonExited, Ended: at.Add(-70 * time.Millisecond)}
	termed := supervisor.Exit{Reason: supervisor.ReasonTerminated, Signal: "SIGTERM", Code: 143, Ended: at.Add(time.Second), TermTime: 1}
	throttled := termed
	throttled.Limit = supervisor.LimitCPU
	lost := runExit{exit: supervisor.Exit{Code: -1, Reason: supervisor.ReasonSupervisorLost}, err: fmt.Errorf("%w: signal: killed", supervisor.ErrSupervisorLost)}
	reg := prometheus.NewRegistry()
	s, log := &Scheduler{opts: Options{Metrics: NewMetrics(reg)}}, slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name, why string
		w         runExit
		result    string
		reason    string // "" for not counted
	}{
		{"ended-before-stop", "stopped", runExit{exit: own}, "ok", ""},
		{"ended-before-timeout", "timeout", runExit{exit: own}, "ok", ""},
		{"paused-stop", "stopped", runExit{exit: termed}, "stopped", "paused"},
		{"timed-out", "timeout", runExit{exit: termed}, "timeout", "timeout"},
		{"shut-down", "shutdown", runExit{exit: own}, "shutdown", "shutdown"},
		{"lease-lost", "aborted", runExit{exit: own}, "aborted", "lease_lost"},
		{"not-stopped", "", runExit{exit: own}, "ok", ""},
		{"throttled", "timeout", runExit{exit: throttled}, ResultLimit, "limit_cpu"},
		{"supervisor-lost", "timeout", lost, "aborted", "supervisor_lost"},
		{"suspended", "", runExit{exit: supervisor.Exit{Reason: supervisor.ReasonSuspended, Signal: "SIGKILL"}}, "aborted", "suspended"},
	} {
		r := &activeRun{proc: &supervisor.Process{}}
		got, _ := s.result(&Job{Name: tc.name}, r, tc.w, runCut{why: tc.why, at: at}, log)
		if got != tc.result {
			t.Errorf("%s: result %s, want %s", tc.name, got, tc.result)
		}
		counted := map[string]float64{}
		for labels, v := range gather(t, reg)["leasecron_job_aborts_total"] {
			if rest, ok := strings.CutPrefix(labels, "job="+tc.name+","); ok {
				counted[rest] = v
			}
		}
		want := map[string]float64{}
		if tc.reason != "" {
			want["reason="+tc.reason] = 1
		}
		if !maps.Equal(counted, want) {
			t.Errorf("%s: leasecron_job_aborts_total %v, want %v", tc.name, counted, want)
		}
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
