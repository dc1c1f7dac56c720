// Package faultsuite is leasecron's fault suite: it runs a fleet as real
// processes — K store servers (Redis nodes, or a PostgreSQL, MariaDB,
// etcd or ZooKeeper cluster), H `leasecron run` daemons, and
// between every (daemon, node) pair its own TCP proxy so a single link can
// be delayed, blackholed or cut. The scheduled job is a small recorder
// program that appends what it saw (job, tick, host, fencing token, pid,
// start, heartbeats, end) to a log shared by the whole fleet; the oracle in
// oracle.go reads that log and checks the invariants leasecron promises.
//
// Everything here is bounded in time and kills only the processes it
// started: daemons by their PID, and leftover recorder jobs only after
// checking that the PID still runs the recorder with this fleet's log.
package faultsuite

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// Binaries are the programs a fleet runs, built once per test binary.
type Binaries struct {
	Leasecron string // the daemon, built from ./cmd/leasecron
	Recorder  string // the job, built from ./faultsuite/testdata/recorder
}

// Build compiles the daemon and the recorder into dir. With race set the
// daemon is built with the race detector, and a race it reports fails the
// test that ran it.
func Build(ctx context.Context, dir string, race bool) (Binaries, error) {
	b := Binaries{Leasecron: filepath.Join(dir, "leasecron"), Recorder: filepath.Join(dir, "recorder")}
	args := []string{"build"}
	if race {
		args = append(args, "-race")
	}
	for _, x := range []struct{ out, pkg string }{
		{b.Leasecron, "github.com/leasecron/leasecron/cmd/leasecron"},
		{b.Recorder, "github.com/leasecron/leasecron/faultsuite/testdata/recorder"},
	} {
		cmd := exec.CommandContext(ctx, "go", append(args, "-o", x.out, x.pkg)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return Binaries{}, fmt.Errorf("go build %s: %w\n%s", x.pkg, err, out)
		}
	}
	return b, nil
}

// Fleet is a running test fleet. Create it with New; it is torn down by the
// test's cleanup.
type Fleet struct {
	t    testing.TB
	bins Binaries
	cfg  Config

	Dir     string // the fleet's temporary directory
	LogPath string // the recorder jobs' shared log
	// CLIConfigPath is the config file of CLI commands (see CLI): the
	// fleet's jobs, with the store's servers reached directly.
	CLIConfigPath string

	Store   *Store
	Redis   *redistest.Cluster // the Redis nodes (nil on another backend)
	Daemons []*Daemon
	proxies [][]*netproxy.Proxy // [daemon][server]
	log     *HistoryLog         // the recorder log, read as it grows (set by New)

	// VotingAt is when the freshly started nodes have been up for a TTL
	// (plus a margin), so that the daemons' restart detection lets them vote.
	VotingAt time.Time
	// scheduleFrom caches ScheduleFrom.
	scheduleFrom time.Time
}

// New starts cfg.Nodes redis nodes and one proxy per (daemon, node), and
// writes every daemon's config file. The daemons are not started: call
// StartAll (or Daemon.Start).
func New(t testing.TB, bins Binaries, cfg Config) *Fleet {
	t.Helper()
	cfg.fill()
	dir := t.TempDir()
	f := &Fleet{t: t, bins: bins, cfg: cfg, Dir: dir, LogPath: filepath.Join(dir, "runs.jsonl")}
	f.log = &HistoryLog{Path: f.LogPath}
	f.Store, f.Redis = startStore(t, cfg)
	// A node that came up less than a TTL ago does not vote.
	f.VotingAt = time.Now().Add(cfg.TTL + time.Second)
	for i := 0; i < cfg.Daemons; i++ {
		var ps []*netproxy.Proxy
		for _, n := range f.Store.Servers {
			ps = append(ps, netproxy.New(t, n.Addr()))
		}
		f.proxies = append(f.proxies, ps)
		name := "h" + strconv.Itoa(i)
		d := &Daemon{
			f: f, Index: i, Name: name,
			ConfigPath: filepath.Join(dir, name+".yaml"),
			LogPath:    filepath.Join(dir, name+".log"),
		}
		if cfg.Args != nil {
			d.Args = cfg.Args(i)
		}
		if cfg.Labels != nil {
			d.Labels = cfg.Labels(i)
		}
		if cfg.MaxParallel != nil {
			d.MaxParallel = cfg.MaxParallel(i)
		}
		d.WriteConfig(cfg)
		f.Daemons = append(f.Daemons, d)
	}
	f.CLIConfigPath = filepath.Join(dir, "cli.yaml")
	f.WriteCLIConfig(cfg)
	t.Cleanup(f.cleanup)
	return f
}

