//go:build linux

package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestApplyLimitsWrites: the limits are written in the cgroup v2 file
// formats: memory.max in bytes with swap off, cpu.max as a quota per
// 100ms period (at least the kernel's 1ms), pids.max; a limit not set
// writes nothing. (The files of a temporary directory stand in for a
// cgroup's; TestLimitsInCgroup runs them for real.)
func TestApplyLimitsWrites(t *testing.T) {
	for _, tc := range []struct {
		l    Limits
		want map[string]string
	}{
		{Limits{MemoryMax: 64 << 20, CPUMax: 0.5, TasksMax: 64},
			map[string]string{"memory.max": "67108864", "memory.swap.max": "0", "cpu.max": "50000 100000", "pids.max": "64"}},
		{Limits{CPUMax: 2}, map[string]string{"cpu.max": "200000 100000"}},
		{Limits{CPUMax: 0.001}, map[string]string{"cpu.max": "1000 100000"}},
		{Limits{}, map[string]string{}},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "memory.swap.max"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := applyLimits(dir, tc.l); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"memory.max", "memory.swap.max", "cpu.max", "pids.max"} {
			b, _ := os.ReadFile(filepath.Join(dir, f))
			if want := tc.want[f]; string(b) != want {
				t.Errorf("%+v: %s = %q, want %q", tc.l, f, b, want)
			}
		}
	}
}

// TestLimitHit: which limit a run ran into comes from its cgroup's event
// counters, and only a limit the job has counts.
func TestLimitHit(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"memory.events": "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n",
		"pids.events":   "max 3\n",
		"cpu.stat":      "usage_usec 100\nnr_periods 10\nnr_throttled 4\nthrottled_usec 900\n",
	}
	for f, s := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	all := Limits{MemoryMax: 1, CPUMax: 1, TasksMax: 1}
	for _, tc := range []struct {
		l    Limits
		want string
	}{
		{all, LimitMemory},
		{Limits{TasksMax: 8, CPUMax: 1}, LimitTasks},
		{Limits{CPUMax: 1}, LimitCPU},
		{Limits{}, ""},
	} {
		if got := limitHit(dir, tc.l); got != tc.want {
			t.Errorf("limitHit(%+v) = %q, want %q", tc.l, got, tc.want)
		}
	}
	if got := limitHit(t.TempDir(), all); got != "" {
		t.Errorf("a cgroup without events: %q", got)
	}
}

// TestCanLimit: the process tree cannot limit anything; a cgroup
// containment can apply the limits whose controllers it has, and says
// which ones it lacks and why.
func TestCanLimit(t *testing.T) {
	if err := (Containment{}).CanLimit(Limits{}); err != nil {
		t.Errorf("no limits: %v", err)
	}
	err := (Containment{why: "no cgroup v2"}).CanLimit(Limits{MemoryMax: 1 << 30})
	if err == nil || !strings.Contains(err.Error(), "process tree") || !strings.Contains(err.Error(), "no cgroup v2") {
		t.Errorf("process tree: %v", err)
	}
	c := Containment{mode: containCgroup, dir: "/cg/leasecron-jobs", controllers: []string{"memory"}, noControllers: "pids is bound to a cgroup v1 hierarchy"}
	if err := c.CanLimit(Limits{MemoryMax: 1 << 30}); err != nil {
		t.Errorf("memory with the memory controller: %v", err)
	}
	err = c.CanLimit(Limits{MemoryMax: 1 << 30, TasksMax: 10})
	if err == nil || !strings.Contains(err.Error(), "pids") || strings.Contains(err.Error(), "memory,") || !strings.Contains(err.Error(), "cgroup v1") {
		t.Errorf("pids without the pids controller: %v", err)
	}
}

// TestStartRefusesUnappliedLimits: a job whose limits the containment
// cannot apply is not started (ErrLimits), never started unlimited.
func TestStartRefusesUnappliedLimits(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	_, err := Start(context.Background(), testSelf(t), Spec{
		Path: "/bin/touch", Args: []string{marker}, Deadline: BootNow() + int64(time.Minute),
		Limits: Limits{MemoryMax: 64 << 20},
	})
	if err == nil || !strings.Contains(err.Error(), ErrLimits.Error()) {
		t.Fatalf("Start: %v; want ErrLimits", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the job ran")
	}
}

// requireLimits returns the cgroup containment when it can apply l, and
// skips the test, saying why, when it cannot.
func requireLimits(t *testing.T, l Limits) Containment {
	t.Helper()
	c := requireCgroup(t)
	if err := c.CanLimit(l); err != nil {
		t.Skipf("limits cannot be applied on this host: %v", err)
	}
	return c
}

// TestLimitsInCgroup: a job over its memory_max is killed by the OOM
// killer and reported as LimitMemory; one that forks beyond tasks_max is
// refused and reported as LimitTasks; a job within its limits reports
// none (the negative control of the counters).
func TestLimitsInCgroup(t *testing.T) {
	all := Limits{MemoryMax: 16 << 20, TasksMax: 8}
	c := requireLimits(t, all)
	for _, tc := range []struct {
		name, shell, want string
	}{
		// tail keeps an unterminated line in memory: 256MiB of it.
		{"memory", "head -c 256M /dev/zero | tail >/dev/null", LimitMemory},
		{"tasks", "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 5 & done; wait", LimitTasks},
		{"within", "head -c 1M /dev/zero | tail >/dev/null", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := Start(ctx, testSelf(t), Spec{
				Path: "/bin/sh", Args: []string{"-c", tc.shell}, KillGrace: time.Second,
				Deadline: BootNow() + int64(time.Minute), Contain: c, Name: "limits-" + tc.name, Limits: all,
			})
			if err != nil {
				t.Fatal(err)
			}
			_ = p.Stdout().Close()
			_ = p.Stderr().Close()
			exit, err := p.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if exit.Limit != tc.want {
				t.Errorf("exit %+v: limit %q, want %q", exit, exit.Limit, tc.want)
			}
		})
	}
}
