package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leasecron/leasecron/bench/internal/stats"
)

// daemonResults is the tick-to-start measurement with real daemons.
type daemonResults struct {
	skipped     string // why it was not measured
	daemons     int
	jobs        int
	runFor      time.Duration
	ticks       int // (job, tick) pairs started
	duplicates  int // (job, tick) pairs started more than once (must be 0)
	missing     int // (job, tick) pairs in the steady window never started
	p50, p99    time.Duration
	max         time.Duration
	rssIdleMiB  float64 // median VmRSS sampled between ticks
	rssPeakMiB  float64 // max VmHWM
	rss10kMiB   float64 // idle VmRSS of one daemon with 10,000 jobs loaded (0: not measured)
	rss10kNote  string
	perHost     map[string]int
	floors      []floorRow // spawning the job binary directly, no daemon
	busyFloor   floorRow   // the same, half-way between ticks while the daemons run
	logExcerpts []string
	trace       tickTrace // where the tick-to-start time goes, from the daemons' logs
}

const (
	daemonCount   = 3
	daemonJobs    = 8
	daemonRunFor  = 32 * time.Second
	daemonIgnore  = 3  // first ticks after start are not counted (startup)
	daemonGuardUp = 35 // node uptime (s) needed: the daemon's restart guard is its TTL (30 s)
)

func (b *bench) runDaemon(ctx context.Context) {
	d := &b.daemon
	d.daemons, d.jobs, d.runFor = daemonCount, daemonJobs, daemonRunFor
	if err := b.daemonBench(ctx); err != nil {
		d.skipped = err.Error()
		fmt.Fprintln(b.log, "daemon benchmark not measured:", err)
	}
}

func (b *bench) daemonBench(ctx context.Context) error {
	repo, err := filepath.Abs(b.cfg.repoDir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(repo, "cmd", "leasecron")); err != nil && b.cfg.daemonBin == "" {
		return fmt.Errorf("the daemon is not there yet (%s/cmd/leasecron missing)", repo)
	}
	dir, err := os.MkdirTemp("", "leasebench-daemon-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "leasecron")
	stamp := filepath.Join(dir, "tickstamp")
	bctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if b.cfg.daemonBin != "" {
		bin = b.cfg.daemonBin
	} else {
		build := exec.CommandContext(bctx, "go", "build", "-o", bin, "./cmd/leasecron")
		build.Dir = repo
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("`go build ./cmd/leasecron` failed: %s", firstLine(string(out), err))
		}
	}
	// Built from the repository root so that it works from any directory.
	cmd := exec.CommandContext(bctx, "go", "build", "-o", stamp, "./cmd/tickstamp")
	cmd.Dir = filepath.Join(repo, "bench")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build tickstamp: %s", firstLine(string(out), err))
	}

	// The daemon's restart guard is its lease TTL: wait until the nodes
	// have been up that long, or their votes do not count.
	for {
		up, err := infoInt(ctx, b.admin[0], "server", "uptime_in_seconds")
		if err != nil {
			return err
		}
		if up >= daemonGuardUp {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if err := b.flushAll(ctx); err != nil {
		return err
	}

	for _, n := range []int{1, daemonJobs} {
		if err := b.spawnFloor(ctx, dir, stamp, n); err != nil {
			return fmt.Errorf("spawn floor: %w", err)
		}
	}
	if err := b.daemonRSS10k(ctx, dir, bin, stamp); err != nil {
		b.daemon.rss10kNote = err.Error()
	}

	out := filepath.Join(dir, "starts.txt")
	conf := filepath.Join(dir, "jobs.yaml")
	sb := b.daemonConfig("  prefix: leasebench\n  timeout: 50ms\nlease:\n  ttl: 30s\njobs:\n")
	for j := 0; j < daemonJobs; j++ {
		fmt.Fprintf(sb, "  - name: tick-%d\n    schedule: \"@every 1s\"\n    command: [%q, %q]\n", j, stamp, out)
	}
	if err := os.WriteFile(conf, []byte(sb.String()), 0o644); err != nil {
		return err
	}
	if outb, err := exec.CommandContext(ctx, bin, "check", "-c", conf).CombinedOutput(); err != nil {
		return fmt.Errorf("`leasecron check` rejected the benchmark config: %s", firstLine(string(outb), err))
	}

	procs := make([]*exec.Cmd, daemonCount)
	defer func() {
		for _, p := range procs {
			stopProc(p)
		}
	}()
	started := time.Now()
	for i := range procs {
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("d%d.log", i)))
		if err != nil {
			return err
		}
		defer logf.Close()
		// JSON at debug: the trace of each tick's way to its job starts
		// (parseTrace).
		p := exec.Command(bin, "run", "-c", conf, "--id", fmt.Sprintf("d%d", i), "--log-format", "json", "--log-level", "debug")
		p.Stdout, p.Stderr = logf, logf
		p.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := p.Start(); err != nil {
			return fmt.Errorf("start daemon: %w", err)
		}
		procs[i] = p
	}
	// Sample RSS half-way between ticks; stop after runFor.
	var idle []float64
	busyOut := filepath.Join(dir, "floor-busy.txt")
	busyTicks := map[string]int64{}
	samples := 0
	end := started.Add(daemonRunFor)
	for time.Now().Before(end) {
		next := time.Now().Truncate(time.Second).Add(1500 * time.Millisecond)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(next)):
		}
		for _, p := range procs {
			if p.ProcessState != nil {
				continue
			}
			if v, err := procStatusKiB(p.Process.Pid, "VmRSS"); err == nil {
				idle = append(idle, float64(v)/1024)
			}
		}
		// The spawn floor with the daemons, their spare supervisors and
		// the nodes running (half-way between ticks: the daemons are
		// idle, but their processes are there), every third second only,
		// so that a slow spawn on a busy machine does not reach into the
		// next tick (whose starts it would delay).
		samples++
		if samples%3 == 0 && time.Since(started) > daemonIgnore*time.Second && time.Until(end) > time.Second {
			spawnAt(time.Now(), fmt.Sprintf("busy-%d", len(busyTicks)), daemonJobs, stamp, busyOut, busyTicks)
		}
	}
	if row, err := readFloor(busyOut, busyTicks, daemonJobs); err == nil {
		b.daemon.busyFloor = row
	}
	stopAt := time.Now()
	for _, p := range procs {
		if v, err := procStatusKiB(p.Process.Pid, "VmHWM"); err == nil {
			b.daemon.rssPeakMiB = max(b.daemon.rssPeakMiB, float64(v)/1024)
		}
	}
	for i, p := range procs {
		stopProc(p)
		procs[i] = nil
	}
	b.daemon.rssIdleMiB = stats.Median(idle)
	for i := 0; i < daemonCount; i++ {
		b.daemon.logExcerpts = append(b.daemon.logExcerpts, tailLines(filepath.Join(dir, fmt.Sprintf("d%d.log", i)), 3)...)
	}
	from, to := started.Unix()+daemonIgnore, stopAt.Unix()-2
	if err := b.daemon.parseStarts(out, from, to); err != nil {
		return err
	}
	logs := map[string]string{}
	for i := 0; i < daemonCount; i++ {
		logs[fmt.Sprintf("d%d", i)] = filepath.Join(dir, fmt.Sprintf("d%d.log", i))
	}
	tr, err := parseTrace(logs, out, from, to)
	if err != nil {
		tr.note = err.Error()
	}
	b.daemon.trace = tr
	return nil
}