// Config returns the fleet's config (with defaults filled in).
func (f *Fleet) Config() Config { return f.cfg }

// Proxy returns the link from daemon d to node n.
func (f *Fleet) Proxy(d, n int) *netproxy.Proxy { return f.proxies[d][n] }

// StartAll starts every daemon.
func (f *Fleet) StartAll() {
	f.t.Helper()
	for _, d := range f.Daemons {
		d.Start()
	}
}

// Daemon returns the daemon named host, or nil.
func (f *Fleet) Daemon(host string) *Daemon {
	for _, d := range f.Daemons {
		if d.Name == host {
			return d
		}
	}
	return nil
}

// WaitVoting sleeps until the nodes vote (see VotingAt) and the daemons
// started so far are ready (see ScheduleFrom).
func (f *Fleet) WaitVoting() {
	f.t.Helper()
	time.Sleep(time.Until(f.ScheduleFrom()))
}

// History reads the recorder log; it fails the test if it cannot.
func (f *Fleet) History() *History {
	f.t.Helper()
	h, err := f.log.Read()
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// WaitFor polls the history until cond holds and returns it, or fails the
// test with what after timeout.
func (f *Fleet) WaitFor(what string, timeout time.Duration, cond func(*History) bool) *History {
	f.t.Helper()
	end := time.Now().Add(timeout)
	for {
		h := f.History()
		if cond(h) {
			return h
		}
		if time.Now().After(end) {
			f.t.Fatalf("timed out after %s waiting for %s; runs so far:\n%s", timeout, what, h)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitRun waits for a run matching match and returns it.
func (f *Fleet) WaitRun(what string, timeout time.Duration, match func(Run) bool) Run {
	f.t.Helper()
	var found Run
	f.WaitFor(what, timeout, func(h *History) bool {
		for _, r := range h.Runs {
			if match(r) {
				found = r
				return true
			}
		}
		return false
	})
	return found
}

// CheckSafety fails the test if the history breaks a safety invariant and
// returns the history.
func (f *Fleet) CheckSafety() *History {
	f.t.Helper()
	h := f.History()
	if vs := h.SafetyRetries(f.retries); len(vs) > 0 {
		f.t.Errorf("safety violated:\n%sall runs:\n%s", FormatViolations(vs), h)
	}
	return h
}

// StopAll stops every running daemon with SIGTERM, concurrently, and waits.
func (f *Fleet) StopAll() {
	f.t.Helper()
	var wg sync.WaitGroup
	for _, d := range f.Daemons {
		if !d.Running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.stop(f.stopTimeout())
		}()
	}
	wg.Wait()
}

// stopTimeout bounds a graceful stop: shutdown grace, kill grace, the
// lease release and a generous margin for a loaded machine.
func (f *Fleet) stopTimeout() time.Duration {
	grace := f.cfg.ShutdownGrace
	if grace == 0 {
		grace = 30 * time.Second
	}
	return grace + f.cfg.KillGrace + f.cfg.TTL + 10*time.Second
}

// yaml renders the config file of daemon d.
func (f *Fleet) yaml(d *Daemon, c Config) []byte {
	addrs := make([]string, len(f.proxies[d.Index]))
	for i, p := range f.proxies[d.Index] {
		addrs[i] = p.Addr()
	}
	return f.render(d.Name, addrs, c)
}

// render renders a config file for name whose links to the servers
// listen on addrs.
func (f *Fleet) render(name string, addrs []string, c Config) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# fleet test config for %s\n", name)
	b.WriteString(f.Store.Section(addrs, c.Timeout))
	fmt.Fprintf(&b, "lease:\n  ttl: %s\n  renew: %s\n  drift: %g\n", c.TTL, c.Renew, c.Drift)
	if c.ShutdownGrace > 0 {
		fmt.Fprintf(&b, "shutdown_grace: %s\n", c.ShutdownGrace)
	}
	if c.Heartbeat > 0 {
		fmt.Fprintf(&b, "heartbeat: %s\n", c.Heartbeat)
	}
	fmt.Fprintf(&b, "defaults:\n  timezone: UTC\n  kill_grace: %s\n", c.KillGrace)
	b.WriteString("jobs:\n")
	for _, j := range c.Jobs {
		fmt.Fprintf(&b, "  - name: %s\n    schedule: %q\n", j.Name, "@every "+j.Every.String())
		cmd := []string{f.bins.Recorder, "--log", f.LogPath, "--sleep", j.Sleep.String()}
		if j.IgnoreTerm {
			cmd = append(cmd, "--ignore-term")
		}
		if j.Escapee > 0 {
			cmd = append(cmd, "--escapee", j.Escapee.String())
		}
		cmd = append(cmd, j.Fail.args()...)
		quoted := make([]string, len(cmd))
		for i, a := range cmd {
			quoted[i] = strconv.Quote(a)
		}
		fmt.Fprintf(&b, "    command: [%s]\n", strings.Join(quoted, ", "))
		if j.Deadline > 0 {
			fmt.Fprintf(&b, "    deadline: %s\n", j.Deadline)
		}
		if j.Timeout > 0 {
			fmt.Fprintf(&b, "    timeout: %s\n", j.Timeout)
		}
		if j.Overlap != "" {
			fmt.Fprintf(&b, "    overlap: %s\n", j.Overlap)
		}
		j.FleetKeys.write(&b)
		b.WriteString(j.Extra)
	}
	return b.Bytes()
}

// cleanup stops the daemons (gracefully, then by SIGKILL), checks that no
// job outlived its daemon, scans the daemons' logs for data races and, if
// the test failed, dumps the logs and the run history.
func (f *Fleet) cleanup() {
	t := f.t
	for _, d := range f.Daemons {
		d.mu.Lock()
		if d.paused && d.cmd != nil {
			_ = d.cmd.Process.Signal(syscall.SIGCONT)
			d.paused = false
		}
		d.mu.Unlock()
	}
	f.StopAll()
	// Jobs die with their daemon (graceful stop) or their supervisor
	// (daemon gone). Give stragglers a bounded moment, then kill them.
	h, err := f.log.Read()
	if err != nil {
		t.Error(err)
		h = &History{}
	}
	for _, r := range h.Runs {
		if _, gone := f.WaitGone(r.PID, 3*time.Second); !gone {
			if !f.cfg.Orphans {
				t.Errorf("job process outlived its daemon: %s", r)
			}
			f.killRecorder(r.PID)
		}
	}
	for _, d := range f.Daemons {
		if b, err := os.ReadFile(d.LogPath); err == nil && bytes.Contains(b, []byte("WARNING: DATA RACE")) {
			t.Errorf("daemon %s reported a data race; see its log below", d.Name)
		}
	}
	if t.Failed() {
		load, _ := os.ReadFile("/proc/loadavg") // timing failures often mean an overloaded host
		t.Logf("fleet dir %s; load average %s; runs:\n%s", f.Dir, strings.TrimSpace(string(load)), h)
		for _, d := range f.Daemons {
			t.Logf("=== log of daemon %s (%s), last 150 lines:\n%s", d.Name, d.LogPath, tail(d.LogPath, 150))
		}
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// isRecorder reports whether pid is alive (not a zombie) and runs this
// fleet's recorder, so a reused PID is never mistaken for a job.
func (f *Fleet) isRecorder(pid int) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// state is the field after the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return bytes.Contains(cmdline, []byte(f.bins.Recorder)) && bytes.Contains(cmdline, []byte(f.LogPath))
}

// JobAlive reports whether the recorder job with pid still runs.
func (f *Fleet) JobAlive(pid int) bool { return f.isRecorder(pid) }

// WaitGone waits up to timeout for the recorder job pid to be gone and
// returns how long that took.
func (f *Fleet) WaitGone(pid int, timeout time.Duration) (time.Duration, bool) {
	start := time.Now()
	for {
		if !f.isRecorder(pid) {
			return time.Since(start), true
		}
		if time.Since(start) > timeout {
			return time.Since(start), false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *Fleet) killRecorder(pid int) {
	if f.isRecorder(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// loadSlack is added to every AwaitTicks wait: on a loaded 2-core machine
// a run's last line can be logged seconds after its end.
const loadSlack = 15 * time.Second

// AwaitTicks waits until every tick of the @every job in [from, to] has
// run (to its end, with exactlyOnce), at most until slack after to, then
// fails the test for each tick that did not, and returns the history.
func (f *Fleet) AwaitTicks(job string, every time.Duration, from, to time.Time, exactlyOnce bool, slack time.Duration) *History {
	f.t.Helper()
	// The wait is for the runs to be logged, which a loaded machine
	// delays; waiting longer costs time only when a tick is missing.
	end := to.Add(slack + loadSlack)
	for {
		h := f.History()
		vs := h.Liveness(job, every, from, to, exactlyOnce)
		if len(vs) == 0 {
			return h
		}
		if time.Now().After(end) {
			f.t.Errorf("liveness of %s in [%s, %s]:\n%sall runs:\n%s", job, fmtT(from), fmtT(to), FormatViolations(vs), h)
			return h
		}
		time.Sleep(50 * time.Millisecond)
	}
}
