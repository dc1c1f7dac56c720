//go:build !linux

package pgtest

import (
	"syscall"
	"time"
)

// sysProcAttr starts the postmaster as cred when not nil (no Pdeathsig
// outside Linux).
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}

// children is not known without /proc: only the postmaster is signalled.
func children(int) []int { return nil }

// waitStopped gives the signal a moment (no /proc outside Linux).
func waitStopped(int, time.Duration) error { time.Sleep(10 * time.Millisecond); return nil }

// waitGone gives the signal a moment (no /proc outside Linux).
func waitGone([]int, time.Duration) error { time.Sleep(100 * time.Millisecond); return nil }
