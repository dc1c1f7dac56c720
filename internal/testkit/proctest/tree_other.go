//go:build !linux

package proctest

import "time"

// children is not known without /proc: only the process itself is signalled.
func children(int) []int { return nil }

// waitGone gives the signal a moment (no /proc outside Linux).
func waitGone([]int, time.Duration) error { time.Sleep(100 * time.Millisecond); return nil }
