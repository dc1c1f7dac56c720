package scheduler

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasecron/leasecron/internal/supervisor"
	"github.com/leasecron/leasecron/lease/redlock"
)

// TestLimitKeys: memory_max, cpu_max and tasks_max are read per job and
// from defaults (a job's own value wins), with binary size units.
func TestLimitKeys(t *testing.T) {
	c := mustParse(t, node1+`defaults:
  memory_max: 512M
  cpu_max: 0.5
  tasks_max: 64
jobs:
  - {name: a, schedule: "@hourly", shell: "true"}
  - {name: b, schedule: "@hourly", shell: "true", memory_max: 1.5GiB, cpu_max: 2, tasks_max: 0}
  - {name: c, schedule: "@hourly", shell: "true", memory_max: "1048576000"}
`)
	want := map[string][3]any{
		"a": {int64(512 << 20), 0.5, 64},
		"b": {int64(3 << 29), 2.0, 0},
		"c": {int64(1048576000), 0.5, 64},
	}
	for _, j := range c.Jobs {
		if got := [3]any{j.MemoryMax, j.CPUMax, j.TasksMax}; got != want[j.Name] {
			t.Errorf("job %s: limits %v, want %v", j.Name, got, want[j.Name])
		}
	}
	if j := mustParse(t, node1+job1).Jobs[0]; j.HasLimits() {
		t.Errorf("a job without limit keys has limits: %+v", j)
	}
}

// TestLimitFloors: a limit below what a process needs and a size that
// cannot be read are errors naming the file, the line and the field; the
// documented floors themselves are accepted.
func TestLimitFloors(t *testing.T) {
	for _, tc := range []struct{ value, field, msg string }{
		{"memory_max: 512K", "memory_max", "below 4M"},
		{"memory_max: 12XB", "memory_max", "bad size"},
		{"memory_max: -1M", "memory_max", "bad size"},
		{"cpu_max: 0.001", "cpu_max", "want a share of one core"},
		{"cpu_max: half", "cpu_max", "bad number"},
		{"tasks_max: 1", "tasks_max", "below 4"},
	} {
		text := node1 + "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    shell: \"true\"\n    " + tc.value + "\n"
		_, err := parse(t, text)
		errs := configErrors(t, err)
		if len(errs) != 1 {
			t.Errorf("%s: errors %v, want one", tc.value, err)
			continue
		}
		e := errs[0]
		if e.File != "jobs.yaml" || e.Line != 8 || e.Field != "jobs[0]."+tc.field || !strings.Contains(e.Msg, tc.msg) {
			t.Errorf("%s: %q (line %d, field %s); want jobs.yaml:8, jobs[0].%s, %q", tc.value, e.Error(), e.Line, e.Field, tc.field, tc.msg)
		}
	}
	_, err := parse(t, node1+"defaults:\n  tasks_max: 2\n"+job1)
	if errs := configErrors(t, err); len(errs) != 1 || errs[0].Field != "defaults.tasks_max" || errs[0].Line != 5 {
		t.Errorf("a bad default: %v; want one error at jobs.yaml:5 defaults.tasks_max", err)
	}
	c := mustParse(t, node1+"jobs:\n  - {name: a, schedule: \"@hourly\", shell: \"true\", memory_max: 4M, cpu_max: 0.01, tasks_max: 4}\n")
	if j := c.Jobs[0]; j.MemoryMax != minMemoryMax || j.CPUMax != minCPUMax || j.TasksMax != minTasksMax {
		t.Errorf("the floors: %+v", j)
	}
}

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

// TestLimitsRefusedWithoutCgroups: a scheduler whose containment cannot
// apply limits (the process-tree fallback, forced here) does not try the
// ticks of a job with limits and refuses to start it, with the reason;
// a job without limits is tried as before (the negative control: the
// filter is not dropping everything).
func TestLimitsRefusedWithoutCgroups(t *testing.T) {
	limited, free := defaultJob(), defaultJob()
	limited.Name, limited.Schedule, limited.Shell, limited.MemoryMax = "limited", "@hourly", "true", 64<<20
	free.Name, free.Schedule, free.Shell = "free", "@hourly", "true"
	cfg := tickConfig(t, nil, &limited, &free)
	be, err := redlock.Open(cfg.Redis.Nodes, "limits")
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
	if got := s.limitable(cfg.Jobs); len(got) != 1 || got[0].Name != "free" {
		t.Errorf("limitable kept %v; want only free", got)
	}
	// The supervisor refuses too, before any process is started (Self
	// does not exist: only the refusal can explain ErrLimits).
	_, err = s.startSupervised(supervisor.Spec{Path: "/bin/true", Deadline: supervisor.BootNow() + 10e9,
		Contain: s.contain, Limits: jobLimits(cfg.Jobs[0])})
	if !errors.Is(err, supervisor.ErrLimits) {
		t.Errorf("starting a job with limits: %v; want ErrLimits", err)
	}
}