// eachStart calls f for every start line of file (tickstamp's "JOB TICK
// HOST START_NS") whose tick is in [from, to] (Unix seconds), in file
// order; lines that do not parse are skipped.
func eachStart(file string, from, to int64, f func(k jobTick, host string, ns int64)) error {
	fh, err := os.Open(file)
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 {
			continue
		}
		tick, err1 := strconv.ParseInt(fs[1], 10, 64)
		ns, err2 := strconv.ParseInt(fs[3], 10, 64)
		if err1 != nil || err2 != nil || tick < from || tick > to {
			continue
		}
		f(jobTick{fs[0], tick}, fs[2], ns)
	}
	return sc.Err()
}

// parseStarts reads the job start lines and computes the delays of the
// ticks in [from, to] (Unix seconds).
func (d *daemonResults) parseStarts(file string, from, to int64) error {
	seen := map[jobTick]int{}
	d.perHost = map[string]int{}
	var delays []time.Duration
	err := eachStart(file, from, to, func(k jobTick, host string, ns int64) {
		seen[k]++
		if seen[k] > 1 {
			d.duplicates++
			return
		}
		d.perHost[host]++
		delays = append(delays, time.Duration(ns-k.tick*int64(time.Second)))
	})
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no job ever started: %w", err)
	}
	if err != nil {
		return err
	}
	for j := 0; j < daemonJobs; j++ {
		for t := from; t <= to; t++ {
			if seen[jobTick{fmt.Sprintf("tick-%d", j), t}] == 0 {
				d.missing++
			}
		}
	}
	if len(delays) == 0 {
		return errors.New("no job started in the measured window")
	}
	slices.Sort(delays)
	d.ticks = len(delays)
	d.p50 = stats.Percentile(delays, 50)
	d.p99 = stats.Percentile(delays, 99)
	d.max = delays[len(delays)-1]
	return nil
}

// startSpread says how the counted starts were spread over the daemons,
// e.g. "78/80/74 over the 3 daemons (34/34/32 %)": the starts per host in
// the order of the host names, a 0 for each of the daemons that started
// none.
func startSpread(perHost map[string]int, daemons int) string {
	hosts := slices.Sorted(maps.Keys(perHost))
	ns, total := make([]int, max(daemons, len(hosts))), 0
	for i, h := range hosts {
		ns[i] = perHost[h]
		total += ns[i]
	}
	counts, shares := make([]string, len(ns)), make([]string, len(ns))
	for i, n := range ns {
		counts[i] = strconv.Itoa(n)
		if total > 0 {
			shares[i] = strconv.Itoa(int(math.Round(100 * float64(n) / float64(total))))
		}
	}
	if total == 0 {
		return fmt.Sprintf("none over the %d daemons", len(ns))
	}
	return fmt.Sprintf("%s over the %d daemons (%s %%)", strings.Join(counts, "/"), len(ns), strings.Join(shares, "/"))
}

// floorRow is the delay of starting n job processes at once, no daemon.
type floorRow struct {
	procs, n      int
	p50, p99, max time.Duration
}
