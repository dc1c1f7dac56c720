package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leasecron/leasecron/bench/internal/stats"
)

// spawnFloor measures what no scheduler can beat on this machine: at 30
// instants, start n tickstamp processes at once (one goroutine each, as a
// daemon would) and record when each began to run.
func (b *bench) spawnFloor(ctx context.Context, dir, stamp string, n int) error {
	out := filepath.Join(dir, fmt.Sprintf("floor%d.txt", n))
	ticks := map[string]int64{}
	for r := 0; r < 30; r++ {
		t := time.Now().Truncate(100 * time.Millisecond).Add(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(t)):
		}
		spawnAt(t, fmt.Sprintf("floor-%d", r), n, stamp, out, ticks)
	}
	row, err := readFloor(out, ticks, n)
	if err != nil {
		return err
	}
	b.daemon.floors = append(b.daemon.floors, row)
	return nil
}

// spawnAt starts n tickstamp processes at once (t is the instant they
// count from), writing to out, and waits for them; ticks records each
// one's instant by name.
func spawnAt(t time.Time, prefix string, n int, stamp, out string, ticks map[string]int64) {
	var wg sync.WaitGroup
	for j := 0; j < n; j++ {
		name := fmt.Sprintf("%s-%d", prefix, j)
		ticks[name] = t.UnixNano()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := exec.Command(stamp, out)
			c.Env = append(os.Environ(), "LEASECRON_JOB="+name, "LEASECRON_TICK_UNIX=0", "LEASECRON_HOST=floor")
			_ = c.Run()
		}()
	}
	wg.Wait()
}

// readFloor reads the start times of spawnAt's processes.
func readFloor(out string, ticks map[string]int64, procs int) (floorRow, error) {
	data, err := os.ReadFile(out)
	if err != nil {
		return floorRow{}, err
	}
	var delays []time.Duration
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		fs := strings.Fields(line)
		if len(fs) != 4 {
			continue
		}
		ns, err := strconv.ParseInt(fs[3], 10, 64)
		if t, ok := ticks[fs[0]]; ok && err == nil {
			delays = append(delays, time.Duration(ns-t))
		}
	}
	if len(delays) == 0 {
		return floorRow{}, errors.New("no process started")
	}
	slices.Sort(delays)
	return floorRow{procs: procs, n: len(delays),
		p50: stats.Percentile(delays, 50), p99: stats.Percentile(delays, 99), max: delays[len(delays)-1]}, nil
}

// daemonRSS10k starts one daemon with 10,000 jobs that fire once a year
// and reads its RSS after it settled. The jobs have a 1-minute deadline:
// with the default (until the next tick) the daemon would, as it should,
// try to catch up last January's tick of every job on start, which is not
// idle.
func (b *bench) daemonRSS10k(ctx context.Context, dir, bin, stamp string) error {
	conf := filepath.Join(dir, "jobs10k.yaml")
	sb := b.daemonConfig("  prefix: leasebench10k\njobs:\n")
	for j := 0; j < 10000; j++ {
		fmt.Fprintf(sb, "  - name: idle-%05d\n    schedule: \"0 0 1 1 *\"\n    deadline: 1m\n    command: [%q, \"/dev/null\"]\n", j, stamp)
	}
	if err := os.WriteFile(conf, []byte(sb.String()), 0o644); err != nil {
		return err
	}
	p := exec.Command(bin, "run", "-c", conf, "--id", "rss")
	p.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.Start(); err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	defer stopProc(p)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(4 * time.Second):
	}
	v, err := procStatusKiB(p.Process.Pid, "VmRSS")
	if err != nil {
		return fmt.Errorf("daemon with 10,000 jobs: %w", err)
	}
	b.daemon.rss10kMiB = float64(v) / 1024
	return nil
}

// stopProc sends SIGTERM to a started process by PID, waits up to 10 s,
// then SIGKILLs it.
func stopProc(p *exec.Cmd) {
	if p == nil || p.Process == nil || p.ProcessState != nil {
		return
	}
	_ = syscall.Kill(p.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(p.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// procStatusKiB reads a "Name:   N kB" field of /proc/PID/status.
func procStatusKiB(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s not in /proc/%d/status", field, pid)
}

func firstLine(out string, err error) string {
	out = strings.TrimSpace(out)
	if out == "" {
		return err.Error()
	}
	lines := strings.Split(out, "\n")
	if len(lines) > 3 {
		lines = lines[:3]
	}
	return strings.Join(lines, " / ")
}

func tailLines(file string, n int) []string {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// daemonConfig starts a daemon config on the benchmark's 5 nodes: the
// redis section's node list, then rest (the section's other keys and
// what follows).
func (b *bench) daemonConfig(rest string) *strings.Builder {
	sb := &strings.Builder{}
	sb.WriteString("redis:\n  nodes:\n")
	for _, a := range b.addrs(maxNodes, 0) {
		fmt.Fprintf(sb, "    - redis://%s/0\n", a)
	}
	sb.WriteString(rest)
	return sb
}
