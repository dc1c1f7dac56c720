package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/supervisor"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// lossTTL is the lease TTL of the tests in this file.
const lossTTL = 3 * time.Second

// procDaemon is `leasecron run` in a process of its own (the test binary
// acting as the CLI), so that its supervisors are its children and its CPU
// time is its own.
type procDaemon struct {
	cmd *exec.Cmd
	log string // path of its stderr
	out string // directory the jobs write to
}

// startProcDaemon starts a daemon on one new redis-server with a single
// job running shell, every second, with the given timeout (0: none), and
// extra environment variables for the daemon.
func startProcDaemon(t *testing.T, shell string, timeout time.Duration, env ...string) *procDaemon {
	t.Helper()
	nodes := redistest.Start(t, 1)
	dir := t.TempDir()
	timeoutLine := ""
	if timeout > 0 {
		timeoutLine = fmt.Sprintf("    timeout: %s\n", timeout)
	}
	cfg := fmt.Sprintf(`redis:
  nodes: [%q]
lease:
  ttl: %s
  renew: 500ms
shutdown_grace: 1s
jobs:
  - name: lost
    schedule: "@every 1s"
    kill_grace: 500ms
%s    shell: %q
`, nodes.URLs()[0], lossTTL, timeoutLine, strings.ReplaceAll(shell, "OUT", dir))
	d := &procDaemon{log: filepath.Join(dir, "daemon.log"), out: dir}
	logf, err := os.Create(d.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	d.cmd = exec.Command(os.Args[0], "run", "-c", writeConfig(t, cfg), "--id", "loss-host")
	d.cmd.Env = append(os.Environ(), append([]string{cliEnv + "=1"}, env...)...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = d.cmd.Process.Kill()
			<-done
			t.Errorf("daemon did not stop within 60s after SIGTERM")
		}
	})
	return d
}

// logText returns the daemon's log so far.
func (d *procDaemon) logText() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

// runs returns the job leaders' pids (= process group ids) in the order the
// runs started; each run appends its $$ to OUT/runs.
func (d *procDaemon) runs() []int {
	b, _ := os.ReadFile(filepath.Join(d.out, "runs"))
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// firstRun waits for the first run and returns its job leader's pid and
// its supervisor's pid (checked to be the daemon's child).
func (d *procDaemon) firstRun(t *testing.T) (job, sup int) {
	t.Helper()
	// The node is new: it votes only after one TTL (restart guard).
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if r := d.runs(); len(r) > 0 {
			job = r[0]
			break
		}
	}
	if job == 0 {
		t.Fatalf("no run within 30s; log:\n%s", d.logText())
	}
	st, ok := readStat(job)
	if !ok {
		t.Fatalf("job %d gone already", job)
	}
	sup = st.ppid
	if st2, ok := readStat(sup); !ok || st2.ppid != d.cmd.Process.Pid {
		t.Fatalf("job %d's parent %d is not a child of the daemon %d", job, sup, d.cmd.Process.Pid)
	}
	return job, sup
}

// stat is what the tests read from /proc/PID/stat.
type stat struct {
	state      byte
	ppid, pgid int
	cpu        time.Duration // utime + stime
}

// readStat reads /proc/pid/stat; ok is false if pid is gone.
func readStat(pid int) (stat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return stat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): ppid 4, pgrp 5, utime 14, stime 15.
	if len(f) < 13 {
		return stat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgid, _ := strconv.Atoi(f[2])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stt, _ := strconv.ParseInt(f[12], 10, 64)
	// USER_HZ is 100 on every Linux architecture Go supports.
	return stat{state: f[0][0], ppid: ppid, pgid: pgid, cpu: time.Duration(ut+stt) * 10 * time.Millisecond}, true
}

// liveMembers lists the live (not zombie) processes of process group pgid.
func liveMembers(pgid int) []int {
	names, _ := filepath.Glob("/proc/[0-9]*")
	var live []int
	for _, n := range names {
		pid, err := strconv.Atoi(filepath.Base(n))
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.pgid == pgid && st.state != 'Z' && st.state != 'X' {
			live = append(live, pid)
		}
	}
	return live
}

