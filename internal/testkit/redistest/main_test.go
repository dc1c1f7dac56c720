package redistest_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestMain fails the run if any redis-server started by the tests outlives
// them: every cleanup must have killed and reaped its processes.
func TestMain(m *testing.M) {
	code := m.Run()
	if left := childServers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "redistest: redis-server processes left running after the tests: %v\n", left)
		code = 1
	}
	os.Exit(code)
}

// childServers returns the PIDs of this process's redis-server children
// (Linux /proc; nil elsewhere).
func childServers() []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || closing < open {
			continue
		}
		fields := bytes.Fields(b[closing+1:])
		if len(fields) < 2 || string(b[open+1:closing]) != "redis-server" {
			continue
		}
		if ppid, _ := strconv.Atoi(string(fields[1])); ppid == os.Getpid() {
			pid, _ := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
			pids = append(pids, pid)
		}
	}
	return pids
}
