//go:build linux

package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// requireCgroup returns the cgroup containment, failing the test when it
// cannot be had in CI (which runs as root on a host with cgroup v2) and
// skipping it elsewhere.
func requireCgroup(t *testing.T) Containment {
	t.Helper()
	c := DetectContainment()
	if !c.Cgroup() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no cgroup containment in CI: %s", c.Reason())
		}
		t.Skipf("no cgroup containment: %s", c.Reason())
	}
	return c
}

// escapeJob is a job whose children leave its process group: one with
// setsid, one with setsid from a subshell that exits at once (a double
// fork: it is re-parented to the supervisor), and one that stays.
const escapeJob = `setsid sleep 300 & echo $!; (setsid sleep 301 & echo $!); sleep 302 & echo $!; wait`

// startEscapingJob starts escapeJob under c and returns it with the pids
// of its three children, which the test kills if they outlive it.
func startEscapingJob(t *testing.T, c Containment) (*Process, []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Start(ctx, testSelf(t), Spec{
		Path: "/bin/sh", Args: []string{"-c", escapeJob},
		KillGrace: time.Second, Deadline: BootNow() + int64(time.Minute),
		Contain: c, Name: "escape",
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	out := collect(p)
	var kids []int
	for range 3 {
		kids = append(kids, atoi(t, out.next(t, 10*time.Second)))
	}
	t.Cleanup(func() {
		_ = p.Close()
		_, _ = p.Wait()
		for _, pid := range kids {
			if !isDead(pid) {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			waitDead(t, pid, 10*time.Second)
		}
	})
	// The two run setsid before they exec sleep: wait for them to have.
	for _, pid := range kids[:2] {
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			st, ok := readProcStat(pid)
			if ok && st.pgid != p.JobPID() {
				break
			}
			if !ok || time.Now().After(end) {
				t.Fatalf("child %d did not leave the job's process group %d (%+v, %v)", pid, p.JobPID(), st, ok)
			}
		}
	}
	return p, kids
}

// killSupervisor SIGKILLs p's supervisor and waits for Wait.
func killSupervisor(t *testing.T, p *Process) (Exit, error) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	return waitExit(t, p, 30*time.Second)
}

// TestCgroupKillsEscapees: with the cgroup containment the job and all it
// starts are in the job's own cgroup; when its supervisor is SIGKILLed,
// Wait returns only when the cgroup is empty — also the children that left
// the job's process group with setsid and a double fork — with DeadTime
// set, and the cgroup is removed.
func TestCgroupKillsEscapees(t *testing.T) {
	c := requireCgroup(t)
	p, kids := startEscapingJob(t, c)
	if p.cgroup == "" || !strings.HasPrefix(p.cgroup, c.dir+"/escape-") {
		t.Fatalf("job cgroup %q, want one below %s", p.cgroup, c.dir)
	}
	for _, pid := range append([]int{p.JobPID()}, kids...) {
		if got := procCgroup(pid); !strings.HasSuffix(p.cgroup, got) || got == "/" {
			t.Errorf("process %d is in cgroup %q, want the job's %s", pid, got, p.cgroup)
		}
	}
	exit, err := killSupervisor(t, p)
	if !errors.Is(err, ErrSupervisorLost) {
		t.Fatalf("Wait = %+v, %v; want ErrSupervisorLost", exit, err)
	}
	for _, pid := range kids {
		if !isDead(pid) {
			t.Errorf("child %d of the job is alive after Wait", pid)
		}
	}
	if exit.DeadTime == 0 {
		t.Errorf("DeadTime = 0: the kill was not confirmed")
	}
	if _, err := os.Stat(p.cgroup); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("job cgroup %s left behind: %v", p.cgroup, err)
	}
}

// TestCgroupJobExitKillsEscapees: a job that exits on its own leaves no
// process in its cgroup once Wait has returned, and the cgroup is gone.
func TestCgroupJobExitKillsEscapees(t *testing.T) {
	c := requireCgroup(t)
	p, kids := startEscapingJob(t, c)
	_ = unix.Kill(p.JobPID(), unix.SIGKILL) // the leader ends; its children stay
	exit, err := waitExit(t, p, 30*time.Second)
	if err != nil || exit.DeadTime == 0 {
		t.Fatalf("Wait = %+v, %v; want a confirmed exit", exit, err)
	}
	for _, pid := range kids {
		if !isDead(pid) {
			t.Errorf("child %d of the job is alive after Wait", pid)
		}
	}
	if _, err := os.Stat(p.cgroup); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("job cgroup %s left behind: %v", p.cgroup, err)
	}
}

