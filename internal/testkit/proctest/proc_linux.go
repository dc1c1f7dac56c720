package proctest

import (
	"bytes"
	"errors"
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

// tryLock opens path (made readable and writable by every user) and
// takes an exclusive lock on it without waiting: errSlotBusy when another
// holder (another process, or another open file of this one) has it.
func tryLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	_ = f.Chmod(0o666)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errSlotBusy
		}
		return nil, err
	}
	return f, nil
}
