//go:build linux

package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A host in the hybrid cgroup layout mounts cgroup v2 with few
// controllers (often none but hugetlb) and binds memory, cpu and pids to
// cgroup v1 hierarchies of their own. A limit whose controller is not
// available on cgroup v2 is then applied on its v1 hierarchy, when that is
// writable: the job gets a cgroup of its own there too, below
// leasecron-jobs in the daemon's v1 cgroup. It only limits: containment
// (the kill, the confirmation) stays with the cgroup v2 or the process
// tree. The job is in its v1 cgroups before it runs an instruction of its
// own: the supervisor moves the one thread that forks it (v1 places
// threads, not only processes) into them for the fork, and back after; a
// forked child starts in its parent thread's cgroups.

// v1Hier is a cgroup v1 hierarchy that applies one controller's limits.
type v1Hier struct {
	ctrl  string // memory, cpu or pids
	mount string // where the hierarchy is mounted
	root  string // the hierarchy's cgroup mounted there ("/" for all of it)
	jobs  string // the jobs' parent cgroup: the daemon's, then leasecron-jobs
}

// dirOf returns the directory of the hierarchy's cgroup path p (a path as
// /proc/PID/cgroup shows it), "" when it is not below the mounted root.
func (h v1Hier) dirOf(p string) string {
	if h.root == "/" {
		return filepath.Join(h.mount, p)
	}
	if p != h.root && !strings.HasPrefix(p, h.root+"/") {
		return ""
	}
	return filepath.Join(h.mount, strings.TrimPrefix(p, h.root))
}

// v1Files are, per controller, the file its v1 limit is written to: a
// cgroup of that hierarchy without it cannot apply the limit (a kernel
// without CFS bandwidth control has no cpu.cfs_quota_us).
var v1Files = map[string]string{"memory": "memory.limit_in_bytes", "cpu": "cpu.cfs_quota_us", "pids": "pids.max"}

// findV1 locates the cgroup v1 hierarchy of controller ctrl and the
// process pid's cgroup ("self" for the caller) in it: the hierarchy and
// that cgroup's directory.
func findV1(ctrl, pid string) (v1Hier, string, error) {
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return v1Hier{}, "", fmt.Errorf("read /proc/%s/cgroup: %w", pid, err)
	}
	p := ""
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[0] != "0" && slices.Contains(strings.Split(f[1], ","), ctrl) {
			p = f[2]
		}
	}
	if p == "" || strings.HasSuffix(p, " (deleted)") {
		return v1Hier{}, "", fmt.Errorf("%s is bound to no cgroup v1 hierarchy", ctrl)
	}
	h, err := v1Mount(ctrl)
	if err != nil {
		return v1Hier{}, "", err
	}
	dir := h.dirOf(p)
	if dir == "" {
		return v1Hier{}, "", fmt.Errorf("the cgroup v1 %s:%s is outside the hierarchy's mount at %s", ctrl, p, h.mount)
	}
	return h, dir, nil
}

// v1Mount finds where the cgroup v1 hierarchy of ctrl is mounted
// (/proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... -
// cgroup SOURCE SUPEROPTS").
func v1Mount(ctrl string) (v1Hier, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return v1Hier{}, fmt.Errorf("read the mount table: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 5 || len(b) < 3 || b[0] != "cgroup" || !slices.Contains(strings.Split(b[2], ","), ctrl) {
			continue
		}
		if !slices.Contains(strings.Split(a[5], ","), "rw") {
			return v1Hier{}, fmt.Errorf("the cgroup v1 hierarchy of %s is mounted read-only at %s", ctrl, unescapeMount(a[4]))
		}
		return v1Hier{ctrl: ctrl, mount: unescapeMount(a[4]), root: unescapeMount(a[3])}, nil
	}
	if err := sc.Err(); err != nil {
		return v1Hier{}, fmt.Errorf("read the mount table: %w", err)
	}
	return v1Hier{}, fmt.Errorf("the cgroup v1 hierarchy of %s is not mounted", ctrl)
}

// detectV1 sets up, for each controller of want, its v1 hierarchy's
// leasecron-jobs cgroup in the daemon's own, checking that a job cgroup
// can be made there with the limit's file; it returns those set up, with
// why the others cannot be.
func detectV1(want []string) ([]v1Hier, []string) {
	var got []v1Hier
	var why []string
	for _, c := range want {
		h, err := setupV1(c)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		got = append(got, h)
	}
	return got, why
}

// setupV1 creates (or reuses) the jobs' parent cgroup in ctrl's v1
// hierarchy, and checks it with a probe job cgroup.
func setupV1(ctrl string) (v1Hier, error) {
	h, base, err := findV1(ctrl, "self")
	if err != nil {
		return v1Hier{}, err
	}
	h.jobs = filepath.Join(base, jobsCgroup)
	if err := os.Mkdir(h.jobs, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return v1Hier{}, fmt.Errorf("%s on cgroup v1: create cgroup %s: %w", ctrl, h.jobs, err)
	}
	cleanStaleV1(h.jobs)
	probe, err := newJobCgroup(h.jobs, "probe")
	if err != nil {
		return v1Hier{}, fmt.Errorf("%s on cgroup v1: %w", ctrl, err)
	}
	defer removeCgroup(probe)
	if _, err := os.Stat(filepath.Join(probe, v1Files[ctrl])); err != nil {
		return v1Hier{}, fmt.Errorf("%s on cgroup v1: the limit cannot be set: %w", ctrl, err)
	}
	return h, nil
}

