//go:build linux

package supervisor

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
// child subreaper, see becomeSubreaper), and returns the CLOCK_MONOTONIC
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
	end := MonoNow() + int64(timeout)
	for {
		_ = unix.Kill(-pgid, unix.SIGKILL)
		live, zombies := groupMembers(pgid)
		if live == 0 {
			dead := MonoNow()
			for _, pid := range zombies {
				var ws unix.WaitStatus
				// ECHILD for a zombie that is not the daemon's child: its
				// own parent reaps it.
				_, _ = unix.Wait4(pid, &ws, unix.WNOHANG|unix.WALL, nil)
			}
			return dead
		}
		if MonoNow() > end {
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
		state, pg, ok := procStat(pid)
		if !ok || pg != pgid {
			continue
		}
		if state == 'Z' || state == 'X' {
			zombies = append(zombies, pid)
			continue
		}
		live++
	}
	return live, zombies
}

// procStat reads the state and process group of pid from /proc/pid/stat.
func procStat(pid int) (state byte, pgid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) S ppid pgrp ...": comm may hold spaces and parentheses,
	// so fields are counted after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pg, true
}
