//go:build linux

package supervisor

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// NoLostGroupKillEnv, set to "1" in the daemon's environment, turns off the
// daemon's own kill of a job's process group when the job's supervisor
// dies without an exit report: the job's orphaned children then keep
// running. It exists only so tests can show that they detect those
// survivors (a negative control); never set it in production.
const NoLostGroupKillEnv = "LEASECRON_TEST_NO_LOST_GROUP_KILL"

// becomeSubreaper makes the calling process (the daemon) a child
// subreaper: when a supervisor dies, the job processes it leaves behind are
// re-parented to the daemon instead of to init. Their zombies then stay
// until the daemon reaps them, so the job's process group id cannot be
// reused by an unrelated process while killLostGroup works on it.
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("supervisor: become child subreaper: %w", err)
	}
	return nil
}

// killLostGroup is the daemon's backstop when a supervisor died without
// reporting: it SIGKILLs the job's process group pgid until no live member
// is left, then reaps the members that were re-parented to the daemon (a
// child subreaper, see becomeSubreaper), and returns the CLOCK_BOOTTIME
// instant at which no live member was seen; 0 if some member was still
// alive after timeout.
//
// The group id is safe to signal: the job leader (pid pgid) dies with its
// supervisor (parent-death signal) and is re-parented to the daemon, whose
// unreaped zombie keeps the id from being reused; if the supervisor had
// reaped the leader already (it exited first), any member left, alive or
// an unreaped zombie of the daemon, keeps it. Members are reaped only
// after the last kill. Only when the supervisor had reaped every member
// before it died is the id free, and a kill could then reach another group
// only if the kernel's pid counter wrapped around (pid_max) and the id was
// taken again in the milliseconds between.
func killLostGroup(pgid int, timeout time.Duration) int64 {
	end := BootNow() + int64(timeout)
	for {
		_ = unix.Kill(-pgid, unix.SIGKILL)
		live, zombies := groupMembers(pgid)
		if live == 0 {
			dead := BootNow()
			for _, pid := range zombies {
				var ws unix.WaitStatus
				// ECHILD for a zombie that is not the daemon's child: its
				// own parent reaps it.
				_, _ = unix.Wait4(pid, &ws, unix.WNOHANG|unix.WALL, nil)
			}
			return dead
		}
		if BootNow() > end {
			return 0
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// groupMembers counts the live processes of process group pgid, from
// /proc, and lists its zombies.
func groupMembers(pgid int) (live int, zombies []int) {
	d, err := os.Open("/proc")
	if err != nil {
		return 0, nil
	}
	names, _ := d.Readdirnames(-1)
	_ = d.Close()
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		st, ok := readProcStat(pid)
		if !ok || st.pgid != pgid {
			continue
		}
		if st.state == 'Z' || st.state == 'X' {
			zombies = append(zombies, pid)
			continue
		}
		live++
	}
	return live, zombies
}
