//go:build !linux

package proctest

import (
	"os"
	"syscall"
	"time"
)

// SysProcAttr runs a started server as cred when not nil; outside Linux
// there is no parent-death signal, and only the tests' cleanups stop it.
func SysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	if cred == nil {
		return nil
	}
	return &syscall.SysProcAttr{Credential: cred}
}

// WaitStopped gives SIGSTOP a moment to take effect; there is no portable
// way to observe it.
func WaitStopped(pid int, timeout time.Duration) error {
	time.Sleep(10 * time.Millisecond)
	return nil
}

// tryLock opens path; elsewhere than on Linux start slots do not bound
// anything (the tests run on Linux).
func tryLock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o666)
}
