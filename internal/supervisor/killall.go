//go:build linux

package supervisor

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// killLost is the daemon's kill of everything a job whose supervisor died
// without a report started, by the daemon's containment: the job's cgroup,
// or its process group plus every process re-parented to the daemon (a
// child subreaper) since the supervisor started, and their descendants. It
// returns the CLOCK_BOOTTIME instant at which nothing of the job was left
// alive, or 0 if that could not be confirmed within timeout: the caller
// must then not hand the job's lease on.
func (p *Process) killLost(pgid int, timeout time.Duration) int64 {
	switch p.contain.mode {
	case containCgroup:
		if p.cgroup == "" {
			return 0
		}
		return killCgroup(p.cgroup, timeout)
	case containGroup:
		return killLostGroup(pgid, timeout)
	}
	return killLostTree(pgid, p.supStart, p.contain.mode != containTreeUnconfirmed, timeout)
}

// killCgroup freezes the cgroup at path (so that nothing in it forks while
// it is listed), lists its processes, writes cgroup.kill (SIGKILL to every
// process in it and its descendants, atomically for new forks), waits until
// cgroup.events says "populated 0", and reaps the listed processes that
// were re-parented to the caller. It returns when the cgroup was seen
// empty, or 0 if it was not within timeout.
func killCgroup(path string, timeout time.Duration) int64 {
	end := BootNow() + int64(timeout)
	_ = os.WriteFile(filepath.Join(path, "cgroup.freeze"), []byte("1"), 0)
	// A process in uninterruptible sleep delays the freeze; SIGKILL goes
	// to frozen processes too, so the list is taken after a bounded wait.
	for f := BootNow() + int64(time.Second); BootNow() < f && !cgroupFrozen(path); {
		time.Sleep(2 * time.Millisecond)
	}
	pids := cgroupProcs(path)
	for {
		if err := os.WriteFile(filepath.Join(path, "cgroup.kill"), []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0
		}
		populated, err := cgroupPopulated(path)
		if err == nil && !populated {
			dead := BootNow()
			reapOwn(pids)
			return dead
		}
		if BootNow() > end {
			return 0
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// cgroupPopulated reports whether the cgroup at path or one below it has a
// live process ("populated 1" in cgroup.events). A removed cgroup is
// empty.
func cgroupPopulated(path string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(path, "cgroup.events"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return eventValue(b, "populated") != "0", nil
}

// cgroupFrozen reports whether cgroup.events says "frozen 1".
func cgroupFrozen(path string) bool {
	b, err := os.ReadFile(filepath.Join(path, "cgroup.events"))
	return err == nil && eventValue(b, "frozen") == "1"
}

// eventValue returns the value of key in a cgroup.events file.
func eventValue(b []byte, key string) string {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// cgroupProcs lists the pids in cgroup.procs at path.
func cgroupProcs(path string) []int {
	b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// removeCgroup removes the (empty) job cgroup at path, with the cgroups a
// job created below it (a job that runs leasecron itself creates its own
// leasecron-jobs there); a populated one cannot be removed and is left.
func removeCgroup(path string) {
	if entries, err := os.ReadDir(path); err == nil {
		for _, e := range entries {
			if e.IsDir() {
				removeCgroup(filepath.Join(path, e.Name()))
			}
		}
	}
	for i := 0; i < 50; i++ {
		err := unix.Rmdir(path)
		if err == nil || errors.Is(err, unix.ENOENT) || !errors.Is(err, unix.EBUSY) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reapOwn reaps those of pids that are zombie children of the caller. A
// pid that is no zombie child is left alone (wait4 with WNOHANG on a live
// child returns 0, on a stranger ECHILD).
func reapOwn(pids []int) {
	self := os.Getpid()
	for _, pid := range pids {
		if st, ok := readProcStat(pid); ok && st.ppid == self && (st.state == 'Z' || st.state == 'X') {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG|unix.WALL, nil)
		}
	}
}

// killLostTree is the process-tree containment's kill after a supervisor
// (started at supStart, in clock ticks since boot) was lost: it SIGKILLs
// the job's process group pgid and, with orphans, every process the
// daemon adopted since then that is not a supervisor, with all their
// descendants, until none is alive. It returns when none was, or 0 if some
// still was after timeout. Without orphans (a test of the lapse) the
// adopted processes are counted but not killed.
func killLostTree(pgid int, supStart uint64, orphans bool, timeout time.Duration) int64 {
	end := BootNow() + int64(timeout)
	self := os.Getpid()
	for {
		_ = unix.Kill(-pgid, unix.SIGKILL)
		procs := allProcs()
		adopted := adoptedTrees(procs, self, supStart)
		live := 0
		for pid, st := range procs {
			dead := st.state == 'Z' || st.state == 'X'
			if dead || (st.pgid != pgid && !adopted[pid]) {
				continue
			}
			live++
			if orphans && adopted[pid] {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		if live == 0 {
			now := BootNow()
			var own []int
			for pid, st := range procs {
				if st.pgid == pgid || adopted[pid] {
					own = append(own, pid)
				}
			}
			reapOwn(own)
			return now
		}
		if BootNow() > end {
			return 0
		}
		time.Sleep(10 * time.Millisecond) // each round reads all of /proc
	}
}

// adoptedTrees returns the children of the daemon self that are not
// supervisors and started at or after supStart — processes a supervisor
// left behind, re-parented to the daemon — and all their descendants.
func adoptedTrees(procs map[int]procInfo, self int, supStart uint64) map[int]bool {
	kids := make(map[int][]int)
	for pid, st := range procs {
		kids[st.ppid] = append(kids[st.ppid], pid)
	}
	out := make(map[int]bool)
	var walk func(int)
	walk = func(pid int) {
		if out[pid] {
			return
		}
		out[pid] = true
		for _, k := range kids[pid] {
			walk(k)
		}
	}
	for _, pid := range kids[self] {
		st := procs[pid]
		if st.start < supStart || isSupervisor(pid) {
			continue
		}
		walk(pid)
	}
	return out
}

// isSupervisor reports whether pid runs as a supervisor ("SELF __supervise").
func isSupervisor(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return false
	}
	args := bytes.Split(b, []byte{0})
	return len(args) > 1 && string(args[1]) == Arg
}

// procInfo is what the kills read from /proc/PID/stat.
type procInfo struct {
	state      byte
	ppid, pgid int
	start      uint64 // clock ticks after boot
}

// allProcs reads every process's stat.
func allProcs() map[int]procInfo {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	_ = d.Close()
	out := make(map[int]procInfo, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		if st, ok := readProcStat(pid); ok {
			out[pid] = st
		}
	}
	return out
}

// readProcStat reads state, parent, process group and start time of pid
// from /proc/pid/stat.
func readProcStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procInfo{}, false
	}
	// "pid (comm) S ppid pgrp ...": comm may hold spaces and parentheses,
	// so fields are counted after the last ')'. Field 22 (starttime) is
	// f[19].
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return procInfo{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pg, err2 := strconv.Atoi(string(f[2]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procInfo{}, false
	}
	return procInfo{state: f[0][0], ppid: ppid, pgid: pg, start: start}, true
}
