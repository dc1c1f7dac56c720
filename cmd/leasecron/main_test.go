package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/supervisor"
	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

// cliEnv, set to 1 in its environment, makes the test binary act as the
// leasecron command itself, for tests that need the CLI in a process of its
// own.
const cliEnv = "LEASECRON_TEST_AS_CLI"

// TestMain lets the test binary act as the job supervisor, like main does,
// or as the CLI (cliEnv), and drops go-redis's log lines (connection
// refused, by design here).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervisor.Arg {
		os.Exit(supervisor.Main(os.Args[2:]))
	}
	if os.Getenv(cliEnv) == "1" {
		rl := &redisLogger{} // as main does
		redis.SetLogger(rl)
		cli := NewMain(os.Stdout, os.Stderr)
		cli.redisLog = rl
		os.Exit(cli.Run(context.Background(), os.Args[1:]))
	}
	redis.SetLogger(&redisLogger{})
	proctest.SpareRaceExitSleep() // the supervisors and CLI processes are this binary
	os.Exit(m.Run())
}

// syncBuffer is a bytes.Buffer safe for the daemon's concurrent log writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// cli runs the CLI through Main.Run, as main does, for up to a minute.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return cliWithin(t, time.Minute, args...)
}

// cliWithin is cli bounded by within instead: a bound, so that a daemon
// which should have refused to start does not hang the test.
func cliWithin(t *testing.T, within time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errw syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	code = NewMain(&out, &errw).Run(ctx, args)
	if ctx.Err() != nil {
		t.Errorf("%q still running after %s", args, within)
	}
	return code, out.String(), errw.String()
}

// unreachable are Redis node URLs nothing listens on (connection refused at
// once), for tests that must not need Redis.
const unreachable = `redis:
  nodes:
    - redis://127.0.0.1:1/0
    - redis://127.0.0.1:2/0
    - redis://127.0.0.1:3/0
`

const goodConfig = unreachable + `lease:
  ttl: 10s
jobs:
  - name: a
    schedule: "@every 1h"
    shell: "true"
  - name: b
    schedule: "0 3 * * *"
    command: ["/bin/true"]
`

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jobs.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := cli(t, args...)
		if code != 0 || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
		want := fmt.Sprintf("leasecron dev (%s %s/%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		if out != want {
			t.Errorf("%q: stdout %q, want %q", args, out, want)
		}
	}
}

// TestVersionDefault pins the documented default of the -ldflags variable.
func TestVersionDefault(t *testing.T) {
	if version != "dev" {
		t.Errorf("version = %q, want the documented default \"dev\"", version)
	}
}

