package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// environment describes the machine and the versions measured.
type environment struct {
	date     time.Time
	nproc    int
	cpu      string
	memory   string
	kernel   string
	goVer    string
	redisVer string
	libs     map[string]string // module path -> version
	leaseRev string            // git revision of the local lease package
	loadAvg  []string          // /proc/loadavg's 1/5/15-minute averages at start, at the end
}

// loadAvg returns the 1, 5 and 15 minute load averages, "?" if unknown.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " / ")
	}
	return "?"
}

func (b *bench) collectEnv(ctx context.Context) error {
	e := &b.env
	e.date = time.Now().UTC()
	e.nproc = runtime.NumCPU()
	e.goVer = runtime.Version()
	e.loadAvg = append(e.loadAvg, loadAvg())
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				e.cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		line, _, _ := strings.Cut(string(data), "\n")
		e.memory = strings.Join(strings.Fields(strings.TrimPrefix(line, "MemTotal:")), " ")
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.kernel = strings.TrimSpace(string(data))
	}
	m, err := info(ctx, b.admin[0], "server")
	if err != nil {
		return err
	}
	e.redisVer = m["redis_version"]
	e.libs = map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			v := d.Version
			if d.Replace != nil {
				v = "local (" + d.Replace.Path + ")"
			}
			e.libs[d.Path] = v
		}
	}
	if repo, err := filepath.Abs(b.cfg.repoDir); err == nil {
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(gctx, "git", "-C", repo, "rev-parse", "--short", "HEAD").Output(); err == nil {
			e.leaseRev = strings.TrimSpace(string(out))
			if st, err := exec.CommandContext(gctx, "git", "-C", repo, "status", "--porcelain", "--", "lease").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
				e.leaseRev += " + uncommitted changes in lease/"
			}
		}
	}
	return nil
}

// loaded reports whether the 1-minute load average at the start or at the
// end of the run was above the number of cores.
func (e environment) loaded() bool {
	for _, l := range e.loadAvg {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil && v > float64(e.nproc) {
			return true
		}
	}
	return false
}