// cleanStaleV1 removes the job cgroups in dir left by daemons that are
// gone (the pid in the name no longer exists). Processes still in one
// keep it (they are the containment's to kill).
func cleanStaleV1(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		parts := strings.Split(e.Name(), "-") // NAME-PID-RANDOM
		if !e.IsDir() || len(parts) < 3 {
			continue
		}
		if pid, err := strconv.Atoi(parts[len(parts)-2]); err == nil && pid > 0 && unix.Kill(pid, 0) == unix.ESRCH {
			_ = unix.Rmdir(filepath.Join(dir, e.Name()))
		}
	}
}

// v1Cgroup is a job's cgroup in a v1 hierarchy.
type v1Cgroup struct {
	Ctrl string `json:"ctrl"`
	Dir  string `json:"dir"`
	// Home is the supervisor's own cgroup in the hierarchy, where the
	// thread that forks the job returns to.
	Home string `json:"home"`
}

// newV1Cgroups creates the job's cgroup named name in each hierarchy of
// hs, writes l's limit of that controller, and finds the supervisor
// supPID's cgroup there. On error it removes what it created.
func newV1Cgroups(hs []v1Hier, name string, supPID int, l Limits, apply bool) ([]v1Cgroup, error) {
	var cgs []v1Cgroup
	for _, h := range hs {
		dir := filepath.Join(h.jobs, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			removeV1(cgs)
			return nil, fmt.Errorf("create job cgroup (%s, cgroup v1): %w", h.ctrl, err)
		}
		cgs = append(cgs, v1Cgroup{Ctrl: h.ctrl, Dir: dir})
		_, home, err := findV1(h.ctrl, strconv.Itoa(supPID))
		if err == nil && apply {
			err = applyV1(dir, h.ctrl, l)
		}
		if err != nil {
			removeV1(cgs)
			return nil, err
		}
		cgs[len(cgs)-1].Home = home
	}
	return cgs, nil
}

// applyV1 writes l's limit of controller ctrl into the v1 cgroup dir.
func applyV1(dir, ctrl string, l Limits) error {
	var files [][2]string
	switch ctrl {
	case "memory":
		v := strconv.FormatInt(l.MemoryMax, 10)
		files = append(files, [2]string{"memory.limit_in_bytes", v})
		if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
			// Memory and swap together: swapping does not dodge the limit.
			files = append(files, [2]string{"memory.memsw.limit_in_bytes", v})
		}
	case "cpu":
		quota := max(int64(l.CPUMax*cpuPeriod+0.5), 1000)
		files = append(files, [2]string{"cpu.cfs_period_us", strconv.Itoa(cpuPeriod)},
			[2]string{"cpu.cfs_quota_us", strconv.FormatInt(quota, 10)})
	case "pids":
		files = append(files, [2]string{"pids.max", strconv.Itoa(l.TasksMax)})
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0); err != nil {
			return fmt.Errorf("set %s %s in job cgroup %s (cgroup v1): %w", f[0], f[1], dir, err)
		}
	}
	return nil
}

// removeV1 removes the job's v1 cgroups; one that still holds a process
// stays (cleaned up at the daemon's next start).
func removeV1(cgs []v1Cgroup) {
	for _, cg := range cgs {
		removeCgroup(cg.Dir)
	}
}

// v1LimitHit is limitHit for the limit of controller ctrl applied in the
// v1 cgroup dir; killed says the job died of SIGKILL.
func v1LimitHit(dir, ctrl string, killed bool) bool {
	switch ctrl {
	case "memory":
		oc := []byte(readFile(filepath.Join(dir, "memory.oom_control")))
		if v := eventValue(oc, "oom_kill"); v != "" { // Linux 4.13
			return v != "0"
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(readFile(filepath.Join(dir, "memory.failcnt"))), 10, 64)
		return killed && n > 0
	case "pids":
		return counter(filepath.Join(dir, "pids.events"), "max") > 0
	case "cpu":
		return counter(filepath.Join(dir, "cpu.stat"), "nr_throttled") > 0
	}
	return false
}

// enterV1 moves the calling thread (locked to its goroutine) into the
// job's v1 cgroups, so that the job it forks starts there.
func enterV1(cgs []v1Cgroup) error {
	tid := []byte(strconv.Itoa(unix.Gettid()))
	for _, cg := range cgs {
		if err := os.WriteFile(filepath.Join(cg.Dir, "tasks"), tid, 0); err != nil {
			return fmt.Errorf("enter job cgroup %s (cgroup v1): %w", cg.Dir, err)
		}
	}
	return nil
}

// leaveV1 moves the calling thread back to the supervisor's own v1
// cgroups.
func leaveV1(cgs []v1Cgroup) error {
	tid := []byte(strconv.Itoa(unix.Gettid()))
	var errs []error
	for _, cg := range cgs {
		if err := os.WriteFile(filepath.Join(cg.Home, "tasks"), tid, 0); err != nil {
			errs = append(errs, fmt.Errorf("return to cgroup %s (cgroup v1): %w", cg.Home, err))
		}
	}
	return errors.Join(errs...)
}