func TestUsageErrors(t *testing.T) {
	good := writeConfig(t, goodConfig)
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{nil, "Usage"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"help", "bogus"}, `unknown command "bogus"`},
		{[]string{"run", "--bogus"}, "-bogus"},
		{[]string{"run", "-c", good, "extra"}, "unexpected arguments"},
		{[]string{"run", "-c", good, "--log-format", "xml"}, "--log-format"},
		{[]string{"run", "-c", good, "--log-level", "loud"}, "--log-level"},
		{[]string{"run", "-c", good, "--test-clock-offset", "soon"}, "test-clock-offset"},
		{[]string{"check", "-c"}, "flag needs an argument"},
		{[]string{"check", "-c", good, "other.yaml"}, "unexpected arguments"},
		{[]string{"status", "-c", good, "--timeout", "0"}, "--timeout"},
		{[]string{"trigger", "-c", good}, "missing the job"},
		{[]string{"trigger", "-c", good, "a", "b"}, "one job at a time"},
		{[]string{"run", "-c", good, "--id", "two words"}, `--id: host id "two words" contains spaces`},
		{[]string{"trigger", "-c", good, "--id", "tab\there", "a"}, "--id: host id"},
		{[]string{"version", "x"}, "unexpected arguments"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := cli(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr does not mention %q:\n%s", tc.want, errOut)
			}
			if out != "" {
				t.Errorf("stdout not empty: %q", out)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"help"}, {"-h"}, {"--help"},
		{"help", "run"}, {"run", "-h"}, {"check", "--help"}, {"status", "-h"},
		{"trigger", "-h"}, {"version", "-h"}, {"pause", "-h"}, {"resume", "-h"}, {"history", "-h"},
	} {
		code, out, errOut := cli(t, args...)
		if code != 0 || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
		if !strings.Contains(out, "Usage") || !strings.Contains(out, "Exit codes") {
			t.Errorf("%q: stdout has no usage with exit codes:\n%s", args, out)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Run("good", func(t *testing.T) {
		code, out, errOut := cli(t, "check", "-c", writeConfig(t, goodConfig))
		if code != 0 || out != "ok: 2 jobs, 3 nodes\n" {
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
	t.Run("long flag and flag after", func(t *testing.T) {
		code, out, _ := cli(t, "check", "--config="+writeConfig(t, goodConfig))
		if code != 0 || !strings.HasPrefix(out, "ok:") {
			t.Errorf("--config=: exit %d, stdout %q", code, out)
		}
	})
	t.Run("example", func(t *testing.T) {
		code, out, errOut := cli(t, "check", "-c", "../../jobs.example.yaml")
		if code != 0 || out != "ok: 7 jobs, 3 nodes\n" {
			t.Errorf("jobs.example.yaml: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
		}
	})
	for _, tc := range []struct {
		name, config string
		want         []string // each in stderr
	}{
		{"unknown key", goodConfig + "no_such_key: 1\n", []string{"no_such_key"}},
		{"bad cron", unreachable + "jobs:\n  - name: a\n    schedule: \"61 * * * *\"\n    shell: \"true\"\n", []string{"schedule"}},
		{"bad duration", unreachable + "lease:\n  ttl: ten seconds\njobs:\n  - name: a\n    schedule: \"@hourly\"\n    shell: \"true\"\n", []string{"ttl"}},
		{"duplicate name", unreachable + "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    shell: \"true\"\n  - name: a\n    schedule: \"@daily\"\n    shell: \"true\"\n", []string{"a"}},
		{"not yaml", "redis: [\n", []string{"jobs.yaml"}},
		{"sentinel replica_only", "redis:\n  nodes:\n    - redis+sentinel://127.0.0.1:1?master_name=m&replica_only=true\njobs:\n  - name: a\n    schedule: \"@hourly\"\n    shell: \"true\"\n", []string{"replica_only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.config)
			code, out, errOut := cli(t, "check", "-c", path)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, errOut)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr does not mention %q:\n%s", w, errOut)
				}
			}
			if !strings.Contains(errOut, "jobs.yaml") {
				t.Errorf("stderr does not name the file:\n%s", errOut)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		code, _, errOut := cli(t, "check", "-c", filepath.Join(t.TempDir(), "nope.yaml"))
		if code != exitUsage || !strings.Contains(errOut, "nope.yaml") {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
}

// TestCheckEachErrorOnItsOwnLine: several problems are reported on lines
// of their own.
func TestCheckEachErrorOnItsOwnLine(t *testing.T) {
	config := unreachable + `jobs:
  - name: a
    schedule: "61 * * * *"
    shell: "true"
  - name: b
    schedule: "@hourly"
    shell: "true"
    overlap: sometimes
`
	code, _, errOut := cli(t, "check", "-c", writeConfig(t, config))
	if code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) < 2 {
		t.Fatalf("want one line per error (2), got:\n%s", errOut)
	}
	var cron, overlap bool
	for _, l := range lines {
		cron = cron || strings.Contains(l, "61 *")
		overlap = overlap || strings.Contains(l, "sometimes")
		if strings.Contains(l, "61 *") && strings.Contains(l, "sometimes") {
			t.Errorf("two errors on one line: %q", l)
		}
	}
	if !cron || !overlap {
		t.Errorf("not every error reported:\n%s", errOut)
	}
}

func TestRunBadConfig(t *testing.T) {
	path := writeConfig(t, goodConfig+"no_such_key: 1\n")
	code, _, errOut := cli(t, "run", "-c", path)
	if code != exitUsage || !strings.Contains(errOut, "no_such_key") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

func TestTriggerUnknownJob(t *testing.T) {
	code, _, errOut := cli(t, "trigger", "-c", writeConfig(t, goodConfig), "nope")
	if code != exitUsage || !strings.Contains(errOut, `no job named "nope"`) {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

// TestTriggerNoQuorum: with no node reachable the job does not run and
// trigger fails with exit code 1.
func TestTriggerNoQuorum(t *testing.T) {
	t.Parallel()
	code, out, errOut := cli(t, "trigger", "a", "-c", writeConfig(t, goodConfig))
	if code != exitFailure {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitFailure, errOut)
	}
	if out != "" {
		t.Errorf("a record was printed although the job cannot have run:\n%s", out)
	}
}

// TestStatusNoQuorum: status still prints the tables, then fails.
func TestStatusNoQuorum(t *testing.T) {
	t.Parallel()
	code, out, errOut := cli(t, "status", "-c", writeConfig(t, goodConfig), "--timeout", "5s")
	if code != exitFailure || !strings.Contains(errOut, "no quorum") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	for _, w := range []string{"JOB", "a", "b", "NODE", "redis://127.0.0.1:1/0", "quorum LOST"} {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
}

// notes records sd_notify messages.
type notes struct {
	mu   sync.Mutex
	msgs []string
	ch   chan string
}

func newNotes() *notes { return &notes{ch: make(chan string, 100)} }

func (n *notes) notify(state string) error {
	n.mu.Lock()
	n.msgs = append(n.msgs, state)
	n.mu.Unlock()
	select {
	case n.ch <- state:
	default:
	}
	return nil
}

// await waits for a message starting with prefix.
func (n *notes) await(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m := <-n.ch:
			if strings.HasPrefix(m, prefix) {
				return m
			}
		case <-timeout:
			n.mu.Lock()
			defer n.mu.Unlock()
			t.Fatalf("no sd_notify %q within 30s; got %q", prefix, n.msgs)
		}
	}
}

// testDaemon is `leasecron run` in a goroutine of the test.
type testDaemon struct {
	notes  *notes
	stderr *syncBuffer
	cancel context.CancelFunc
	done   chan int
}

func startDaemon(t *testing.T, args ...string) *testDaemon {
	t.Helper()
	d := &testDaemon{notes: newNotes(), stderr: &syncBuffer{}, done: make(chan int, 1)}
	m := NewMain(io.Discard, d.stderr)
	m.notify = d.notes.notify
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() { d.done <- m.Run(ctx, append([]string{"run"}, args...)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-d.done:
		case <-time.After(60 * time.Second):
			t.Errorf("daemon did not stop within 60s")
		}
	})
	return d
}

// stop cancels the daemon's context and returns its exit code.
func (d *testDaemon) stop(t *testing.T) int {
	t.Helper()
	d.cancel()
	select {
	case code := <-d.done:
		d.done <- code // for Cleanup
		return code
	case <-time.After(60 * time.Second):
		t.Fatalf("daemon did not stop within 60s; log:\n%s", d.stderr)
		return -1
	}
}

// TestRunLifecycle: READY=1 after start, a clean exit with STOPPING=1 when
// stopped, also without Redis.
func TestRunLifecycle(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "-c", writeConfig(t, goodConfig), "--id", "cli-test")
	d.notes.await(t, "READY=1")
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d after a clean stop; log:\n%s", code, d.stderr)
	}
	d.notes.await(t, "STOPPING=1")
	if !strings.Contains(d.stderr.String(), "id=cli-test") {
		t.Errorf("--id not applied; log:\n%s", d.stderr)
	}
}

// TestRunReload: SIGHUP with a broken file keeps the daemon running and logs
// why; RELOADING=1 (with MONOTONIC_USEC) and READY=1 are sent either way.
func TestRunReload(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, goodConfig)
	d := startDaemon(t, "-c", path, "--log-format", "json")
	d.notes.await(t, "READY=1")

	if err := os.WriteFile(path, []byte(goodConfig+"no_such_key: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if m := d.notes.await(t, "RELOADING=1"); !strings.Contains(m, "MONOTONIC_USEC=") {
		t.Errorf("RELOADING=1 without MONOTONIC_USEC: %q", m)
	}
	d.notes.await(t, "READY=1")
	log := d.stderr.String()
	if !strings.Contains(log, "reload failed") || !strings.Contains(log, "no_such_key") {
		t.Errorf("the log does not say why the reload failed:\n%s", log)
	}

	if err := os.WriteFile(path, []byte(goodConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.notes.await(t, "RELOADING=1")
	d.notes.await(t, "READY=1")
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d; log:\n%s", code, d.stderr)
	}
	if !strings.Contains(d.stderr.String(), "config reloaded") {
		t.Errorf("the log does not show the good reload:\n%s", d.stderr)
	}
}

// metricsAddr waits for the daemon's start-up line and returns the address
// its metrics server bound (the tests pass --metrics 127.0.0.1:0, so that
// no other process can take a port chosen in advance).
func (d *testDaemon) metricsAddr(t *testing.T) string {
	t.Helper()
	re := regexp.MustCompile(`msg="leasecron starting".* metrics=(127\.0\.0\.1:[0-9]+)`)
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(d.stderr.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("no metrics address in the daemon's start-up line; log:\n%s", d.stderr)
	return ""
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRunMetrics: /metrics serves the scheduler's metrics, /healthz says
// 503 and why when no quorum is reachable.
func TestRunMetrics(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "-c", writeConfig(t, goodConfig), "--metrics", "127.0.0.1:0")
	d.notes.await(t, "READY=1")
	addr := d.metricsAddr(t)

	code, body := get(t, "http://"+addr+"/healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no quorum") {
		t.Errorf("/healthz without Redis: %d %q", code, body)
	}
	// It says how the jobs' processes are contained.
	if !regexp.MustCompile(`\ncontainment: (cgroup /|process tree)`).MatchString(body) {
		t.Errorf("/healthz does not say the containment: %q", body)
	}
	code, body = get(t, "http://"+addr+"/metrics")
	if code != http.StatusOK {
		t.Errorf("/metrics: %d", code)
	}
	for _, w := range []string{"leasecron_build_info{", "leasecron_quorum_healthy 0", "go_goroutines"} {
		if !strings.Contains(body, w) {
			t.Errorf("/metrics lacks %q", w)
		}
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d; log:\n%s", code, d.stderr)
	}
}

// TestRunMetricsAddressInUse: a metrics address that cannot be bound is a
// runtime failure at start.
func TestRunMetricsAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, errOut := cli(t, "run", "-c", writeConfig(t, goodConfig), "--metrics", ln.Addr().String())
	if code != exitFailure || !strings.Contains(errOut, "metrics") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		pos     []string
		config  string
		verbose bool
	}{
		{[]string{"-c", "f", "job"}, []string{"job"}, "f", false},
		{[]string{"job", "-c", "f"}, []string{"job"}, "f", false},
		{[]string{"job", "--config=f", "-v", "x"}, []string{"job", "x"}, "f", true},
		{[]string{"-v", "--", "-c", "f"}, []string{"-c", "f"}, defaultConfig, true},
		{nil, nil, defaultConfig, false},
	} {
		fs := newFlagSet("test")
		config := configFlag(fs)
		v := fs.Bool("v", false, "")
		pos, err := parseArgs(fs, tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if strings.Join(pos, "|") != strings.Join(tc.pos, "|") || *config != tc.config || *v != tc.verbose {
			t.Errorf("%q: pos %q config %q v %v; want %q %q %v", tc.args, pos, *config, *v, tc.pos, tc.config, tc.verbose)
		}
	}
}

func TestErrorLines(t *testing.T) {
	err := &configError{err: errors.Join(
		errors.New("f.yaml:3: jobs[0].schedule: bad"),
		errors.Join(errors.New("f.yaml:7: jobs[1].name: duplicate"), errors.New("two\nlines")),
	)}
	got := strings.Join(errorLines(err), "|")
	want := "f.yaml:3: jobs[0].schedule: bad|f.yaml:7: jobs[1].name: duplicate|two|lines"
	if got != want {
		t.Errorf("errorLines = %q, want %q", got, want)
	}
	var b bytes.Buffer
	printError(&b, "leasecron check", errors.New("one"))
	if b.String() != "leasecron check: one\n" {
		t.Errorf("printError of one error: %q", b.String())
	}
}

func TestFormatHolder(t *testing.T) {
	for in, want := range map[string]string{
		"":                           "",
		"tick=1700000000 host=web-1": "web-1, tick 2023-11-14T22:13:20Z",
		"tick=manual host=web-2":     "web-2, manual trigger",
		"something else":             "something else",
		"tick=notanumber host=x":     "tick=notanumber host=x",
	} {
		if got := formatHolder(in); got != want {
			t.Errorf("formatHolder(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCheckTestdata runs check on the config package's test files:
// bad_*.yaml must fail with exit code 2 and name the file, the others pass
// (warn_*.yaml with a warning).
func TestCheckTestdata(t *testing.T) {
	files, err := filepath.Glob("../../config/testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no config/testdata/*.yaml (%v)", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			code, out, errOut := cli(t, "check", "-c", f)
			switch {
			case strings.HasPrefix(name, "bad_"):
				if code != exitUsage || out != "" || !strings.Contains(errOut, f+":") {
					t.Errorf("exit %d, stdout %q, stderr:\n%s", code, out, errOut)
				}
			default:
				if code != 0 || !strings.HasPrefix(out, "ok: ") {
					t.Errorf("exit %d, stdout %q, stderr:\n%s", code, out, errOut)
				}
				if warn := strings.HasPrefix(name, "warn_"); warn != strings.HasPrefix(errOut, "warning: ") {
					t.Errorf("warnings: %q", errOut)
				}
			}
		})
	}
}
