//go:build linux

package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The helper daemon: the test binary run with LEASECRON_TEST_DAEMON=1 acts
// as a leasecron daemon in its own process. It starts a supervised job
// (sh ignoring SIGTERM, with a background `sleep 100`), keeps extending its
// deadline to now+LEASECRON_TEST_WINDOW every 100ms, like a daemon renewing
// a lease, and prints on stdout:
//
//	job <pid of sh>
//	sup <pid of the supervisor>
//	child <pid of sleep 100>
//	exit <JSON helperExit>        when the job has ended
const (
	helperEnv       = "LEASECRON_TEST_DAEMON"
	helperWindowEnv = "LEASECRON_TEST_WINDOW"
	helperGraceEnv  = "LEASECRON_TEST_GRACE"
)

type helperExit struct {
	Exit
	Err string
}

func helperDaemon() int {
	window, err1 := time.ParseDuration(os.Getenv(helperWindowEnv))
	grace, err2 := time.ParseDuration(os.Getenv(helperGraceEnv))
	self, err3 := os.Executable()
	if err1 != nil || err2 != nil || err3 != nil {
		fmt.Fprintln(os.Stderr, "helper daemon: bad setup:", err1, err2, err3)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Start(ctx, self, Spec{
		Path:      "/bin/sh",
		Args:      []string{"-c", "trap '' TERM; sleep 100 & echo $!; wait"},
		KillGrace: grace,
		Deadline:  BootNow() + int64(window),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper daemon:", err)
		return 1
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	stdout := bufio.NewReader(p.Stdout())
	child, err := stdout.ReadString('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper daemon: read child pid:", err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	fmt.Printf("job %d\nsup %d\nchild %s\n", p.JobPID(), p.SupervisorPID(), strings.TrimSpace(child))

	done := make(chan struct{})
	extended := make(chan struct{})
	go func() {
		defer close(extended)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				_ = p.Extend(BootNow() + int64(window))
			}
		}
	}()
	exit, err := p.Wait()
	close(done)
	<-extended
	he := helperExit{Exit: exit}
	if err != nil {
		he.Err = err.Error()
	}
	b, _ := json.Marshal(he)
	fmt.Printf("exit %s\n", b)
	return 0
}

// helper is a running helper daemon, seen from the test.
type helper struct {
	cmd             *exec.Cmd
	lines           chan string
	job, sup, child int
}

func startHelper(t *testing.T, window, grace time.Duration) *helper {
	t.Helper()
	cmd := exec.Command(testSelf(t))
	cmd.Env = append(os.Environ(), helperEnv+"=1",
		helperWindowEnv+"="+window.String(), helperGraceEnv+"="+grace.String())
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		defer close(h.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		// Only what this test started: the helper (through its
		// os.Process) and, if still there, the job, its child and the
		// supervisor, checked by name.
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		for range h.lines {
		}
		_ = cmd.Wait()
		killIfNamed(h.child, "sleep")
		killIfNamed(h.job, "sh")
		killIfNamed(h.sup, filepath.Base(testSelf(t)))
	})
	for _, want := range []struct {
		key string
		dst *int
	}{{"job", &h.job}, {"sup", &h.sup}, {"child", &h.child}} {
		line := h.next(t, 30*time.Second)
		key, val, _ := strings.Cut(line, " ")
		if key != want.key {
			t.Fatalf("helper said %q, want %s <pid>", line, want.key)
		}
		*want.dst = atoi(t, val)
	}
	return h
}

func (h *helper) next(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			t.Fatal("helper daemon exited")
		}
		return l
	case <-time.After(timeout):
		t.Fatalf("helper daemon silent for %v", timeout)
	}
	return ""
}

// exit reads the helper's exit report.
func (h *helper) exit(t *testing.T, timeout time.Duration) helperExit {
	t.Helper()
	line := h.next(t, timeout)
	js, ok := strings.CutPrefix(line, "exit ")
	if !ok {
		t.Fatalf("helper said %q, want exit report", line)
	}
	var he helperExit
	if err := json.Unmarshal([]byte(js), &he); err != nil {
		t.Fatal(err)
	}
	return he
}

// killIfNamed SIGKILLs pid if it is alive and its command name is comm
// (comm is truncated to 15 bytes by the kernel).
func killIfNamed(pid int, comm string) {
	if pid <= 0 || isDead(pid) {
		return
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(b)) != comm[:min(len(comm), 15)] {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// waitStopped waits until every thread of pid is stopped.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		stopped := len(tasks) > 0
		for _, task := range tasks {
			b, err := os.ReadFile(task)
			s := string(b)
			i := strings.LastIndexByte(s, ')')
			if err != nil || i < 0 || i+2 >= len(s) || (s[i+2] != 'T' && s[i+2] != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("process %d not stopped after SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// The key property: a daemon that is paused (SIGSTOP) stops extending the
// deadline, and the supervisor kills the job by the last deadline the
// daemon wrote — at most window after the daemon stopped — plus KillSlack.
func TestDaemonSIGSTOP(t *testing.T) {
	const window = 1500 * time.Millisecond
	start := BootNow()
	h := startHelper(t, window, 500*time.Millisecond)

	// While the daemon runs, it extends: the job outlives its first deadline.
	time.Sleep(time.Duration(start + int64(window+time.Second) - BootNow()))
	if isDead(h.job) || isDead(h.child) {
		t.Fatal("job died while the daemon was extending its deadline")
	}

	if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, h.cmd.Process.Pid)
	stopped := BootNow()
	// Every deadline the daemon wrote was computed before it stopped.
	bound := stopped + int64(window) + int64(KillSlack)
	time.Sleep(time.Duration(bound - BootNow()))
	jobDead, childDead := isDead(h.job), isDead(h.child)
	if err := h.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if !jobDead || !childDead {
		t.Errorf("%v after the daemon stopped: job dead %v, child dead %v; want both dead",
			window+KillSlack, jobDead, childDead)
	}

	he := h.exit(t, 30*time.Second)
	if he.Err != "" || he.Reason != ReasonDeadline || he.Signal != "SIGKILL" {
		t.Errorf("exit = %+v, want SIGKILL for the deadline", he)
	}
	if he.DeadTime <= stopped || he.DeadTime > bound {
		t.Errorf("job dead %v after the daemon stopped, want in (0, %v]",
			time.Duration(he.DeadTime-stopped), window+KillSlack)
	}
}

// A SIGKILLed daemon closes the control pipe: the supervisor kills the job
// after KillGrace, long before its deadline.
func TestDaemonSIGKILL(t *testing.T) {
	h := startHelper(t, time.Minute, time.Second)
	killed := time.Now()
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitDead(t, h.job, 20*time.Second)
	waitDead(t, h.child, 20*time.Second)
	if d := time.Since(killed); d > 20*time.Second {
		t.Errorf("job dead %v after the daemon was killed", d)
	}
	waitDead(t, h.sup, 20*time.Second)
}
