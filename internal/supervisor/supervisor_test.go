//go:build linux

package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// isDead reports whether pid is gone or a zombie.
func isDead(pid int) bool {
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return true
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// waitDead polls until pid is dead, failing after timeout. It reaps pid if
// it is an orphan that was re-parented to the test process.
func waitDead(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	end := time.Now().Add(timeout)
	for !isDead(pid) || reapOrphan(pid) {
		if time.Now().After(end) {
			t.Fatalf("process %d still alive after %v", pid, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reapOrphan reaps pid if it is an exited child of the test process, and
// reports whether it did.
func reapOrphan(pid int) bool {
	var ws unix.WaitStatus
	got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	return err == nil && got == pid
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("not a pid: %q", s)
	}
	return n
}

func TestDocumentedDefaults(t *testing.T) {
	if KillSlack != 100*time.Millisecond {
		t.Errorf("KillSlack = %v, documented 100ms", KillSlack)
	}
	if ConfirmTimeout != 10*time.Second {
		t.Errorf("ConfirmTimeout = %v, documented 10s", ConfirmTimeout)
	}
	if controlWriteTimeout != 100*time.Millisecond {
		t.Errorf("controlWriteTimeout = %v, documented 100ms", controlWriteTimeout)
	}
	if Arg != "__supervise" {
		t.Errorf("Arg = %q", Arg)
	}
}

func TestBootClock(t *testing.T) {
	start, m0 := time.Now(), BootNow()
	time.Sleep(20 * time.Millisecond)
	goElapsed, monoElapsed := time.Since(start), time.Duration(BootNow()-m0)
	if d := monoElapsed - goElapsed; d < -5*time.Millisecond || d > 5*time.Millisecond {
		t.Errorf("CLOCK_BOOTTIME elapsed %v, Go elapsed %v", monoElapsed, goElapsed)
	}
	d := time.Duration(BootDeadline(time.Now().Add(time.Second)) - BootNow())
	if d <= 900*time.Millisecond || d > time.Second {
		t.Errorf("BootDeadline(now+1s) is %v from now", d)
	}
	if got := time.Until(bootTime(BootNow() + int64(time.Second))); got <= 900*time.Millisecond || got > time.Second {
		t.Errorf("bootTime(now+1s) is %v from now", got)
	}
}

func TestParseControl(t *testing.T) {
	for _, tc := range []struct {
		line string
		want controlMsg
		ok   bool
	}{
		{"deadline 123\n", controlMsg{msgDeadline, 123}, true},
		{"term 5000000", controlMsg{msgTerm, 5000000}, true},
		{"deadline", controlMsg{}, false},
		{"deadline x", controlMsg{}, false},
		{"stop 1", controlMsg{}, false},
		{"", controlMsg{}, false},
	} {
		got, err := parseControl(tc.line)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseControl(%q) = %+v, %v; want %+v, ok=%v", tc.line, got, err, tc.want, tc.ok)
		}
	}
	if got, _ := parseControl(string(formatControl(msgDeadline, 42))); got != (controlMsg{msgDeadline, 42}) {
		t.Errorf("formatControl round trip: %+v", got)
	}
}

func TestExitCodeAndOutput(t *testing.T) {
	p, out := startShell(t, "echo hello; echo world; echo oops >&2; exit 42",
		time.Second, BootDeadline(time.Now().Add(time.Minute)))
	if p.JobPID() <= 0 || p.SupervisorPID() <= 0 || p.JobPID() == p.SupervisorPID() {
		t.Fatalf("pids: job %d supervisor %d", p.JobPID(), p.SupervisorPID())
	}
	if got := out.rest(t, 10*time.Second); strings.Join(got, "|") != "hello|world" {
		t.Errorf("stdout = %q", got)
	}
	if got := <-out.stderr; got != "oops\n" {
		t.Errorf("stderr = %q", got)
	}
	exit, err := waitExit(t, p, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Code != 42 || exit.Signal != "" || exit.Reason != ReasonExited {
		t.Errorf("exit = %+v, want code 42, reason exited", exit)
	}
	if exit.DeadTime == 0 || exit.Started.IsZero() || exit.Ended.Before(exit.Started) {
		t.Errorf("exit times = %+v", exit)
	}
	// Wait is repeatable; Extend and Terminate after it say the pipe is closed.
	if again, err := p.Wait(); err != nil || again != exit {
		t.Errorf("second Wait = %+v, %v", again, err)
	}
	if err := p.Extend(BootNow()); !errors.Is(err, ErrClosed) {
		t.Errorf("Extend after Wait = %v, want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close after Wait = %v", err)
	}
}

// The job ignores SIGTERM (it prints when it gets one): it must get SIGTERM
// at deadline-KillGrace and be dead no later than deadline+KillSlack.
// KillSlack is a safety bound, not a speed target. The SIGTERM is due
// 2.5 s after the start, so that a loaded machine has set the trap by then.
func TestDeadlineKillsJobIgnoringTERM(t *testing.T) {
	deadline := BootNow() + int64(3*time.Second)
	p, out := startShell(t, `trap 'echo got-term' TERM; echo ready; while :; do sleep 0.05; done`,
		500*time.Millisecond, deadline)
	if l := out.next(t, 10*time.Second); l != "ready" {
		t.Fatalf("first line %q", l)
	}
	exit, err := waitExit(t, p, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Reason != ReasonDeadline || exit.Signal != "SIGKILL" || exit.Code != 128+9 {
		t.Errorf("exit = %+v, want SIGKILL for the deadline", exit)
	}
	if exit.DeadTime < deadline {
		t.Errorf("job killed %v before its deadline", time.Duration(deadline-exit.DeadTime))
	}
	if late := time.Duration(exit.DeadTime - deadline); late > KillSlack {
		t.Errorf("job dead %v after its deadline, more than KillSlack %v (SIGKILL sent at deadline+%v)",
			late, KillSlack, time.Duration(exit.KillTime-deadline))
	}
	t.Logf("SIGTERM at deadline%+v, SIGKILL at deadline+%v, dead at deadline+%v",
		time.Duration(exit.TermTime-deadline), time.Duration(exit.KillTime-deadline), time.Duration(exit.DeadTime-deadline))
	if rest := out.rest(t, 10*time.Second); !strings.Contains(strings.Join(rest, "\n"), "got-term") {
		t.Errorf("job did not get SIGTERM before SIGKILL; stdout %q", rest)
	}
}

func TestExtendMovesDeadline(t *testing.T) {
	first := BootNow() + int64(time.Second)
	p, _ := startShell(t, "sleep 2; exit 3", 200*time.Millisecond, first)
	if err := p.Extend(BootNow() + int64(time.Minute)); err != nil {
		t.Fatal(err)
	}
	exit, err := waitExit(t, p, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Code != 3 || exit.Reason != ReasonExited {
		t.Errorf("exit = %+v, want code 3, reason exited", exit)
	}
	if exit.DeadTime <= first {
		t.Errorf("job ended %v before its first deadline, want after", time.Duration(first-exit.DeadTime))
	}
}

// The latest deadline written wins, also when it is earlier.
func TestExtendEarlierDeadlineWins(t *testing.T) {
	p, _ := startShell(t, "trap '' TERM; sleep 100", 300*time.Millisecond,
		BootNow()+int64(time.Minute))
	if err := p.Extend(BootNow() + int64(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	deadline := BootNow() + int64(time.Second)
	if err := p.Extend(deadline); err != nil {
		t.Fatal(err)
	}
	exit, err := waitExit(t, p, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Reason != ReasonDeadline || exit.Signal != "SIGKILL" {
		t.Errorf("exit = %+v, want SIGKILL for the deadline", exit)
	}
	if exit.DeadTime < deadline || exit.DeadTime > deadline+int64(KillSlack) {
		t.Errorf("job dead at deadline%+v, want within [0, %v]", time.Duration(exit.DeadTime-deadline), KillSlack)
	}
}

// Everything the job started dies with it: background children left
// behind, children that left the group with setsid, and children of a job
// killed at its deadline.
func TestDescendantsKilled(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		reason       string
	}{
		{"leader exits", "sleep 100 & echo $!; exit 0", ReasonExited},
		{"setsid escapee", "setsid sleep 100 & echo $!; sleep 0.2; exit 0", ReasonExited},
		{"deadline", "trap '' TERM; sleep 100 & echo $!; wait", ReasonDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, out := startShell(t, tc.script, 200*time.Millisecond, BootNow()+int64(2*time.Second))
			child := atoi(t, out.next(t, 10*time.Second))
			exit, err := waitExit(t, p, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if exit.Reason != tc.reason {
				t.Errorf("exit = %+v, want reason %s", exit, tc.reason)
			}
			if !isDead(child) {
				t.Errorf("child %d of the job still alive after Wait", child)
			}
			out.rest(t, 10*time.Second) // stdout reaches EOF: no holder left
		})
	}
}

// Close is what the daemon's death looks like: the job is killed at once
// (SIGTERM, then SIGKILL after KillGrace), long before its deadline.
func TestCloseKillsJob(t *testing.T) {
	deadline := BootNow() + int64(time.Minute)
	p, out := startShell(t, "trap '' TERM; echo ready; sleep 100", 500*time.Millisecond, deadline)
	out.next(t, 10*time.Second)
	closed := BootNow()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	exit, err := waitExit(t, p, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Reason != ReasonDaemonGone || exit.Signal != "SIGKILL" {
		t.Errorf("exit = %+v, want SIGKILL, daemon-gone", exit)
	}
	if d := time.Duration(exit.DeadTime - closed); d < 500*time.Millisecond || d > 10*time.Second {
		t.Errorf("job dead %v after Close, want KillGrace (500ms) and well before the deadline", d)
	}
	if err := p.Extend(deadline); !errors.Is(err, ErrClosed) {
		t.Errorf("Extend after Close = %v, want ErrClosed", err)
	}
}

// Close when less than KillGrace is left (the job has had its SIGTERM
// already): SIGKILL comes at the deadline, not KillGrace after Close.
//
// The SIGTERM is due 2.5 s after the start, so that a loaded machine has
// set the job's trap by then; Close comes 1 s before the deadline.
func TestCloseNearDeadline(t *testing.T) {
	start := BootNow()
	deadline := start + int64(4*time.Second)
	p, out := startShell(t, "trap 'echo got-term' TERM; echo ready; while :; do sleep 0.05; done",
		1500*time.Millisecond, deadline)
	out.next(t, 10*time.Second)
	time.Sleep(time.Duration(deadline - int64(time.Second) - BootNow()))
	_ = p.Close()
	exit, err := waitExit(t, p, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Signal != "SIGKILL" || exit.DeadTime < deadline || exit.DeadTime > deadline+int64(KillSlack) {
		t.Errorf("exit = %+v, dead at deadline%+v; want SIGKILL in [deadline, deadline+%v]",
			exit, time.Duration(exit.DeadTime-deadline), KillSlack)
	}
}

func TestTerminate(t *testing.T) {
	t.Run("job exits on SIGTERM", func(t *testing.T) {
		p, out := startShell(t, "trap 'exit 7' TERM; echo ready; sleep 100 & wait",
			time.Second, BootNow()+int64(time.Minute))
		out.next(t, 10*time.Second)
		if err := p.Terminate(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		exit, err := waitExit(t, p, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if exit.Code != 7 || exit.Reason != ReasonTerminated {
			t.Errorf("exit = %+v, want code 7, terminated", exit)
		}
	})
	t.Run("job ignores SIGTERM", func(t *testing.T) {
		p, out := startShell(t, "trap '' TERM; echo ready; sleep 100",
			time.Second, BootNow()+int64(time.Minute))
		out.next(t, 10*time.Second)
		sent := BootNow()
		if err := p.Terminate(300 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		exit, err := waitExit(t, p, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if exit.Signal != "SIGKILL" || exit.Reason != ReasonTerminated {
			t.Errorf("exit = %+v, want SIGKILL, terminated", exit)
		}
		if d := time.Duration(exit.DeadTime - sent); d < 300*time.Millisecond {
			t.Errorf("job dead %v after Terminate(300ms)", d)
		}
	})
}

// The supervisor ignores SIGINT and SIGHUP, and forwards SIGTERM.
func TestSupervisorSignals(t *testing.T) {
	p, out := startShell(t, "trap 'exit 9' TERM; echo ready; sleep 100 & wait",
		time.Second, BootNow()+int64(time.Minute))
	out.next(t, 10*time.Second)
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGHUP} {
		if err := p.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if isDead(p.JobPID()) || isDead(p.SupervisorPID()) {
		t.Fatal("SIGINT/SIGHUP to the supervisor ended the job")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exit, err := waitExit(t, p, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Code != 9 || exit.Reason != ReasonTerminated {
		t.Errorf("exit = %+v, want code 9, terminated", exit)
	}
}

// A SIGKILLed supervisor takes the job leader with it (parent-death
// signal), and Wait kills what is left of the group.
func TestSupervisorKilled(t *testing.T) {
	p, out := startShell(t, "sleep 100 & echo $!; wait", time.Second, BootNow()+int64(time.Minute))
	child := atoi(t, out.next(t, 10*time.Second))
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	exit, err := waitExit(t, p, 30*time.Second)
	if !errors.Is(err, ErrSupervisorLost) || exit.Reason != ReasonSupervisorLost {
		t.Fatalf("Wait = %+v, %v; want ErrSupervisorLost", exit, err)
	}
	waitDead(t, p.JobPID(), 10*time.Second)
	waitDead(t, child, 10*time.Second)
}

func TestStartErrors(t *testing.T) {
	ctx := context.Background()
	self := testSelf(t)
	future := BootNow() + int64(time.Minute)
	for _, tc := range []struct {
		name string
		self string
		spec Spec
		want error
	}{
		{"deadline passed", self, Spec{Path: "/bin/true", Deadline: BootNow() - 1}, ErrDeadlinePassed},
		{"no such program", self, Spec{Path: "/nonexistent/prog", Deadline: future}, ErrStart},
		{"not in PATH", self, Spec{Path: "leasecron-no-such-program", Deadline: future}, ErrStart},
		{"bad dir", self, Spec{Path: "/bin/true", Dir: "/nonexistent", Deadline: future}, ErrStart},
		{"empty path", self, Spec{Deadline: future}, ErrInvalidSpec},
		{"negative grace", self, Spec{Path: "/bin/true", KillGrace: -1, Deadline: future}, ErrInvalidSpec},
		{"no supervisor binary", "/nonexistent/leasecron", Spec{Path: "/bin/true", Deadline: future}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Start(ctx, tc.self, tc.spec)
			if err == nil {
				_ = p.Close()
				_, _ = p.Wait()
				t.Fatal("Start succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Start = %v, want %v", err, tc.want)
			}
			t.Logf("Start: %v", err)
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := Start(cctx, self, Spec{Path: "/bin/true", Deadline: future}); !errors.Is(err, context.Canceled) {
			t.Errorf("Start = %v, want context.Canceled", err)
		}
	})
}

// The job's environment and directory come from the Spec; the supervisor's
// pipes are not inherited.
func TestEnvDirAndFDs(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Start(ctx, testSelf(t), Spec{
		Path:     "/bin/sh",
		Args:     []string{"-c", `echo "$FOO"; pwd; for fd in 3 4 5; do [ -e /proc/$$/fd/$fd ] && echo "fd $fd open"; done; echo end`},
		Env:      []string{"FOO=bar", "PATH=/usr/bin:/bin"},
		Dir:      dir,
		Deadline: BootNow() + int64(time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := collect(p)
	lines := out.rest(t, 10*time.Second)
	if _, err := waitExit(t, p, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The supervisor's spec, control and status pipes (3, 4, 5) are closed.
	if len(lines) != 3 || lines[0] != "bar" || lines[1] != dir || lines[2] != "end" {
		t.Fatalf("stdout = %q, want bar, %s, end", lines, dir)
	}
}

// Cancelling Start's context before the job has started: Start returns
// the context's error only once nothing it started is left running.
func TestStartCancelled(t *testing.T) {
	dir := t.TempDir()
	slowSelf := filepath.Join(dir, "slow-supervisor")
	script := "#!/bin/sh\nsleep 1\nexec '" + testSelf(t) + "' \"$@\"\n"
	if err := os.WriteFile(slowSelf, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "pid")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	p, err := Start(ctx, slowSelf, Spec{
		Path:      "/bin/sh",
		Args:      []string{"-c", "echo $$ > " + pidFile + "; sleep 100"},
		KillGrace: time.Second,
		Deadline:  BootNow() + int64(time.Minute),
	})
	if err == nil {
		_ = p.Close()
		_, _ = p.Wait()
		t.Fatal("Start succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start = %v, want context.DeadlineExceeded", err)
	}
	if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 {
		if pid := atoi(t, string(b)); !isDead(pid) {
			t.Errorf("job %d still alive after Start returned", pid)
		}
	}
}

// Jobs that end at once (found through PATH): Start still returns the
// Process, and Wait the exit.
func TestFastJobs(t *testing.T) {
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		p, err := Start(ctx, testSelf(t), Spec{Path: "false", Deadline: BootNow() + int64(time.Minute)})
		cancel()
		if err != nil {
			t.Fatalf("run %d: Start: %v", i, err)
		}
		_ = p.Stdout().Close()
		_ = p.Stderr().Close()
		exit, err := waitExit(t, p, 10*time.Second)
		if err != nil || exit.Code != 1 || exit.Reason != ReasonExited {
			t.Fatalf("run %d: Wait = %+v, %v; want code 1, exited", i, exit, err)
		}
	}
}