// killGroupAtEnd SIGKILLs what is left of the job's group when the test
// ends (only the negative control leaves anything).
func killGroupAtEnd(t *testing.T, pgid int) {
	t.Cleanup(func() {
		if len(liveMembers(pgid)) > 0 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	})
}

// lossOutcome is what supervisorLossScenario observed.
type lossOutcome struct {
	pgid      int
	killedAt  time.Time
	deadAt    time.Time // when the group was first seen without a live member; zero if never
	overlap   bool      // a later run started while a member of the group lived
	laterRuns int
}

// supervisorLossScenario runs an orphaning job (`sleep 300 & sleep 301`:
// the children keep the job's stdout open), SIGKILLs its supervisor, and
// watches the job's process group and the runs that follow for TTL + 4s.
func supervisorLossScenario(t *testing.T, env ...string) (*procDaemon, lossOutcome) {
	d := startProcDaemon(t, `echo $$ >> OUT/runs; sleep 300 & sleep 301`, 3*time.Second, env...)
	job, sup := d.firstRun(t)
	killGroupAtEnd(t, job)
	o := lossOutcome{pgid: job}
	// Let the children start (sh forks them at once).
	for end := time.Now().Add(10 * time.Second); len(liveMembers(job)) < 3 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(liveMembers(job)); n < 3 {
		t.Fatalf("job group %d has %d live processes, want sh and two sleeps", job, n)
	}
	o.killedAt = time.Now()
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for end := o.killedAt.Add(lossTTL + 4*time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		// Once the group is dead it is scanned again only when a later
		// run starts: nothing in the daemon's session moves a process
		// into it, and the overlap check still gets its own reading.
		later := len(d.runs()) - 1
		alive := (o.deadAt.IsZero() || later > o.laterRuns) && len(liveMembers(job)) > 0
		if !alive && o.deadAt.IsZero() {
			o.deadAt = time.Now()
		}
		if later > o.laterRuns && alive {
			o.overlap = true
		}
		o.laterRuns = later
	}
	return d, o
}

// TestSupervisorSIGKILLKillsJobGroup: when a job's
// supervisor is SIGKILLed, the daemon kills the job's whole process group
// at once — also the children that hold its stdout open — well before the
// lease's validity (at most TTL after the kill) ends, records the run as
// aborted without completing the tick, and the next run starts only after
// the group is dead.
func TestSupervisorSIGKILLKillsJobGroup(t *testing.T) {
	t.Parallel()
	d, o := supervisorLossScenario(t)
	if o.deadAt.IsZero() {
		t.Fatalf("job group %d still has live processes %v, %v after its supervisor was SIGKILLed; log:\n%s",
			o.pgid, liveMembers(o.pgid), time.Since(o.killedAt).Round(time.Millisecond), d.logText())
	}
	took := o.deadAt.Sub(o.killedAt)
	t.Logf("job group dead %v after its supervisor was SIGKILLed; %d later runs", took.Round(time.Millisecond), o.laterRuns)
	// Safety: the lease valid at the kill ends at most TTL later.
	if took >= lossTTL {
		t.Errorf("job group dead only %v after the supervisor's death, not before the lease's validity (TTL %v)", took, lossTTL)
	}
	if o.overlap {
		t.Errorf("a later run started while job group %d was alive", o.pgid)
	}
	if o.laterRuns == 0 {
		t.Errorf("no later run within TTL+4s: the lease was not released; log:\n%s", d.logText())
	}
	log := d.logText()
	if !strings.Contains(log, "result=aborted") || !strings.Contains(log, "supervisor died without a report") {
		t.Errorf("the run is not recorded as aborted after the supervisor's loss; log:\n%s", log)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "job finished") && strings.Contains(line, "result=aborted") && !strings.Contains(line, "completed=false") {
			t.Errorf("an aborted run completed its tick: %s", line)
		}
	}
}

