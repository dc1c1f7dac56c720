package mysqltest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// Leftover returns the PIDs of server processes (mariadbd, mysqld) that
// this test process started and that still run (Linux /proc; nil
// elsewhere). A TestMain calls it after m.Run: every cleanup must have
// killed its servers.
func Leftover() []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || closing < open {
			continue
		}
		fields := bytes.Fields(b[closing+1:])
		name := string(b[open+1 : closing])
		if len(fields) < 2 || (name != "mariadbd" && name != "mysqld") || string(fields[0]) == "Z" {
			continue
		}
		if ppid, _ := strconv.Atoi(string(fields[1])); ppid == os.Getpid() {
			pid, _ := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
			pids = append(pids, pid)
		}
	}
	return pids
}
