//go:build linux

package supervisor

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// jobsCgroup is the name of the cgroup, under the daemon's own, that holds
// one cgroup per running job.
const jobsCgroup = "leasecron-jobs"

// ContainmentEnv, set in the daemon's environment, overrides what
// [DetectContainment] finds. It exists only for tests that must run the
// fallback on a host where cgroups work, or show what the old process-group
// kill misses (a negative control); never set it in production. Values:
// "process-tree" (the fallback), "process-tree-unconfirmed" (the fallback
// without its kill of the daemon's orphans, so the kill is never
// confirmed) and "group" (only the job's process group is killed when a
// supervisor is lost, and that is taken as confirmation).
const ContainmentEnv = "LEASECRON_TEST_CONTAINMENT"

// containMode is how a job's processes are found and killed.
type containMode int

const (
	// containTree: the supervisor (a child subreaper) kills the job's
	// process group and every descendant; when the supervisor is lost,
	// the daemon (a child subreaper too) kills the group and every
	// non-supervisor descendant of its own.
	containTree containMode = iota
	// containCgroup: every job runs in a cgroup v2 of its own, killed
	// with cgroup.kill and confirmed empty through cgroup.events.
	containCgroup
	// containTreeUnconfirmed is containTree without the daemon's kill of
	// its orphans: a lost supervisor's escaped processes survive and the
	// kill is not confirmed (a test of the lapse that follows).
	containTreeUnconfirmed
	// containGroup is the process-group kill alone, taken as proof: a
	// negative control for tests.
	containGroup
)

// Containment is how the processes of a daemon's jobs are kept together
// so that all of them can be killed, and their death confirmed, before a
// job's lease is handed on: a cgroup v2 per job when the daemon may create
// them, else the process tree below the daemon (see the package doc). Get
// it with [DetectContainment] once, at start-up, and put it in every
// [Spec]. The zero value is the process-tree containment.
type Containment struct {
	mode containMode
	dir  string // containCgroup: the cgroup that holds the jobs' cgroups
	why  string // the process tree: why cgroups are not used
	// controllers are those of memory, cpu and pids enabled for the jobs'
	// cgroups; noControllers says why the others are not.
	controllers   []string
	noControllers string
}

// String says which containment is in force: "cgroup PATH" or "process
// tree".
func (c Containment) String() string {
	if c.mode == containCgroup {
		return "cgroup " + c.dir
	}
	return "process tree"
}

// Reason says why the process-tree containment is used ("" for cgroups).
func (c Containment) Reason() string { return c.why }

// Cgroup reports whether jobs run in cgroups of their own.
func (c Containment) Cgroup() bool { return c.mode == containCgroup }

// DetectContainment finds the cgroup v2 hierarchy in the mount table and
// the calling process's cgroup in it (/proc/self/cgroup, line "0::PATH"),
// and creates the cgroup leasecron-jobs below it for the jobs' cgroups.
// When that cannot be done — no cgroup v2 mounted (cgroup v1 only), not
// allowed to write there (not root and no delegation: see the systemd
// unit's Delegate=yes), controllers enabled below the daemon's cgroup (a
// cgroup with processes could not then have job cgroups), or a kernel
// without cgroup.kill (before 5.14) — it returns the process-tree
// containment with the reason.
func DetectContainment() Containment {
	switch os.Getenv(ContainmentEnv) {
	case "process-tree":
		return Containment{mode: containTree, why: ContainmentEnv + " is set"}
	case "process-tree-unconfirmed":
		return Containment{mode: containTreeUnconfirmed, why: ContainmentEnv + " is set"}
	case "group":
		return Containment{mode: containGroup, why: ContainmentEnv + " is set"}
	}
	dir, base, err := jobsCgroupDir()
	if err != nil {
		return Containment{mode: containTree, why: err.Error()}
	}
	c := Containment{mode: containCgroup, dir: dir}
	c.controllers, c.noControllers = enableControllers(base, dir, isRootCgroup(base))
	return c
}

// isRootCgroup reports whether path is the root of the cgroup v2
// hierarchy (it has no cgroup.events file).
func isRootCgroup(path string) bool {
	_, err := os.Stat(filepath.Join(path, "cgroup.events"))
	return errors.Is(err, os.ErrNotExist)
}

