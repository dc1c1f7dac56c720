// Command leasebench measures leasecron's lease client side by side with
// github.com/go-redsync/redsync/v4 and github.com/bsm/redislock against
// redis-server processes it starts itself on loopback, plus the
// scheduler-side costs (one batch of 10,000 leases, renewal load, and the
// daemon's tick-to-start delay when the daemon binary builds), and writes
// the results as a markdown report.
//
//	cd bench && go run ./cmd/leasebench -out ../BENCHMARKS.md
//
// Every redis-server it starts is killed by PID when it exits, also on
// SIGINT/SIGTERM. The whole default run takes about 7 minutes on two
// cores; -quick runs every case once, briefly, to check the harness.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/leasecron/leasecron/bench/internal/probe"
)

func main() {
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr}
	if err := m.Run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "leasebench:", err)
		os.Exit(1)
	}
}

// Main is the program; tests and main drive it through Run.
type Main struct {
	Stdout, Stderr io.Writer
}

// config holds the command-line settings.
type config struct {
	out        string
	dur        time.Duration
	warm       time.Duration
	reps       int
	ttl        time.Duration
	redisBin   string
	only       *regexp.Regexp
	skipSched  bool
	skipLease  bool
	skipDaemon bool
	skipStores bool
	repoDir    string
	daemonBin  string
	cpuProfile string
	quick      bool
	batchKeys  int
}

// Run parses args, runs the benchmarks and writes the report.
func (m *Main) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("leasebench", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	var cfg config
	var only string
	fs.StringVar(&cfg.out, "out", "", "write the markdown report to this file (default: stdout)")
	fs.DurationVar(&cfg.dur, "dur", 500*time.Millisecond, "measured time per case and repetition")
	fs.DurationVar(&cfg.warm, "warm", 150*time.Millisecond, "warm-up per case and repetition (not measured)")
	fs.IntVar(&cfg.reps, "reps", 3, "interleaved repetitions of every case (medians are reported)")
	fs.DurationVar(&cfg.ttl, "ttl", 10*time.Second, "lock TTL used by every library")
	fs.StringVar(&cfg.redisBin, "redis-server", "redis-server", "redis-server binary")
	fs.StringVar(&only, "only", "", "run only lease cases whose id matches this regexp (e.g. 'ar/K5/c1')")
	fs.BoolVar(&cfg.skipLease, "skip-lease", false, "skip the lease comparison cases (run only the scheduler parts)")
	fs.BoolVar(&cfg.skipSched, "skip-sched", false, "skip the scheduler benchmarks")
	fs.BoolVar(&cfg.skipDaemon, "skip-daemon", false, "skip the tick-to-start benchmark with the daemon binary")
	fs.BoolVar(&cfg.skipStores, "skip-stores", false, "skip the PostgreSQL, etcd and ZooKeeper benchmarks")
	fs.StringVar(&cfg.daemonBin, "daemon-bin", "", "use this leasecron binary instead of building ./cmd/leasecron")
	fs.StringVar(&cfg.repoDir, "repo", "..", "leasecron repository root (to build ./cmd/leasecron)")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.BoolVar(&cfg.quick, "quick", false, "smoke test: 1 repetition, 150 ms per case, 2,000 batch keys")
	fs.IntVar(&cfg.batchKeys, "batch-keys", 10000, "keys in the TryAcquireBatch benchmark")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return fmt.Errorf("-only: %w", err)
		}
		cfg.only = re
	}
	if cfg.quick {
		cfg.reps, cfg.dur, cfg.warm, cfg.batchKeys = 1, 150*time.Millisecond, 50*time.Millisecond, 2000
	}
	if cfg.reps < 1 || cfg.dur <= 0 {
		return fmt.Errorf("need -reps >= 1 and -dur > 0")
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	b := &bench{cfg: cfg, log: m.Stderr}
	// Kill the servers on a signal even if a case is stuck somewhere:
	// the deferred cleanup below covers the normal and the error path.
	defer probe.KillOnSignal(3*time.Second, b.killAll)()
	defer b.killAll()

	start := time.Now()
	if err := b.run(ctx); err != nil {
		return err
	}
	b.total = time.Since(start)
	b.env.loadAvg = append(b.env.loadAvg, loadAvg())
	if cfg.out == "" {
		if err := b.report(m.Stdout); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	} else if err := writeKeepingScale(cfg.out, b.report); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	fmt.Fprintf(m.Stderr, "done in %s\n", b.total.Round(time.Second))
	return nil
}

// keepFrom starts the part of the output file that leasebench keeps: the
// scale section bench/cmd/scalebench writes (between its markers) and the
// notes after it, which `make bench` writes after leasebench.
const keepFrom = "<!-- scalebench:start -->"

// writeKeepingScale writes the report to path, keeping what the file had
// from keepFrom on.
func writeKeepingScale(path string, report func(io.Writer) error) error {
	var tail []byte
	if old, err := os.ReadFile(path); err == nil {
		if i := bytes.Index(old, []byte(keepFrom)); i >= 0 {
			tail = old[i:]
		}
	}
	var buf bytes.Buffer
	if err := report(&buf); err != nil {
		return err
	}
	if len(tail) > 0 {
		if !bytes.HasSuffix(buf.Bytes(), []byte("\n\n")) {
			buf.WriteString("\n")
		}
		buf.Write(tail)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
