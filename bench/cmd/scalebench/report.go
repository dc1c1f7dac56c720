package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"
)

// The markers around the scalebench section of BENCHMARKS.md.
const (
	markStart = "<!-- scalebench:start -->"
	markEnd   = "<!-- scalebench:end -->"
)

// writeSection replaces the text between the markers in path with section
// (the markers included), appending it when the markers are missing or the
// file does not exist.
func writeSection(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	block := markStart + "\n" + section + markEnd + "\n"
	i, j := strings.Index(s, markStart), strings.Index(s, markEnd)
	switch {
	case i >= 0 && j > i:
		rest := s[j+len(markEnd):]
		rest = strings.TrimPrefix(rest, "\n")
		s = s[:i] + block + rest
	default:
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		if s != "" {
			s += "\n"
		}
		s += block
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// report is the markdown section.
func (b *bench) report() string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format, args...) }
	p("## Scale: %d hosts × %d jobs on one tick\n\n", b.hosts, b.jobs)
	p("`make bench-scale` (`cd bench && go run ./cmd/scalebench -out ../BENCHMARKS.md`) writes this section; ")
	p("run %s UTC, %s in all, on %d CPUs (%s), Go %s. Load average (1/5/15 min) at the start, after each store: %s. ",
		b.start.UTC().Format("2006-01-02 15:04"), b.total.Round(time.Second), runtime.NumCPU(), cpuModel(), runtime.Version(),
		strings.Join(b.loads, "; "))
	p("The machine is shared with other work: absolute times are only indicative.\n\n")
	p("Each simulated host is a `scheduler.Scheduler` in this one process with `DryRun` (a won tick is recorded and completed, nothing is started), ")
	p("its own backend client and its own metrics, ids h000..h%03d, heartbeat %s, lease.ttl %s, standby_delay %s, deadline 10m, ",
		b.hosts-1, b.set.heartbeat, b.set.ttl, b.set.standbyDelay)
	p("redis.timeout %s unless the row says otherwise (the daemon's default is 50ms, meant for nodes on their own machines; here 5 nodes, the clients and other work share %d CPUs, ", b.redisTimeout, runtime.NumCPU())
	p("and a batch gets the timeout plus 100µs per key), postgres.timeout 2s (the default). ")
	p("All %d jobs (`j00000`..) have one daily cron spec; once every host's `leasecron_fleet_hosts` shows %d, every host reloads the config with the tick %s ahead, ",
		b.jobs, b.hosts, b.set.baseline+b.set.lead)
	p("and that one tick is measured. Servers: ")
	var srv []string
	for _, name := range b.backends {
		if s := b.servers[name]; s != "" {
			srv = append(srv, name+" "+s)
		}
	}
	p("%s (each PostgreSQL host with pgxpool's default pool, as the daemon: up to max(4, CPUs) connections).\n\n", strings.Join(srv, "; "))

	p("| store | setting | requests / tick | until all recorded | per job | Redis work / tick | all won | all recorded | runs (jobs run twice) | runs per host max/mean (max, min) | standby attempts | lease outcomes | peak RSS | goroutines | load (1 min) |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|\n")
	for _, f := range b.floors {
		took := f.took.Round(time.Millisecond).String()
		if f.err != "" && f.won < f.keys {
			took += " (" + f.err + ")"
		}
		p("| %s | floor: 1 client, 1 batch of %d keys | %d | – | %.2f | %s | %s | – | – | – | – | %d won | – | – | – |\n",
			f.store, f.keys, f.requests, float64(f.requests)/float64(f.keys), count(f.work), took, f.won)
	}
	for _, r := range b.results {
		p("| %s | %d hosts, candidates %d%s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %s | %d | %s |\n",
			r.store, r.hosts, r.candidates, timeoutCell(r), reqs(r.reqTotal, r), reqs(r.reqDecided, r), perJob(r), count(r.work),
			dur(r.wonAll, r.won, r), dur(r.recordedAll, r.recorded, r), runsCell(r), spreadCell(r), r.standby,
			outcomesCell(r.outcomes), mib(r.peakRSS), r.peakGoroutines, firstField(r.load))
	}
	p("\n")
	p("Columns: **requests / tick** is what the servers executed for the measured tick, counted from 0.3 s before the tick to %s after it (past the standby time) ",
		b.set.standbyDelay+time.Second)
	p("plus the counter's settle time, minus the background of the same fleet measured over %s just before the tick ", b.set.baseline)
	p("(heartbeats, pause-flag reads, health pings; see the log for its rate). ")
	for _, name := range b.backends {
		if u := b.units[name]; u != "" {
			p("For %s: %s. ", name, u)
		}
	}
	p("**until all recorded** is the same count at the moment the last run was recorded (Redis only: PostgreSQL's statistics lag by up to 10 s). ")
	p("**per job** is requests / tick divided by the jobs. **Redis work / tick** counts every command the nodes executed for the tick, those the scripts called included (the servers' CPU follows it). **all won** and **all recorded** are the times from the tick until the last job's lease was won, ")
	p("and until its run was recorded (lease completed, history appended, `runs_total{result=\"dry_run\"}` counted); the times come from the schedulers' own log records of each run ")
	p("and the totals are checked against the sum of `runs_total{result=\"dry_run\"}` over the %d registries. ", b.hosts)
	p("**runs** is that sum (it must equal the jobs), and **jobs run twice** counts jobs with more than one run. ")
	p("**runs per host max/mean** is the busiest host's runs over the mean (jobs / hosts; the goal is at most 1.2). ")
	p("**standby attempts** is `standby_attempts_total` over the hosts (key attempts at the standby time, refused when the tick is completed). ")
	p("**lease outcomes** sums `lease_acquire_total` by outcome over the hosts (every attempt of every host). ")
	p("**peak RSS** is the most resident memory of this process (all hosts together) sampled every 20 ms from the tick until the scenario was measured, **goroutines** likewise. ")
	p("A scenario stops when the RSS passes %d MiB.\n\n", b.set.maxRSS>>20)
	p("The floor row is one client acquiring all the keys of the tick in one `TryAcquireBatch`, with no scheduler: the least the backend needs to decide the tick ")
	p("(a Redis batch sends one script call per key and node; PostgreSQL decides the batch in one statement). ")
	p("The 1-host row adds the scheduler's own work per job (history record, completion, run note).\n\n")
	p("What it shows: with candidates N, each job is tried at the tick by its N candidate hosts (rank r %s after rank 0), ", "10 ms")
	p("and at the standby time by up to N standby hosts, so a tick costs O(jobs × N) requests whatever the fleet's size. ")
	p("With candidates 0 every host tries every job at once: O(jobs × hosts) key attempts, and each loser looks again after 500 ms or after a split vote, ")
	p("so the requests and the time grow with the fleet; at %d hosts that is %d key attempts in the first round alone.\n\n", b.hosts, b.hosts*b.jobs)
	notes := b.findings()
	if len(notes) > 0 {
		p("Findings of this run:\n\n")
		for _, n := range notes {
			p("- %s\n", n)
		}
		p("\n")
	}
	return w.String()
}

