//go:build linux

package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Limits are the resource limits of one job, applied to its cgroup v2
// before the job starts (see [Containment.CanLimit]). The zero value limits
// nothing.
type Limits struct {
	// MemoryMax is the job's memory.max in bytes (and its memory.swap.max
	// is set to 0, so that the limit is not met by swapping): a job over
	// it is killed by the kernel's OOM killer. 0: no limit.
	MemoryMax int64
	// CPUMax is the share of one core the job may use (0.5: half a core,
	// 2: two cores), its cpu.max as a quota per 100ms period: a job over it
	// is throttled, not killed. 0: no limit.
	CPUMax float64
	// TasksMax is the job's pids.max: the number of processes and threads
	// it may have at once; a fork beyond it fails. 0: no limit.
	TasksMax int
}

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool { return l == Limits{} }

// Limits reported in [Exit].Limit.
const (
	// LimitMemory: the kernel's OOM killer killed a process of the job
	// (memory.events oom_kill).
	LimitMemory = "memory"
	// LimitTasks: a fork of the job failed at its tasks limit
	// (pids.events max).
	LimitTasks = "tasks"
	// LimitCPU: the job was throttled at its CPU limit (cpu.stat
	// nr_throttled).
	LimitCPU = "cpu"
)

// cpuPeriod is the cpu.max period, in microseconds (the kernel's default).
const cpuPeriod = 100000

// controllers names the cgroup v2 controllers l needs.
func (l Limits) controllers() []string {
	var c []string
	if l.MemoryMax > 0 {
		c = append(c, "memory")
	}
	if l.CPUMax > 0 {
		c = append(c, "cpu")
	}
	if l.TasksMax > 0 {
		c = append(c, "pids")
	}
	return c
}

// limitControllers are the controllers limits may need.
var limitControllers = []string{"memory", "cpu", "pids"}

// CanLimit returns nil when jobs started with this containment can be held
// to l, else an error saying why not: no cgroup containment (the process
// tree cannot limit anything), or a controller l needs not enabled for the
// jobs' cgroups (bound to a cgroup v1 hierarchy, or not delegated to the
// daemon). A job whose limits cannot be applied must not run.
func (c Containment) CanLimit(l Limits) error {
	need := l.controllers()
	if len(need) == 0 {
		return nil
	}
	if c.mode != containCgroup {
		return fmt.Errorf("limits need a cgroup v2 per job, and jobs are contained by the process tree (%s)", c.why)
	}
	var missing []string
	for _, n := range need {
		if !slices.Contains(c.controllers, n) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the cgroup v2 controller(s) %s are not available for the jobs' cgroups in %s: %s",
			strings.Join(missing, ", "), c.dir, c.noControllers)
	}
	return nil
}

// Controllers lists the cgroup v2 controllers enabled for the jobs'
// cgroups among memory, cpu and pids (those limits need).
func (c Containment) Controllers() []string { return slices.Clone(c.controllers) }

// NoControllers says why the controllers among memory, cpu and pids that
// Controllers does not list are not available ("" when all are).
func (c Containment) NoControllers() string {
	if c.mode != containCgroup {
		return "no cgroup per job: " + c.why
	}
	return c.noControllers
}

// enableControllers enables the memory, cpu and pids controllers for the
// job cgroups below jobs, a child of base (the daemon's cgroup), and
// returns those that are enabled, with why the others are not. A non-root
// cgroup that has processes may not enable controllers for its children
// ("no internal processes"): when the daemon is alone in base, it moves
// itself into base/leasecron-daemon first, as a daemon given a delegated
// cgroup (systemd's Delegate=yes) is meant to.
func enableControllers(base, jobs string, root bool) ([]string, string) {
	avail := strings.Fields(readFile(filepath.Join(base, "cgroup.controllers")))
	var want, why []string
	for _, c := range limitControllers {
		if slices.Contains(avail, c) {
			want = append(want, c)
			continue
		}
		why = append(why, c+unavailableWhy(c, base))
	}
	enabled := strings.Fields(readFile(filepath.Join(base, "cgroup.subtree_control")))
	if !root && len(want) > 0 && !containsAll(enabled, want) {
		if err := moveToLeaf(base); err != nil {
			return nil, strings.Join(append(why, err.Error()), "; ")
		}
	}
	for _, dir := range []string{base, jobs} {
		for _, c := range want {
			_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0)
		}
	}
	on := strings.Fields(readFile(filepath.Join(jobs, "cgroup.subtree_control")))
	var got []string
	for _, c := range want {
		if slices.Contains(on, c) {
			got = append(got, c)
		} else {
			why = append(why, fmt.Sprintf("%s could not be enabled in %s/cgroup.subtree_control", c, jobs))
		}
	}
	return got, strings.Join(why, "; ")
}

