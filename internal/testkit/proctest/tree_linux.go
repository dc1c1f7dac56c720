package proctest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// children returns the PIDs of pid's descendants (the postmaster's
// backends and auxiliary processes; each runs in a session of its own, so
// a process group does not reach them).
func children(pid int) []int {
	parent := map[int]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		p, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
		if pp := ppid(p); pp > 0 {
			parent[p] = pp
		}
	}
	var out []int
	want := map[int]bool{pid: true}
	for changed := true; changed; {
		changed = false
		for p, pp := range parent {
			if want[pp] && !want[p] {
				want[p] = true
				out = append(out, p)
				changed = true
			}
		}
	}
	return out
}

// ppid returns the parent of pid from /proc (0 if gone).
func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(string(f[1]))
	return p
}

// procState returns the state letter of pid from /proc (0 if gone).
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// waitGone waits until none of pids is alive (gone or a zombie).
func waitGone(pids []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := 0
		for _, p := range pids {
			if st := procState(p); st != 'Z' && st != 0 {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of the server's processes still alive %s after SIGKILL", left, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