// findings lists what went wrong or deserves a look, with numbers.
func (b *bench) findings() []string {
	var out []string
	for _, r := range b.results {
		name := fmt.Sprintf("%s, %d hosts, candidates %d%s", r.store, r.hosts, r.candidates, strings.ReplaceAll(timeoutCell(r), "**", ""))
		if r.err != "" {
			out = append(out, fmt.Sprintf("%s: %s (%d of %d won, %d recorded by then).", name, r.err, r.won, r.jobs, r.recorded))
		}
		if r.twice > 0 || r.runs > r.jobs {
			out = append(out, fmt.Sprintf("%s: %d runs for %d jobs, %d jobs ran twice (all won and all recorded then count runs, not distinct jobs).",
				name, r.runs, r.jobs, r.twice))
		}
		if r.firstWon > time.Second {
			out = append(out, fmt.Sprintf("%s: the first tick was won only %s after the tick (the hosts fired late).", name, r.firstWon.Round(time.Millisecond)))
		}
		if r.hosts > 1 && r.err == "" && r.spread() > 1.2 {
			out = append(out, fmt.Sprintf("%s: runs per host max/mean %.2f > 1.2 (busiest host %d runs, idlest %d, mean %.0f).",
				name, r.spread(), r.perHost[0], r.perHost[len(r.perHost)-1], float64(r.runs)/float64(r.hosts)))
		}
		if len(r.warnings) > 0 {
			keys := make([]string, 0, len(r.warnings))
			for k := range r.warnings {
				keys = append(keys, k)
			}
			sort.Slice(keys, func(i, j int) bool { return r.warnings[keys[i]] > r.warnings[keys[j]] })
			var parts []string
			for _, k := range keys[:min(len(keys), 4)] {
				parts = append(parts, fmt.Sprintf("%q ×%d", k, r.warnings[k]))
			}
			out = append(out, fmt.Sprintf("%s: warnings and errors logged: %s.", name, strings.Join(parts, ", ")))
		}
	}
	return out
}

func timeoutCell(r result) string {
	if r.timeout == 0 {
		return ""
	}
	return ", **timeout " + r.timeout.String() + "**"
}

func count(n int64) string {
	if n < 0 {
		return "–"
	}
	return fmt.Sprintf("%d", n)
}

func reqs(n int64, r result) string {
	if n < 0 || (r.err != "" && n == 0) {
		return "–"
	}
	return fmt.Sprintf("%d", n)
}

func perJob(r result) string {
	if r.reqTotal <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", float64(r.reqTotal)/float64(r.jobs))
}

func dur(d time.Duration, n int, r result) string {
	if d > 0 {
		return d.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("> %s (%d of %d)", r.bound, n, r.jobs)
}

func runsCell(r result) string { return fmt.Sprintf("%d (%d)", r.runs, r.twice) }

func spreadCell(r result) string {
	if len(r.perHost) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f (%d, %d)", r.spread(), r.perHost[0], r.perHost[len(r.perHost)-1])
}

func outcomesCell(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func mib(n int64) string {
	if n <= 0 {
		return "?"
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

func firstField(s string) string {
	f, _, _ := strings.Cut(s, " ")
	return f
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return "?"
}
