//go:build !linux

package etcdtest

import (
	"syscall"
	"time"
)

// sysProcAttr returns nil: outside Linux there is no Pdeathsig, and only
// the test's cleanup stops the servers.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// waitStopped gives SIGSTOP a moment to take effect; there is no portable
// way to observe it.
func waitStopped(pid int, timeout time.Duration) error {
	time.Sleep(10 * time.Millisecond)
	return nil
}
