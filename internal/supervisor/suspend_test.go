//go:build linux

package supervisor

import (
	"os"
	"testing"
	"time"
)

// fakeSuspendEnv makes the test binary, run as a supervisor, read a clock
// on which CLOCK_BOOTTIME jumps 60s ahead of CLOCK_MONOTONIC one second
// after it started — what a 60s suspend looks like: "check" with the
// suspend check on, "nocheck" with it off (a negative control).
const fakeSuspendEnv = "LEASECRON_TEST_FAKE_SUSPEND"

// testSuperviseOpts are the supervisor's options in this test binary: the
// host's clocks, or the jumping clock of fakeSuspendEnv.
func testSuperviseOpts() superviseOpts {
	switch os.Getenv(fakeSuspendEnv) {
	case "check":
		return superviseOpts{clk: newJumpClock(time.Second, time.Minute)}
	case "nocheck":
		return superviseOpts{clk: newJumpClock(time.Second, time.Minute), noSuspendCheck: true}
	}
	return superviseOpts{clk: sysClock{}}
}

// jumpClock is the host's clocks, except that CLOCK_BOOTTIME reads jump
// ahead once CLOCK_MONOTONIC has advanced after since it was made.
type jumpClock struct {
	start       int64
	after, jump time.Duration
}

func newJumpClock(after, jump time.Duration) *jumpClock {
	return &jumpClock{start: monoNow(), after: after, jump: jump}
}

func (c *jumpClock) mono() int64 { return monoNow() }

func (c *jumpClock) boot() int64 {
	if time.Duration(monoNow()-c.start) > c.after {
		return BootNow() + int64(c.jump)
	}
	return BootNow()
}

// TestSuspendKillsJob: CLOCK_BOOTTIME jumps 60s ahead while CLOCK_MONOTONIC
// advances 1s (a suspend, as the supervisor sees it; a real one cannot be
// made here). The job's deadline is two minutes away, so only the suspend
// check can end it: the supervisor SIGKILLs the job and reports
// ReasonSuspended (the scheduler records the run aborted, its lease lost).
func TestSuspendKillsJob(t *testing.T) {
	t.Setenv(fakeSuspendEnv, "check")
	p, _ := startShell(t, "exec sleep 300", time.Second, BootNow()+int64(2*time.Minute))
	exit, err := waitExit(t, p, 30*time.Second)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if exit.Reason != ReasonSuspended || exit.Signal != "SIGKILL" || exit.KillTime == 0 {
		t.Errorf("exit %+v; want killed with SIGKILL, reason %q", exit, ReasonSuspended)
	}
}

// TestNegativeControlNoSuspendCheck: the same jump with the suspend check
// off leaves the job running (its deadline, in CLOCK_BOOTTIME, is still
// ahead even after the jump): the test above can fail.
func TestNegativeControlNoSuspendCheck(t *testing.T) {
	t.Setenv(fakeSuspendEnv, "nocheck")
	p, _ := startShell(t, "echo started; exec sleep 300", time.Second, BootNow()+int64(2*time.Minute))
	done := make(chan struct{})
	go func() { _, _ = p.Wait(); close(done) }()
	// The jump comes 1s after the supervisor started; give it and a dozen
	// checks time to act.
	select {
	case <-done:
		t.Fatalf("the job ended without the suspend check: %+v", p.exit)
	case <-time.After(5 * time.Second):
	}
	_ = p.Close()
	<-done
}

// TestSuspendWatchIgnoresPreemption: a preemption between the two clocks'
// readings (CLOCK_MONOTONIC moves on between them) is not taken for a
// suspend; a real difference is.
func TestSuspendWatchIgnoresPreemption(t *testing.T) {
	c := &scriptClock{}
	w := newSuspendWatch(c) // offset 0
	c.monoGap = int64(300 * time.Millisecond)
	c.gapOnce = true
	if d := w.suspended(); d != 0 {
		t.Errorf("a 300ms preemption between readings taken for a %v suspend", d)
	}
	c.offset = int64(5 * time.Second)
	if d := w.suspended(); d != 5*time.Second {
		t.Errorf("a 5s suspend read as %v", d)
	}
}

// scriptClock is a clock whose CLOCK_BOOTTIME is CLOCK_MONOTONIC + offset;
// with gapOnce, the first mono reading after a boot reading is monoGap
// later.
type scriptClock struct {
	now, offset, monoGap int64
	gapOnce, afterBoot   bool
}

func (c *scriptClock) mono() int64 {
	c.now += int64(time.Microsecond)
	if c.afterBoot && c.gapOnce {
		c.now += c.monoGap
		c.gapOnce = false
	}
	c.afterBoot = false
	return c.now
}

func (c *scriptClock) boot() int64 {
	c.afterBoot = true
	return c.now + c.offset
}
