//go:build linux

package supervisor

import (
	"time"

	"golang.org/x/sys/unix"
)

// BootNow returns the current CLOCK_BOOTTIME reading in nanoseconds. The
// value is the same for every process on the host, which makes it usable as
// an absolute deadline passed between processes. Unlike CLOCK_MONOTONIC
// (and Go's timers), it advances while the host is suspended, as the lease
// servers' clocks do.
func BootNow() int64 { return clockNow(unix.CLOCK_BOOTTIME) }

// monoNow returns the current CLOCK_MONOTONIC reading in nanoseconds: the
// clock of Go's timers, which stops during a suspend.
func monoNow() int64 { return clockNow(unix.CLOCK_MONOTONIC) }

func clockNow(id int32) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		// clock_gettime fails only for a bad pointer or an unknown clock,
		// neither of which can happen here (CLOCK_BOOTTIME: Linux 2.6.39).
		panic("supervisor: clock_gettime: " + err.Error())
	}
	return ts.Nano()
}

// BootDeadline converts t into a CLOCK_BOOTTIME deadline in nanoseconds,
// as BootNow() + time.Until(t). Give it a time.Time that carries a monotonic
// reading (one derived from time.Now()); for others time.Until falls back to
// the wall clock, which may jump. time.Until counts on CLOCK_MONOTONIC: a
// suspend between taking t and the call makes the deadline late by the
// time suspended, which is why the supervisor treats a suspend during a job
// as the loss of its lease (see suspendWatch).
func BootDeadline(t time.Time) int64 {
	return BootNow() + int64(time.Until(t))
}

// bootTime converts a CLOCK_BOOTTIME reading back into a time.Time (with a
// monotonic reading) in this process.
func bootTime(boot int64) time.Time {
	if boot == 0 {
		return time.Time{}
	}
	return time.Now().Add(time.Duration(boot - BootNow()))
}

// clock is what the supervisor's killer reads: CLOCK_BOOTTIME for its
// deadlines and CLOCK_MONOTONIC beside it to tell a suspend. Tests inject a
// clock that jumps.
type clock interface {
	boot() int64
	mono() int64
}

// sysClock is the host's clocks.
type sysClock struct{}

func (sysClock) boot() int64 { return BootNow() }
func (sysClock) mono() int64 { return monoNow() }

// suspendThreshold is how much more CLOCK_BOOTTIME may have advanced than
// CLOCK_MONOTONIC since the job started before the supervisor takes it
// that the host was suspended. The two differ by nothing else, so the
// threshold only absorbs the reading's own jitter; it is kept below the
// daemon's kill margin (200ms and more), which a shorter suspend's error
// in the daemon's deadlines stays within.
const suspendThreshold = 100 * time.Millisecond

// suspendCheckEvery is how often the supervisor compares the clocks while
// the job runs. After a resume, the job runs on for up to about this long
// (Go's timers run on CLOCK_MONOTONIC, so this is measured from the
// resume) before it is killed.
const suspendCheckEvery = 250 * time.Millisecond

// suspendWatch tells a suspend from the advance of CLOCK_BOOTTIME over
// CLOCK_MONOTONIC since it was started.
type suspendWatch struct {
	clk    clock
	offset int64 // boot - mono at the start
	ok     bool  // offset was read
}

func newSuspendWatch(clk clock) *suspendWatch {
	w := &suspendWatch{clk: clk}
	w.offset, w.ok = readOffset(clk)
	return w
}

// suspended returns how long the host was suspended since the watch
// started, as far as it can tell (0 if it could not read the clocks
// closely enough together this time).
func (w *suspendWatch) suspended() time.Duration {
	off, ok := readOffset(w.clk)
	if !ok {
		return 0
	}
	if !w.ok {
		w.offset, w.ok = off, true
		return 0
	}
	return time.Duration(off - w.offset)
}

// readOffset reads CLOCK_BOOTTIME - CLOCK_MONOTONIC, bracketing the boot
// reading between two monotonic ones so that a preemption between the
// readings is not taken for a suspend; ok is false if no try was close
// enough.
func readOffset(clk clock) (int64, bool) {
	const closeEnough = int64(time.Millisecond)
	for range 5 {
		m1 := clk.mono()
		b := clk.boot()
		m2 := clk.mono()
		if m2-m1 <= closeEnough {
			return b - m2, true
		}
	}
	return 0, false
}
