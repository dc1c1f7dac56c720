//go:build linux

package supervisor

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startOrphaningJob starts a job whose two children keep the
// job's stdout open — and returns it with the children's pids.
func startOrphaningJob(t *testing.T) (*Process, []int) {
	t.Helper()
	p, out := startShell(t, "sleep 300 & echo $!; sleep 301 & echo $!; wait", time.Second, BootNow()+int64(time.Minute))
	kids := []int{atoi(t, out.next(t, 10*time.Second)), atoi(t, out.next(t, 10*time.Second))}
	t.Cleanup(func() {
		for _, pid := range kids {
			if !isDead(pid) {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			waitDead(t, pid, 10*time.Second)
		}
	})
	return p, kids
}

// TestSupervisorKilledGroupDeadAtWait: when the supervisor is SIGKILLed,
// Wait returns ErrSupervisorLost only once no live process is left in the
// job's group — also the children that hold its stdout open, which the
// parent-death signal does not reach — and has reaped the members that
// were re-parented to the caller (a child subreaper).
func TestSupervisorKilledGroupDeadAtWait(t *testing.T) {
	p, kids := startOrphaningJob(t)
	pgid := p.JobPID()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	exit, err := waitExit(t, p, 30*time.Second)
	if !errors.Is(err, ErrSupervisorLost) || exit.Reason != ReasonSupervisorLost {
		t.Fatalf("Wait = %+v, %v; want ErrSupervisorLost", exit, err)
	}
	if live, zombies := groupMembers(pgid); live > 0 || len(zombies) > 0 {
		t.Errorf("Wait returned with %d live processes and zombies %v in the job's group", live, zombies)
	}
	for _, pid := range append(kids, pgid) {
		if !isDead(pid) {
			t.Errorf("process %d of the job is alive after Wait", pid)
		}
	}
	if exit.DeadTime == 0 || exit.DeadTime > BootNow() {
		t.Errorf("DeadTime = %d, want when the group was seen dead", exit.DeadTime)
	}
}

// TestNegativeControlNoLostGroupKill: with the daemon-side group kill
// switched off (NoLostGroupKillEnv), the same check finds the job's
// children alive after Wait.
func TestNegativeControlNoLostGroupKill(t *testing.T) {
	t.Setenv(NoLostGroupKillEnv, "1")
	p, kids := startOrphaningJob(t)
	pgid := p.JobPID()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := waitExit(t, p, 30*time.Second); !errors.Is(err, ErrSupervisorLost) {
		t.Fatalf("Wait: %v; want ErrSupervisorLost", err)
	}
	time.Sleep(200 * time.Millisecond)
	live, _ := groupMembers(pgid)
	if live != len(kids) {
		t.Errorf("%d live processes in the job's group without the kill, want the %d children: the check cannot fail", live, len(kids))
	}
}