// TestNegativeControlNoLostGroupKill: with the daemon's group kill on
// supervisor loss switched off (supervisor.NoLostGroupKillEnv), the same
// scenario finds the job's children alive past the lease's TTL and a later
// run beside them.
func TestNegativeControlNoLostGroupKill(t *testing.T) {
	t.Parallel()
	d, o := supervisorLossScenario(t, supervisor.NoLostGroupKillEnv+"=1")
	if !o.deadAt.IsZero() && o.deadAt.Sub(o.killedAt) < lossTTL {
		t.Fatalf("job group died %v after its supervisor without the daemon's kill: the check cannot fail", o.deadAt.Sub(o.killedAt))
	}
	if !o.overlap {
		t.Errorf("no later run overlapped the surviving job group; %d later runs; log:\n%s", o.laterRuns, d.logText())
	}
	t.Logf("negative control: job group %d alive %v after the kill, overlap %v", o.pgid, time.Since(o.killedAt).Round(time.Millisecond), o.overlap)
}

// TestRunLeasedNoBusyLoop: once the lease's hold has
// ended (here: its maximum lifetime, timeout + kill_grace + 1s) while the
// job lingers (its supervisor is SIGSTOPped, so nothing reports its end),
// the daemon waits for the job without burning CPU, measured as the
// daemon's CPU time (/proc/PID/stat) over a window.
func TestRunLeasedNoBusyLoop(t *testing.T) {
	t.Parallel()
	d := startProcDaemon(t, `echo $$ >> OUT/runs; exec sleep 300`, time.Second)
	job, sup := d.firstRun(t)
	killGroupAtEnd(t, job)
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(sup, syscall.SIGCONT) })
	// The timeout (1s) asks the stopped supervisor to stop the job; the
	// hold ends 1s + 500ms + 1s after the start, 1.5s after the timeout.
	for end := time.Now().Add(30 * time.Second); !strings.Contains(d.logText(), "job timed out"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the job did not time out within 30s; log:\n%s", d.logText())
		}
	}
	time.Sleep(2 * time.Second)
	pid := d.cmd.Process.Pid
	const window = 3 * time.Second
	before, ok1 := readStat(pid)
	start := time.Now()
	time.Sleep(window)
	after, ok2 := readStat(pid)
	elapsed := time.Since(start)
	if !ok1 || !ok2 {
		t.Fatal(errors.New("daemon gone"))
	}
	used := after.cpu - before.cpu
	t.Logf("daemon CPU time %v over %v while the job lingers after its hold ended", used, elapsed.Round(time.Millisecond))
	// An idle daemon uses a few ms; a busy loop, a large share of a core
	// even on a loaded host.
	if used > elapsed*15/100 {
		t.Errorf("daemon used %v of CPU in %v while waiting for a lingering job: a busy loop", used, elapsed.Round(time.Millisecond))
	}
}

// openStdoutPipe opens for writing the pipe that is pid's stdout. While
// the shell runs the `echo $$ >> OUT/runs` that told the test its pid,
// its fd 1 is that file (a builtin's redirection): what is opened is
// kept only once it is a pipe.
func openStdoutPipe(t *testing.T, pid int) *os.File {
	t.Helper()
	path := filepath.Join("/proc", strconv.Itoa(pid), "fd", "1")
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatalf("open the stdout of job %d: %v", pid, err)
		}
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
			return f
		}
		_ = f.Close()
		if time.Now().After(end) {
			t.Fatalf("the stdout of job %d is not a pipe after 5s", pid)
		}
	}
}

// TestJobOutputHeldOutsideGroup: a process outside the job's tree (here
// the test itself, through /proc/PID/fd/1) holds the job's stdout open
// after the job has exited. The run still ends — its output is closed
// after a short drain — and the next run starts; the daemon does not wait
// for an EOF that never comes, renewing the lease forever.
func TestJobOutputHeldOutsideGroup(t *testing.T) {
	t.Parallel()
	d := startProcDaemon(t, `echo $$ >> OUT/runs; sleep 1`, 0)
	job, _ := d.firstRun(t)
	held := openStdoutPipe(t, job)
	defer held.Close()
	for end := time.Now().Add(20 * time.Second); len(d.runs()) < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no second run within 20s while the first run's stdout is held open; log:\n%s", d.logText())
		}
	}
	log := d.logText()
	if !strings.Contains(log, "job's output is still open after it ended") {
		t.Errorf("no warning about the held output; log:\n%s", log)
	}
	if !strings.Contains(log, "result=ok") {
		t.Errorf("the first run did not finish ok; log:\n%s", log)
	}
}
