package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Documented floors of the per-job limits: a limit below them cannot run
// even a shell, and check rejects it. TestLimitFloors pins them.
const (
	// minMemoryMax is the smallest memory_max: a shell and a small program
	// need a few MiB of pages.
	minMemoryMax = 4 << 20
	// minCPUMax is the smallest cpu_max: the kernel's smallest cpu.max
	// quota, 1ms per 100ms period.
	minCPUMax = 0.01
	// maxCPUMax bounds cpu_max (in cores).
	maxCPUMax = 4096
	// minTasksMax is the smallest tasks_max: a shell, the program it
	// starts, and a thread or two of the program's runtime.
	minTasksMax = 4
)

// rawLimitKeys are the per-job resource limits, which the defaults
// section may set too.
type rawLimitKeys struct {
	MemoryMax size     `yaml:"memory_max"`
	CPUMax    fraction `yaml:"cpu_max"`
	TasksMax  integer  `yaml:"tasks_max"`
}

// limitField returns the leaf of a limit key in r, nil for another key.
func limitField(r *rawLimitKeys, key string) any {
	return map[string]any{"memory_max": &r.MemoryMax, "cpu_max": &r.CPUMax, "tasks_max": &r.TasksMax}[key]
}

// limitKeys are the job keys checkLimitField knows.
var limitKeys = []string{"memory_max", "cpu_max", "tasks_max"}

// HasLimits reports whether the job has a memory_max, cpu_max or
// tasks_max.
func (j *Job) HasLimits() bool { return j.MemoryMax > 0 || j.CPUMax > 0 || j.TasksMax > 0 }

// checkLimitField returns what is wrong with limit key key of j; ok is
// false when key is not a limit key. 0 means no limit.
func checkLimitField(j *Job, key string) (msgs []string, ok bool) {
	switch key {
	case "memory_max":
		if v := j.MemoryMax; v != 0 && v < minMemoryMax {
			msgs = append(msgs, fmt.Sprintf("memory_max %s is below %s, the least a job needs (0 or unset: no limit)", formatSize(v), formatSize(minMemoryMax)))
		}
	case "cpu_max":
		if v := j.CPUMax; v != 0 && (v < minCPUMax || v > maxCPUMax || math.IsNaN(v)) {
			msgs = append(msgs, fmt.Sprintf("cpu_max %g: want a share of one core from %g (1%% of a core) to %d, such as 0.5 for half a core (0 or unset: no limit)", v, minCPUMax, maxCPUMax))
		}
	case "tasks_max":
		if v := j.TasksMax; v != 0 && v < minTasksMax {
			msgs = append(msgs, fmt.Sprintf("tasks_max %d is below %d, the least a job needs: a shell, its program and their threads (0 or unset: no limit)", v, minTasksMax))
		}
	default:
		return nil, false
	}
	return msgs, true
}

// size is a number of bytes with an optional binary unit: 536870912,
// 512M, 512MiB, 1.5G.
type size struct {
	leaf
	v int64
}

// UnmarshalYAML reads a size; it records a bad one, never fails.
func (z *size) UnmarshalYAML(n *yaml.Node) error {
	return readLeaf(&z.leaf, n, &z.v, parseSize)
}

// sizeUnits are the units parseSize knows, powers of 1024 (as systemd's
// MemoryMax= reads K, M, G, T).
var sizeUnits = map[string]int64{"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

// parseSize reads a number of bytes with an optional unit K, M, G or T
// (also KiB, MiB, GiB, TiB, and lower case), each a power of 1024.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	unit = strings.ToUpper(unit)
	if len(unit) == 3 && strings.HasSuffix(unit, "IB") {
		unit = unit[:1] // KiB
	} else if len(unit) == 2 && strings.HasSuffix(unit, "B") {
		unit = unit[:1] // KB
	}
	mul, ok := sizeUnits[unit]
	f, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || f < 0 || f*float64(mul) >= math.MaxInt64 {
		return 0, fmt.Errorf("bad size %q: want bytes with an optional unit K, M, G or T (powers of 1024), such as 512M or 1.5G", s)
	}
	return int64(f * float64(mul)), nil
}

// formatSize writes n bytes in the largest unit that divides it.
func formatSize(n int64) string {
	for _, u := range []string{"T", "G", "M", "K"} {
		if m := sizeUnits[u]; n >= m && n%m == 0 {
			return strconv.FormatInt(n/m, 10) + u
		}
	}
	return strconv.FormatInt(n, 10)
}

// LimitProblems returns, for each job with limits that probe says cannot
// be applied on this host (ProbeLimits: a controller available neither
// on cgroup v2 nor on a writable cgroup v1 hierarchy), a line naming
// file, line and field and why; `leasecron check` prints them. A daemon
// does not run such a job on such a host.
func (c *Config) LimitProblems(probe func(*Job) error) []string {
	v := &validator{c: c}
	var out []string
	for _, j := range c.Jobs {
		if !j.HasLimits() {
			continue
		}
		err := probe(j)
		if err == nil {
			continue
		}
		key := "tasks_max"
		switch {
		case j.MemoryMax > 0:
			key = "memory_max"
		case j.CPUMax > 0:
			key = "cpu_max"
		}
		msg := fmt.Sprintf("job %s: its limits cannot be applied on this host, and a daemon here will not run it: %v", j.Name, err)
		if e := v.problem(j.field(c)+"."+key, j.Line, msg, err); e != nil {
			out = append(out, e.Error())
		}
	}
	return out
}
