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
// to l, else an error saying why not: a controller l needs is available
// neither for the jobs' cgroup v2 (no cgroup containment, bound to a
// cgroup v1 hierarchy, or not delegated to the daemon) nor on a writable
// cgroup v1 hierarchy. A job whose limits cannot be applied must not run.
func (c Containment) CanLimit(l Limits) error {
	var missing []string
	for _, n := range l.controllers() {
		if c.hierarchy(n) == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	v2 := c.noControllers
	if c.mode != containCgroup {
		v2 = fmt.Sprintf("limits need a cgroup v2 per job, and jobs are contained by the process tree (%s)", c.why)
	}
	return fmt.Errorf("the controller(s) %s are available neither for the jobs' cgroups v2 in %s (%s) nor on a writable cgroup v1 hierarchy (%s)",
		strings.Join(missing, ", "), c.dirOrNone(), v2, c.noV1)
}

// dirOrNone is the jobs' cgroup v2, or "no cgroup".
func (c Containment) dirOrNone() string {
	if c.mode != containCgroup {
		return "no cgroup"
	}
	return c.dir
}

// hierarchy says where controller n applies a job's limit: "v2" (the
// job's cgroup v2), "v1" (a cgroup of its own in n's v1 hierarchy) or ""
// (nowhere: a limit that needs n cannot be applied).
func (c Containment) hierarchy(n string) string {
	if c.mode == containCgroup && slices.Contains(c.controllers, n) {
		return "v2"
	}
	if slices.ContainsFunc(c.v1, func(h v1Hier) bool { return h.ctrl == n }) {
		return "v1"
	}
	return ""
}

// v1For returns the v1 hierarchies that apply l's limits (those of its
// controllers not available on cgroup v2).
func (c Containment) v1For(l Limits) []v1Hier {
	var hs []v1Hier
	for _, n := range l.controllers() {
		if c.hierarchy(n) == "v1" {
			i := slices.IndexFunc(c.v1, func(h v1Hier) bool { return h.ctrl == n })
			hs = append(hs, c.v1[i])
		}
	}
	return hs
}

// Controllers lists the controllers among memory, cpu and pids that can
// apply the jobs' limits, each with its hierarchy: "memory:v2" (the jobs'
// cgroups v2) or "memory:v1" (a cgroup v1 per job in the memory
// hierarchy, on a host with the hybrid layout).
func (c Containment) Controllers() []string {
	var out []string
	for _, n := range limitControllers {
		if h := c.hierarchy(n); h != "" {
			out = append(out, n+":"+h)
		}
	}
	return out
}

// NoControllers says why the controllers among memory, cpu and pids that
// Controllers does not list are available on neither hierarchy ("" when
// all are).
func (c Containment) NoControllers() string {
	var missing []string
	for _, n := range limitControllers {
		if c.hierarchy(n) == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return c.CanLimit(Limits{MemoryMax: 1, CPUMax: 1, TasksMax: 1}).Error()
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

// applyLimits writes l into the job cgroup v2 at path, leaving out the
// limits of the controllers in skip (applied on cgroup v1).
func applyLimits(path string, l Limits, skip []v1Hier) error {
	for _, h := range skip {
		switch h.ctrl {
		case "memory":
			l.MemoryMax = 0
		case "cpu":
			l.CPUMax = 0
		case "pids":
			l.TasksMax = 0
		}
	}
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

// limitHit returns which limit of l the job in the cgroup v2 at path ran
// into, from its event counters (the cgroup is the job's alone and new):
// LimitMemory, LimitTasks, LimitCPU or "". A limit applied in a cgroup
// v1 of the job's (one of v1) is read there instead; killed says the job
// died of SIGKILL (an OOM kill, for a kernel without v1's oom_kill
// counter).
func limitHit(path string, l Limits, v1 []v1Cgroup, killed bool) string {
	hit := func(ctrl, file, key string) bool {
		if i := slices.IndexFunc(v1, func(cg v1Cgroup) bool { return cg.Ctrl == ctrl }); i >= 0 {
			return v1LimitHit(v1[i].Dir, ctrl, killed)
		}
		return path != "" && counter(filepath.Join(path, file), key) > 0
	}
	switch {
	case l.MemoryMax > 0 && hit("memory", "memory.events", "oom_kill"):
		return LimitMemory
	case l.TasksMax > 0 && hit("pids", "pids.events", "max"):
		return LimitTasks
	case l.CPUMax > 0 && hit("cpu", "cpu.stat", "nr_throttled"):
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
