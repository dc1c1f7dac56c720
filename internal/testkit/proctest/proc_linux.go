package proctest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// SysProcAttr makes the kernel SIGKILL a started server when the thread
// that started it exits, so a test binary that dies without running its
// cleanups (a -timeout panic, a SIGKILL) leaves no server behind. Cleanup
// must not rely on it. cred, if not nil, runs the server as that user.
func SysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
}

// WaitStopped waits until /proc says pid is stopped (state T), so that a
// request sent after a SIGSTOP is certain not to be served. It gives up
// silently if /proc cannot be read.
func WaitStopped(pid int, timeout time.Duration) error {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		// The state follows the ")" that closes the command name.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
			if st := b[i+2]; st == 'T' || st == 't' {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not stopped %s after SIGSTOP", timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// tryLock opens path and takes an exclusive lock on it without waiting;
// nil when another process (or file of this one) holds it.
func tryLock(path string) *os.File {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		_ = f.Close()
		return nil
	}
	return f
}
