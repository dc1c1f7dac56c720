package faultsuite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FleetKeys are a job's keys of "Operating a fleet" as the fleet writes
// them into the config; zero values are not written (the daemon's
// defaults apply).
type FleetKeys struct {
	Retries        int
	RetryBackoff   time.Duration
	RetryOnTimeout bool
	HistoryLimit   int
	// RunOnLabels and RunOnHosts are run_on.labels and run_on.hosts.
	RunOnLabels map[string]string
	RunOnHosts  []string
	// Candidates is written when not 0; NoCandidates writes 0 (every
	// eligible host tries).
	Candidates   int
	StandbyDelay time.Duration
	Jitter       time.Duration
}

// NoCandidates as FleetKeys.Candidates writes "candidates: 0".
const NoCandidates = -1

// write appends the keys that are set to a job item of the config.
func (k FleetKeys) write(b *bytes.Buffer) {
	if k.Retries > 0 {
		fmt.Fprintf(b, "    retries: %d\n", k.Retries)
	}
	if k.RetryBackoff > 0 {
		fmt.Fprintf(b, "    retry_backoff: %s\n", k.RetryBackoff)
	}
	if k.RetryOnTimeout {
		b.WriteString("    retry_on_timeout: true\n")
	}
	if k.HistoryLimit > 0 {
		fmt.Fprintf(b, "    history_limit: %d\n", k.HistoryLimit)
	}
	if len(k.RunOnLabels) > 0 || len(k.RunOnHosts) > 0 {
		b.WriteString("    run_on:\n")
		if len(k.RunOnLabels) > 0 {
			b.WriteString("      labels:\n")
			for _, name := range slices.Sorted(maps.Keys(k.RunOnLabels)) {
				fmt.Fprintf(b, "        %s: %q\n", name, k.RunOnLabels[name])
			}
		}
		if len(k.RunOnHosts) > 0 {
			q := make([]string, len(k.RunOnHosts))
			for i, h := range k.RunOnHosts {
				q[i] = strconv.Quote(h)
			}
			fmt.Fprintf(b, "      hosts: [%s]\n", strings.Join(q, ", "))
		}
	}
	switch {
	case k.Candidates == NoCandidates:
		b.WriteString("    candidates: 0\n")
	case k.Candidates > 0:
		fmt.Fprintf(b, "    candidates: %d\n", k.Candidates)
	}
	if k.StandbyDelay > 0 {
		fmt.Fprintf(b, "    standby_delay: %s\n", k.StandbyDelay)
	}
	if k.Jitter > 0 {
		fmt.Fprintf(b, "    jitter: %s\n", k.Jitter)
	}
}

// Fail says which runs of a recorder job fail: they run for their Sleep,
// write their "end" line with the exit status, and exit with status 3.
type Fail struct {
	Attempts []int    // runs whose LEASECRON_ATTEMPT is one of these
	Hosts    []string // runs on these hosts (LEASECRON_HOST)
	Always   bool     // every run
}

// args are the recorder's flags for f.
func (f Fail) args() []string {
	var a []string
	if len(f.Attempts) > 0 {
		s := make([]string, len(f.Attempts))
		for i, n := range f.Attempts {
			s[i] = strconv.Itoa(n)
		}
		a = append(a, "--fail-attempts", strings.Join(s, ","))
	}
	if len(f.Hosts) > 0 {
		a = append(a, "--fail-hosts", strings.Join(f.Hosts, ","))
	}
	if f.Always {
		a = append(a, "--fail")
	}
	return a
}

// formatLabels renders labels as LEASECRON_LABELS reads them: k=v,k2=v2.
func formatLabels(labels map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		kv = append(kv, k+"="+labels[k])
	}
	return strings.Join(kv, ",")
}

// retries is the retries of job in the fleet's config (0 for a job it
// does not have).
func (f *Fleet) retries(job string) int {
	for _, j := range f.cfg.Jobs {
		if j.Name == job {
			return j.Retries
		}
	}
	return 0
}

// WriteCLIConfig rewrites the CLI's config file (CLIConfigPath) from c:
// its jobs, with the store's servers reached directly, not through a
// daemon's links (so that faults on the links do not hit the CLI).
func (f *Fleet) WriteCLIConfig(c Config) {
	f.t.Helper()
	c.fill()
	addrs := make([]string, len(f.Store.Servers))
	for i, s := range f.Store.Servers {
		addrs[i] = s.Addr()
	}
	if err := os.WriteFile(f.CLIConfigPath, f.render("cli", addrs, c), 0o644); err != nil {
		f.t.Fatalf("write the CLI's config: %v", err)
	}
}

// CLIResult is what a CLI command printed and how it exited.
type CLIResult struct {
	Args           []string
	Stdout, Stderr string
	Code           int
}

// String describes the command and its output for failure messages.
func (r CLIResult) String() string {
	return fmt.Sprintf("leasecron %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.Args, " "), r.Code, r.Stdout, r.Stderr)
}

// cliTimeout bounds one CLI command.
const cliTimeout = 30 * time.Second

// CLI runs `leasecron CMD -c CLIConfigPath ARGS...` (args[0] is CMD) and
// returns its output and exit code; it fails the test if the command
// could not run or did not end within 30s.
func (f *Fleet) CLI(args ...string) CLIResult {
	f.t.Helper()
	if len(args) == 0 {
		f.t.Fatal("faultsuite: CLI without a command")
	}
	full := append([]string{args[0], "-c", f.CLIConfigPath}, args[1:]...)
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.bins.Leasecron, full...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	cmd.Dir = f.Dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := CLIResult{Args: full, Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		f.t.Fatalf("leasecron %s did not end within %s\n%s", strings.Join(full, " "), cliTimeout, res)
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
	case err != nil:
		f.t.Fatalf("run leasecron %s: %v", strings.Join(full, " "), err)
	}
	if strings.Contains(res.Stderr, "WARNING: DATA RACE") {
		f.t.Errorf("leasecron %s reported a data race:\n%s", strings.Join(full, " "), res.Stderr)
	}
	return res
}

// MustCLI is CLI that fails the test unless the command exits 0.
func (f *Fleet) MustCLI(args ...string) CLIResult {
	f.t.Helper()
	r := f.CLI(args...)
	if r.Code != 0 {
		f.t.Fatalf("%s", r)
	}
	return r
}

// CheckAudit fails the test if the history breaks a safety invariant and
// returns the history. It is CheckSafety with the daemons' logs: the
// oracle's Audit (overlap, token, validity, and rerun only after a
// completion the daemon confirmed: a run whose completion failed, the
// store too slow, is rightly taken over) plus the attempt rules of
// SafetyRetries for the jobs' retries, where a failed run whose outcome
// never reached the store (ResultLost) may be followed by the same
// attempt.
func (f *Fleet) CheckAudit() *History {
	f.t.Helper()
	h := f.History()
	leases, err := f.Leases()
	if err != nil {
		f.t.Fatal(err)
	}
	// Audit knows no retries: its attempt rules are SafetyRetries' here.
	var vs []Violation
	for _, v := range h.Audit(leases).Violations {
		if v.Rule != "attempt" {
			vs = append(vs, v)
		}
	}
	lost := func(r Run) bool { return ResultLost(leases, r) }
	for _, v := range h.SafetyRetriesLost(f.retries, lost) {
		if v.Rule == "attempt" {
			vs = append(vs, v)
		}
	}
	if len(vs) > 0 {
		f.t.Errorf("safety violated:\n%sall runs:\n%s", FormatViolations(vs), h)
	}
	return h
}