// jobsCgroupDir creates (or reuses) the jobs' parent cgroup and checks
// that job cgroups can be created and killed in it. It returns it and the
// daemon's cgroup, its parent.
func jobsCgroupDir() (dir, base string, err error) {
	mount, err := cgroup2Mount()
	if err != nil {
		return "", "", err
	}
	own, err := ownCgroup()
	if err != nil {
		return "", "", err
	}
	if filepath.Base(own) == daemonCgroup {
		// Moved there by a DetectContainment of this process (see
		// enableControllers): its parent is the daemon's cgroup.
		base = filepath.Join(mount, filepath.Dir(own))
	} else {
		base = filepath.Join(mount, own)
	}
	if own != "/" && filepath.Base(own) != daemonCgroup {
		// "No internal processes": a cgroup with controllers enabled for
		// its children cannot keep processes (the daemon) itself.
		b, err := os.ReadFile(filepath.Join(base, "cgroup.subtree_control"))
		if err != nil {
			return "", "", fmt.Errorf("read the daemon's cgroup %s: %w", base, err)
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			return "", "", fmt.Errorf("the daemon's cgroup %s has controllers enabled for its children (%s)", base, s)
		}
	}
	dir, err = jobsCgroupIn(base)
	return dir, base, err
}

// jobsCgroupIn creates (or reuses) the jobs' parent cgroup in base, the
// daemon's cgroup, and checks that job cgroups can be created and killed
// in it.
func jobsCgroupIn(base string) (string, error) {
	dir := filepath.Join(base, jobsCgroup)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	cleanStale(dir)
	probe, err := newJobCgroup(dir, "probe")
	if err != nil {
		return "", err
	}
	defer removeCgroup(probe)
	f, err := os.OpenFile(filepath.Join(probe, "cgroup.kill"), os.O_WRONLY, 0)
	if err != nil {
		return "", fmt.Errorf("cgroup.kill in %s (needs Linux 5.14): %w", probe, err)
	}
	_ = f.Close()
	if err := probeCloneInto(probe); err != nil {
		return "", err
	}
	return dir, nil
}

// probeCloneInto forks a process into the cgroup at path the way the
// supervisor starts a job (clone3 with CLONE_INTO_CGROUP, which a seccomp
// filter may refuse). The process is to exec a program that does not
// exist, so nothing runs: an ENOENT from the exec means the clone worked.
func probeCloneInto(path string) error {
	cg, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open cgroup %s: %w", path, err)
	}
	defer cg.Close()
	// Nothing can be created in a cgroup's directory.
	cmd := exec.Command(filepath.Join(path, "no-such-program"))
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	err = cmd.Start()
	if err == nil {
		_ = cmd.Wait()
		return nil
	}
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("start a process in cgroup %s (clone3 with CLONE_INTO_CGROUP): %w", path, err)
}

// cleanStale removes the job cgroups left in dir by daemons that are gone
// (the pid in the name no longer exists): SIGKILLing what still runs in
// them — jobs whose daemon and supervisor were both killed — first.
func cleanStale(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		// NAME-PID-RANDOM; NAME may hold '-'.
		parts := strings.Split(e.Name(), "-")
		if len(parts) < 3 {
			continue
		}
		pid, err := strconv.Atoi(parts[len(parts)-2])
		if err != nil || pid <= 0 || unix.Kill(pid, 0) != unix.ESRCH {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if populated, err := cgroupPopulated(path); err == nil && populated {
			killCgroup(path, time.Second)
		}
		removeCgroup(path)
	}
}

// cgroup2Mount returns where the cgroup v2 hierarchy is mounted: at
// /sys/fs/cgroup in the unified layout, elsewhere (often
// /sys/fs/cgroup/unified) in the hybrid one.
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return "", fmt.Errorf("read the mount table: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "cgroup2 /sys/fs/cgroup cgroup2 rw,... 0 0"
		fields := strings.Fields(sc.Text())
		if len(fields) >= 3 && fields[2] == "cgroup2" {
			return unescapeMount(fields[1]), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read the mount table: %w", err)
	}
	return "", errors.New("no cgroup v2 hierarchy mounted (cgroup v1 only)")
}

// unescapeMount undoes the octal escapes (\040 for a space) of a path in
// the mount table.
func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// ownCgroup returns the calling process's cgroup v2 path ("0::PATH" in
// /proc/self/cgroup).
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			if strings.HasSuffix(p, " (deleted)") || !strings.HasPrefix(p, "/") {
				return "", fmt.Errorf("the daemon's cgroup v2 %q cannot be used", p)
			}
			return p, nil
		}
	}
	return "", errors.New("the daemon is in no cgroup v2 (no 0:: line in /proc/self/cgroup)")
}

// newJobCgroup creates a cgroup for one job under dir, named after name
// (characters other than letters, digits, '-', '_' and '.' become '_'),
// the daemon's pid and a random suffix, and returns its path.
func newJobCgroup(dir, name string) (string, error) {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, name)
	if len(clean) > 64 {
		clean = clean[:64]
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	path := filepath.Join(dir, fmt.Sprintf("%s-%d-%s", clean, os.Getpid(), hex.EncodeToString(b[:])))
	if err := os.Mkdir(path, 0o755); err != nil {
		return "", fmt.Errorf("create job cgroup: %w", err)
	}
	return path, nil
}