// unavailableWhy says why controller c is not in base's cgroup.controllers.
func unavailableWhy(c, base string) string {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		// "4:memory:/path": c is bound to a cgroup v1 hierarchy.
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[0] != "0" && slices.Contains(strings.Split(f[1], ","), c) {
			return " is bound to a cgroup v1 hierarchy (boot with systemd.unified_cgroup_hierarchy=1 for the unified layout)"
		}
	}
	return fmt.Sprintf(" is not in %s/cgroup.controllers (not delegated to the daemon: see the systemd unit's Delegate=yes)", base)
}

// moveToLeaf moves the calling process into the cgroup leasecron-daemon
// below base, so that base can enable controllers for its children. It
// refuses when base holds other processes: they are not the daemon's to
// move (a cron daemon's cgroup, say).
func moveToLeaf(base string) error {
	self := strconv.Itoa(os.Getpid())
	for _, p := range strings.Fields(readFile(filepath.Join(base, "cgroup.procs"))) {
		if p != self {
			return fmt.Errorf("%s holds other processes than the daemon, so it cannot enable controllers for the jobs (run the daemon in a cgroup of its own: systemd's Delegate=yes)", base)
		}
	}
	leaf := filepath.Join(base, daemonCgroup)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create cgroup %s: %w", leaf, err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(self), 0); err != nil {
		return fmt.Errorf("move the daemon into %s: %w", leaf, err)
	}
	return nil
}

// daemonCgroup is the leaf cgroup, beside leasecron-jobs, the daemon moves
// itself into when its own cgroup must enable controllers for the jobs.
const daemonCgroup = "leasecron-daemon"

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// applyLimits writes l into the job cgroup at path.
func applyLimits(path string, l Limits) error {
	var files [][2]string
	if l.MemoryMax > 0 {
		files = append(files, [2]string{"memory.max", strconv.FormatInt(l.MemoryMax, 10)})
		if _, err := os.Stat(filepath.Join(path, "memory.swap.max")); err == nil {
			files = append(files, [2]string{"memory.swap.max", "0"})
		}
	}
	if l.CPUMax > 0 {
		quota := max(int64(l.CPUMax*cpuPeriod+0.5), 1000)
		files = append(files, [2]string{"cpu.max", fmt.Sprintf("%d %d", quota, cpuPeriod)})
	}
	if l.TasksMax > 0 {
		files = append(files, [2]string{"pids.max", strconv.Itoa(l.TasksMax)})
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(path, f[0]), []byte(f[1]), 0); err != nil {
			return fmt.Errorf("set %s %s in job cgroup %s: %w", f[0], f[1], path, err)
		}
	}
	return nil
}

// limitHit returns which limit of l the job in the cgroup at path ran
// into, from its event counters (the cgroup is the job's alone and new):
// LimitMemory, LimitTasks, LimitCPU or "".
func limitHit(path string, l Limits) string {
	switch {
	case l.MemoryMax > 0 && counter(filepath.Join(path, "memory.events"), "oom_kill") > 0:
		return LimitMemory
	case l.TasksMax > 0 && counter(filepath.Join(path, "pids.events"), "max") > 0:
		return LimitTasks
	case l.CPUMax > 0 && counter(filepath.Join(path, "cpu.stat"), "nr_throttled") > 0:
		return LimitCPU
	}
	return ""
}

// counter reads the value of key in a flat-keyed cgroup file ("key N"
// lines); 0 when absent.
func counter(file, key string) int64 {
	n, _ := strconv.ParseInt(eventValue([]byte(readFile(file)), key), 10, 64)
	return n
}

// ProbeLimits says, without changing anything, whether a daemon running
// where the calling process runs (its cgroup) could hold jobs to l: nil,
// or why not (no cgroup v2, or a controller l needs not available in the
// cgroup). It is what `leasecron check` reports; the daemon's own answer,
// once it has created the jobs' cgroup, is [Containment.CanLimit].
func ProbeLimits(l Limits) error {
	need := l.controllers()
	if len(need) == 0 {
		return nil
	}
	switch v := os.Getenv(ContainmentEnv); v {
	case "process-tree", "process-tree-unconfirmed", "group":
		return fmt.Errorf("limits need a cgroup v2 per job, and %s=%s forces the process-tree containment", ContainmentEnv, v)
	}
	mount, err := cgroup2Mount()
	if err != nil {
		return fmt.Errorf("limits need a cgroup v2 per job: %w", err)
	}
	own, err := ownCgroup()
	if err != nil {
		return fmt.Errorf("limits need a cgroup v2 per job: %w", err)
	}
	if filepath.Base(own) == daemonCgroup {
		own = filepath.Dir(own)
	}
	base := filepath.Join(mount, own)
	avail := strings.Fields(readFile(filepath.Join(base, "cgroup.controllers")))
	var why []string
	for _, c := range need {
		if !slices.Contains(avail, c) {
			why = append(why, c+unavailableWhy(c, base))
		}
	}
	if len(why) > 0 {
		return fmt.Errorf("the cgroup v2 controller(s) needed are not available: %s", strings.Join(why, "; "))
	}
	return nil
}
