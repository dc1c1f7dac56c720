//go:build linux

package supervisor

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hogJob allocates far beyond 16MiB: tail keeps an unterminated line in
// memory, 256MiB of it.
const hogJob = "head -c 256M /dev/zero | tail >/dev/null"

// TestApplyV1Writes: on cgroup v1 the limits are written in its formats:
// memory.limit_in_bytes and memory.memsw.limit_in_bytes (when swap is
// accounted) in bytes, the CFS quota per 100ms period, pids.max. (The
// files of a temporary directory stand in for a cgroup's.)
func TestApplyV1Writes(t *testing.T) {
	l := Limits{MemoryMax: 64 << 20, CPUMax: 0.5, TasksMax: 64}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range limitControllers {
		if err := applyV1(dir, c, l); err != nil {
			t.Fatal(err)
		}
	}
	for f, want := range map[string]string{"memory.limit_in_bytes": "67108864", "memory.memsw.limit_in_bytes": "67108864",
		"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "50000", "pids.max": "64"} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != want {
			t.Errorf("%s = %q, want %q", f, b, want)
		}
	}
}

// TestV1LimitHit: on cgroup v1 an OOM kill is memory.oom_control's
// oom_kill counter (or, on a kernel without it, memory.failcnt and a
// SIGKILLed job), the tasks limit pids.events max, throttling cpu.stat
// nr_throttled; a limit on v2 is still read from the cgroup v2.
func TestV1LimitHit(t *testing.T) {
	v1, v2 := t.TempDir(), t.TempDir()
	write := func(dir, f, s string) {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(v1, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
	write(v1, "memory.failcnt", "7\n")
	write(v1, "pids.events", "max 0\n")
	write(v2, "cpu.stat", "nr_periods 3\nnr_throttled 2\n")
	cgs := []v1Cgroup{{Ctrl: "memory", Dir: v1}, {Ctrl: "pids", Dir: v1}}
	l := Limits{MemoryMax: 1, TasksMax: 4, CPUMax: 1}
	if got := limitHit(v2, l, cgs, true); got != LimitCPU {
		t.Errorf("no oom_kill, no pids max, cpu throttled on v2: %q, want cpu", got)
	}
	write(v1, "pids.events", "max 2\n")
	if got := limitHit(v2, l, cgs, true); got != LimitTasks {
		t.Errorf("pids max on v1: %q, want tasks", got)
	}
	write(v1, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
	if got := limitHit(v2, l, cgs, false); got != LimitMemory {
		t.Errorf("oom_kill on v1: %q, want memory", got)
	}
	write(v1, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n") // before Linux 4.13
	if got := limitHit("", Limits{MemoryMax: 1}, cgs, true); got != LimitMemory {
		t.Errorf("failcnt and SIGKILL: %q, want memory", got)
	}
	if got := limitHit("", Limits{MemoryMax: 1}, cgs, false); got != "" {
		t.Errorf("failcnt without SIGKILL: %q, want none", got)
	}
}

// requireV1 returns the containment when it applies a limit on cgroup v1
// (a host with the hybrid layout, as CI's), and skips the test on a host
// whose cgroup v2 has every controller (nothing goes to v1 there).
func requireV1(t *testing.T) Containment {
	t.Helper()
	c := requireLimits(t, Limits{MemoryMax: 1, CPUMax: 1, TasksMax: 1})
	if len(c.v1) == 0 {
		t.Skipf("every controller is on cgroup v2 here: %s", c)
	}
	return c
}

// TestLimitsV1Placement: the job is in its own cgroups v1, with the
// limits written, from its start (the shell reads its own
// /proc/self/cgroup before anything else, with a builtin); the
// supervisor's threads are all back in their own cgroups while the job
// runs; the job's cgroups v1 are removed once it has ended.
func TestLimitsV1Placement(t *testing.T) {
	c := requireV1(t)
	l := Limits{MemoryMax: 64 << 20, CPUMax: 1, TasksMax: 64}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Start(ctx, testSelf(t), Spec{
		Path: "/bin/sh", Args: []string{"-c", `while read -r l; do echo "$l"; done </proc/self/cgroup; echo end; exec sleep 30`},
		KillGrace: time.Second, Deadline: BootNow() + int64(time.Minute), Contain: c, Name: "placement", Limits: l,
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Stderr().Close()
	var out strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(out.String(), "end\n") {
		n, err := p.Stdout().Read(buf)
		out.Write(buf[:n])
		if err != nil {
			t.Fatalf("job output %q: %v", out.String(), err)
		}
	}
	for _, h := range c.v1 { // what the start-up log, status and /healthz show
		if !strings.Contains(c.String(), "; limits ") || !strings.Contains(c.String(), h.ctrl+":v1") {
			t.Errorf("containment %q does not say that %s applies on cgroup v1", c, h.ctrl)
		}
	}
	if len(p.v1) != len(c.v1) {
		t.Errorf("job cgroups v1 %+v; want one per hierarchy of %s", p.v1, c)
	}
	for _, cg := range p.v1 {
		h := c.v1[0]
		for _, x := range c.v1 {
			if x.ctrl == cg.Ctrl {
				h = x
			}
		}
		rel := strings.TrimPrefix(cg.Dir, h.mount)
		if h.root != "/" {
			rel = h.root + rel
		}
		if !strings.Contains(out.String(), ":"+cg.Ctrl+":"+rel+"\n") && !strings.Contains(out.String(), ","+cg.Ctrl+":"+rel+"\n") {
			t.Errorf("the job did not start in %s (%s):\n%s", cg.Dir, cg.Ctrl, out.String())
		}
		if tasks, _ := os.ReadFile(filepath.Join(cg.Dir, "tasks")); strings.TrimSpace(string(tasks)) != strconv.Itoa(p.JobPID()) {
			t.Errorf("%s/tasks = %q; want only the job %d", cg.Dir, tasks, p.JobPID())
		}
		if f := v1Files[cg.Ctrl]; cg.Ctrl != "cpu" {
			want := map[string]string{"memory": "67108864", "pids": "64"}[cg.Ctrl]
			if b, _ := os.ReadFile(filepath.Join(cg.Dir, f)); strings.TrimSpace(string(b)) != want {
				t.Errorf("%s/%s = %q, want %s", cg.Dir, f, b, want)
			}
		}
	}
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(p.SupervisorPID()) + "/task/*/cgroup")
	for _, f := range tasks {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), jobsCgroup+"/placement") {
			t.Errorf("a supervisor thread is in the job's cgroups: %s:\n%s", f, b)
		}
	}
	_ = p.Terminate(0)
	_, _ = io.Copy(io.Discard, p.Stdout())
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, cg := range p.v1 {
		if _, err := os.Stat(cg.Dir); err == nil {
			t.Errorf("job cgroup %s left behind", cg.Dir)
		}
	}
}

// TestLimitsNotAppliedControl is the negative control of the limit
// tests: with the limits not written (NoLimitsEnv) the job allocating
// beyond its memory_max completes, and no limit is reported — the
// assertions of TestLimitsInCgroup can fail.
func TestLimitsNotAppliedControl(t *testing.T) {
	l := Limits{MemoryMax: 16 << 20}
	c := requireLimits(t, l)
	t.Setenv(NoLimitsEnv, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Start(ctx, testSelf(t), Spec{
		Path: "/bin/sh", Args: []string{"-c", hogJob}, KillGrace: time.Second,
		Deadline: BootNow() + int64(time.Minute), Contain: c, Name: "nolimits", Limits: l,
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
	if exit.Code != 0 || exit.Limit != "" {
		t.Errorf("unlimited hog: exit %+v; want 0 and no limit", exit)
	}
}
