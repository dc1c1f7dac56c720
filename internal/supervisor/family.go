//go:build linux

package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// family tracks the job's processes inside the supervisor. The supervisor is
// a child subreaper, so the job leader and every orphaned descendant of it
// are the supervisor's children. Children are reaped only with mu held; a
// pid read from /proc with mu held therefore still names the same (live or
// zombie) process when it is signalled under the same lock.
type family struct {
	leader int    // pid of the job = its process group id
	cgroup string // the job's cgroup, "" for none

	mu           sync.Mutex
	leaderDone   bool
	leaderStatus unix.WaitStatus
	leaderMono   int64 // when the leader was reaped

	leaderExit chan struct{} // closed when the leader has been reaped
	reaped     chan struct{} // gets a value when some child was reaped
	allGone    chan struct{} // closed when no child (so no descendant) is left
	goneMono   int64         // when allGone was observed; written before close(allGone)
}

func newFamily(leader int) *family {
	return &family{
		leader:     leader,
		leaderExit: make(chan struct{}),
		reaped:     make(chan struct{}, 1),
		allGone:    make(chan struct{}),
	}
}

// reap waits for and reaps children until none is left. It returns after
// closing allGone, or never if some process of the job cannot die; the
// supervisor then exits without it.
func (f *family) reap() {
	for {
		// Block until some child is waitable, without reaping it yet.
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOWAIT|unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil { // ECHILD: no children, hence no descendants.
			f.goneMono = BootNow()
			close(f.allGone)
			return
		}
		f.reapWaitable()
	}
}

// reapWaitable reaps every child that has exited. If the leader has exited,
// the rest of its group is SIGKILLed first, while the leader's zombie still
// holds the process group id.
func (f *family) reapWaitable() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leaderDone {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, f.leader, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
		if err == nil && info.Signo != 0 {
			_ = unix.Kill(-f.leader, unix.SIGKILL)
		}
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			break
		}
		if pid == f.leader && !f.leaderDone {
			f.leaderDone = true
			f.leaderStatus = ws
			f.leaderMono = BootNow()
			close(f.leaderExit)
		}
	}
	select {
	case f.reaped <- struct{}{}:
	default:
	}
}

// signal sends sig to the job's process group and to every child of the
// supervisor outside that group (descendants that left it with setsid or
// setpgid and were orphaned).
func (f *family) signal(sig unix.Signal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = unix.Kill(-f.leader, sig)
	if sig == unix.SIGKILL && f.cgroup != "" {
		_ = os.WriteFile(filepath.Join(f.cgroup, "cgroup.kill"), []byte("1"), 0)
	}
	for _, pid := range children() {
		if pgid, err := unix.Getpgid(pid); err == nil && pgid == f.leader {
			continue // got it through the group
		}
		_ = unix.Kill(pid, sig)
	}
}

// confirm SIGKILLs the job's group, cgroup and descendants until none is
// left and the cgroup is empty, and returns the CLOCK_BOOTTIME instant at
// which none was; 0 if some process was still there after timeout.
func (f *family) confirm(timeout time.Duration) int64 {
	bound := time.NewTimer(timeout)
	defer bound.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadAt := func() int64 { return f.goneMono }
	for {
		allGone := f.allGone
		select {
		case <-f.allGone:
			// Every descendant is gone, and the group with it unless a
			// process that is not the job's joined it: check for form.
			err := unix.Kill(-f.leader, 0)
			populated := false
			if f.cgroup != "" {
				p, perr := cgroupPopulated(f.cgroup)
				populated = p || perr != nil
			}
			if errors.Is(err, unix.ESRCH) && !populated {
				return max(deadAt(), 1)
			}
			allGone = nil
			deadAt = BootNow
		default:
		}
		f.signal(unix.SIGKILL)
		select {
		case <-allGone:
		case <-f.reaped:
		case <-tick.C:
		case <-bound.C:
			return 0
		}
	}
}

// leaderResult returns the leader's wait status, whether it was reaped, and
// when.
func (f *family) leaderResult() (unix.WaitStatus, bool, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leaderStatus, f.leaderDone, f.leaderMono
}

// children lists the children of every thread of this process, from
// /proc/self/task/*/children. It returns nil when that is not available;
// the process-group kill still applies then.
func children() []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	var pids []int
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "children"))
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(field); err == nil && pid > 0 {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
