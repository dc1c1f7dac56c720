package proctest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Proc is one server process a test kit started: it is reaped by a
// goroutine of its own, and Kill, Pause and Resume signal it by its PID
// only (never a process group or a name) — and, for a process started
// with StartTree, its descendants found by their parent PIDs.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // cmd.Wait's result; read only after done is closed
	tree bool  // signal the descendants too (StartTree)

	mu     sync.Mutex
	paused bool
}

// Start starts cmd with the parent-death signal (see SysProcAttr; cred,
// if not nil, runs it as that user) and returns its handle.
func Start(cmd *exec.Cmd, cred *syscall.Credential) (*Proc, error) {
	cmd.SysProcAttr = SysProcAttr(cred)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// StartTree is Start for a server that forks workers each in a session of
// its own (PostgreSQL's postmaster and backends), which a process group
// would not reach: Kill, Pause and Resume signal its descendants too,
// found through /proc while they are its children.
func StartTree(cmd *exec.Cmd, cred *syscall.Credential) (*Proc, error) {
	p, err := Start(cmd, cred)
	if p != nil {
		p.tree = true
	}
	return p, err
}

// descendants returns the PIDs to signal with the process itself.
func (p *Proc) descendants() []int {
	if !p.tree {
		return nil
	}
	return children(p.PID())
}

// signalDescendants sends sig to every one of pids, ignoring those gone.
func signalDescendants(pids []int, sig syscall.Signal) {
	for _, k := range pids {
		_ = syscall.Kill(k, sig)
	}
}

// Err returns how the process exited (cmd.Wait's result); nil while it
// runs.
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// PID returns the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Paused reports whether Pause stopped the process and Resume has not
// continued it.
func (p *Proc) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// Kill sends SIGCONT if the process is paused, then SIGKILL, and waits up
// to timeout until it is reaped (and, for StartTree, its descendants are
// gone). Killing an exited process does nothing.
func (p *Proc) Kill(timeout time.Duration) error {
	p.mu.Lock()
	paused := p.paused
	p.paused = false
	p.mu.Unlock()
	if p.Exited() {
		return nil
	}
	var kids []int
	if p.tree {
		// Stopped first, the parent forks no more workers; its children
		// are found while they are still its children.
		_ = p.cmd.Process.Signal(syscall.SIGSTOP)
		kids = p.descendants()
		signalDescendants(kids, syscall.SIGKILL)
		paused = true
	}
	if paused {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing pid %d: %w", p.PID(), err)
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		return fmt.Errorf("pid %d not reaped %s after SIGKILL", p.PID(), timeout)
	}
	return waitGone(kids, timeout)
}

// Pause stops the process with SIGSTOP and waits until it is stopped.
func (p *Proc) Pause() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Exited() {
		return fmt.Errorf("pause of pid %d, which has exited", p.PID())
	}
	// The parent first, so that it forks no worker the signal would miss.
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP to pid %d: %w", p.PID(), err)
	}
	signalDescendants(p.descendants(), syscall.SIGSTOP)
	p.paused = true
	return WaitStopped(p.PID(), 5*time.Second)
}

// Resume continues a paused process with SIGCONT.
func (p *Proc) Resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		return nil
	}
	p.paused = false
	signalDescendants(p.descendants(), syscall.SIGCONT)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGCONT to pid %d: %w", p.PID(), err)
	}
	return nil
}