// TestCgroupRemovedWithNested: a job that creates cgroups below its own (a
// job running leasecron itself) does not leave its cgroup behind.
func TestCgroupRemovedWithNested(t *testing.T) {
	c := requireCgroup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Start(ctx, testSelf(t), Spec{Path: "/bin/sh", Args: []string{"-c", "read line"},
		Deadline: BootNow() + int64(time.Minute), Contain: c, Name: "nested"})
	if err != nil {
		t.Fatal(err)
	}
	out := collect(p)
	if err := os.MkdirAll(filepath.Join(p.cgroup, jobsCgroup, "inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = p.Close() // the job is killed
	if _, err := waitExit(t, p, 30*time.Second); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	out.rest(t, 10*time.Second)
	if _, err := os.Stat(p.cgroup); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("job cgroup %s with a nested cgroup left behind: %v", p.cgroup, err)
	}
}

// TestProcessTreeKillsEscapees: the process-tree fallback (as without
// cgroups) kills the escaped children too when the supervisor is lost:
// they were re-parented to the caller, a child subreaper.
func TestProcessTreeKillsEscapees(t *testing.T) {
	p, kids := startEscapingJob(t, Containment{mode: containTree, why: "test"})
	exit, err := killSupervisor(t, p)
	if !errors.Is(err, ErrSupervisorLost) || exit.DeadTime == 0 {
		t.Fatalf("Wait = %+v, %v; want ErrSupervisorLost with DeadTime", exit, err)
	}
	for _, pid := range kids {
		if !isDead(pid) {
			t.Errorf("child %d of the job is alive after Wait", pid)
		}
	}
}

// TestProcessTreeUnconfirmedIsNotDead: when the fallback cannot kill an
// escaped child (here: its kill of adopted processes is off), Wait says so
// with DeadTime 0 — the scheduler then leaves the lease to run out — and
// does not take the group's death for the job's.
func TestProcessTreeUnconfirmedIsNotDead(t *testing.T) {
	p, kids := startEscapingJob(t, Containment{mode: containTreeUnconfirmed, why: "test"})
	exit, err := killSupervisor(t, p)
	if !errors.Is(err, ErrSupervisorLost) {
		t.Fatalf("Wait = %+v, %v; want ErrSupervisorLost", exit, err)
	}
	if exit.DeadTime != 0 {
		t.Errorf("DeadTime = %d with escaped children alive: a confirmation that is not one", exit.DeadTime)
	}
	if isDead(kids[0]) {
		t.Errorf("the escaped child %d is dead: the check cannot fail", kids[0])
	}
}

// TestNegativeControlGroupKillOnly: with the process-group kill alone (the
// old behaviour), Wait reports the job dead while its escaped children
// live: the checks above can fail.
func TestNegativeControlGroupKillOnly(t *testing.T) {
	p, kids := startEscapingJob(t, Containment{mode: containGroup, why: "test"})
	exit, err := killSupervisor(t, p)
	if !errors.Is(err, ErrSupervisorLost) || exit.DeadTime == 0 {
		t.Fatalf("Wait = %+v, %v; want ErrSupervisorLost with DeadTime", exit, err)
	}
	alive := 0
	for _, pid := range kids[:2] {
		if !isDead(pid) {
			alive++
		}
	}
	if alive != 2 {
		t.Errorf("%d of the 2 escaped children alive after the group kill, want 2: the negative control shows nothing", alive)
	}
}

// TestDetectContainmentEnv: ContainmentEnv forces the fallback, and the
// containment names itself.
func TestDetectContainmentEnv(t *testing.T) {
	t.Setenv(ContainmentEnv, "process-tree")
	c := DetectContainment()
	if c.Cgroup() || c.String() != "process tree" || c.Reason() == "" {
		t.Errorf("forced fallback: %q (%q)", c.String(), c.Reason())
	}
	if s := (Containment{mode: containCgroup, dir: "/sys/fs/cgroup/x"}).String(); s != "cgroup /sys/fs/cgroup/x" {
		t.Errorf("String = %q", s)
	}
}

// procCgroup returns pid's cgroup v2 path ("" if unknown).
func procCgroup(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return ""
}

// TestStaleJobCgroupKilled: a job cgroup left by a daemon that is gone
// (daemon and supervisor both killed) still holding a job is killed and
// removed when the next daemon detects its containment; one of a live
// daemon is left alone.
func TestStaleJobCgroupKilled(t *testing.T) {
	c := requireCgroup(t)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(c.dir, fmt.Sprintf("old-%d-0000", gone.Process.Pid))
	live := filepath.Join(c.dir, fmt.Sprintf("old-%d-0000", os.Getpid()))
	var sleeps []*exec.Cmd
	for _, dir := range []string{stale, live} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cg, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sleep", "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
		err = cmd.Start()
		_ = cg.Close()
		if err != nil {
			t.Fatal(err)
		}
		sleeps = append(sleeps, cmd)
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			removeCgroup(dir)
		})
	}
	DetectContainment()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale job cgroup %s not removed: %v", stale, err)
	}
	if err := sleeps[0].Wait(); err == nil {
		t.Errorf("the stale cgroup's process exited by itself")
	}
	if populated, err := cgroupPopulated(live); err != nil || !populated {
		t.Errorf("a live daemon's job cgroup was emptied: populated %v, %v", populated, err)
	}
}
