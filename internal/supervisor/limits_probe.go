//go:build linux

package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// ProbeLimits says, without changing anything, whether a daemon running
// where the calling process runs (its cgroups) could hold jobs to l: nil,
// or why not (a controller l needs available neither in its cgroup v2 nor
// on a writable cgroup v1 hierarchy). It is what `leasecron check`
// reports; the daemon's own answer, once it has created the jobs'
// cgroups, is [Containment.CanLimit].
func ProbeLimits(l Limits) error {
	need := l.controllers()
	if len(need) == 0 {
		return nil
	}
	var why []string
	for _, c := range need {
		if _, err := probeHierarchy(c); err != nil {
			why = append(why, err.Error())
		}
	}
	if len(why) > 0 {
		return fmt.Errorf("the controller(s) needed are not available: %s", strings.Join(why, "; "))
	}
	return nil
}

// ProbeControllers says, like ProbeLimits, which controllers among
// memory, cpu and pids a daemon running where the calling process runs
// could limit jobs with, each with its hierarchy ("memory:v2",
// "pids:v1"); `leasecron check` shows them.
func ProbeControllers() []string {
	var out []string
	for _, c := range limitControllers {
		if h, err := probeHierarchy(c); err == nil {
			out = append(out, c+":"+h)
		}
	}
	return out
}

// probeHierarchy says which hierarchy would apply controller c's limit
// for a daemon running where the calling process runs: "v2" when c is in
// its cgroup v2's cgroup.controllers, else "v1" when c's v1 hierarchy is
// mounted and the caller's cgroup in it writable, else an error.
func probeHierarchy(c string) (string, error) {
	switch v := os.Getenv(ContainmentEnv); v {
	case "process-tree", "process-tree-unconfirmed", "group":
		return "", fmt.Errorf("limits need a cgroup per job, and %s=%s forces the process-tree containment", ContainmentEnv, v)
	}
	v2, v2why := probeV2()
	if v2 != "" && slices.Contains(strings.Fields(readFile(filepath.Join(v2, "cgroup.controllers"))), c) {
		return "v2", nil
	}
	_, dir, err := findV1(c, "self")
	if err == nil {
		if err = unix.Access(dir, unix.W_OK); err == nil {
			return "v1", nil
		}
		err = fmt.Errorf("%s on cgroup v1: %s is not writable: %w", c, dir, err)
	}
	if v2 != "" {
		v2why = c + unavailableWhy(c, v2)
	}
	return "", fmt.Errorf("%s not on cgroup v2 (%s) nor on cgroup v1 (%v)", c, v2why, err)
}

// probeV2 returns the daemon's cgroup v2 directory, or "" and why there
// is none.
func probeV2() (string, string) {
	mount, err := cgroup2Mount()
	if err != nil {
		return "", err.Error()
	}
	own, err := ownCgroup()
	if err != nil {
		return "", err.Error()
	}
	if filepath.Base(own) == daemonCgroup {
		own = filepath.Dir(own)
	}
	return filepath.Join(mount, own), ""
}
