//go:build linux

package supervisor

import (
	"time"

	"golang.org/x/sys/unix"
)

// MonoNow returns the current CLOCK_MONOTONIC reading in nanoseconds. The
// value is the same for every process on the host, which makes it usable as
// an absolute deadline passed between processes. It does not advance while
// the host is suspended.
func MonoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		// clock_gettime(CLOCK_MONOTONIC) fails only for a bad pointer or an
		// unknown clock, neither of which can happen here.
		panic("supervisor: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}

// MonoDeadline converts t into a CLOCK_MONOTONIC deadline in nanoseconds,
// as MonoNow() + time.Until(t). Give it a time.Time that carries a monotonic
// reading (one derived from time.Now()); for others time.Until falls back to
// the wall clock, which may jump.
func MonoDeadline(t time.Time) int64 {
	return MonoNow() + int64(time.Until(t))
}

// monoTime converts a CLOCK_MONOTONIC reading back into a time.Time (with a
// monotonic reading) in this process.
func monoTime(mono int64) time.Time {
	if mono == 0 {
		return time.Time{}
	}
	return time.Now().Add(time.Duration(mono - MonoNow()))
}
