package faultsuite

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Daemon is one `leasecron run` process of a fleet.
type Daemon struct {
	f          *Fleet
	Index      int
	Name       string   // its --id, and LEASECRON_HOST of its jobs
	ConfigPath string   // its config file
	LogPath    string   // its stdout and stderr, appended across restarts
	Args       []string // extra flags
	Env        []string // extra environment
	// Labels are the host's labels, passed as LEASECRON_LABELS.
	Labels map[string]string
	// MaxParallel is passed as LEASECRON_MAX_PARALLEL (0: not).
	MaxParallel int

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process exited
	state  *os.ProcessState
	paused bool
}

// WriteConfig rewrites the daemon's config file from c (use Reload to make
// a running daemon read it).
func (d *Daemon) WriteConfig(c Config) {
	d.f.t.Helper()
	c.fill()
	d.WriteRaw(d.f.yaml(d, c))
}

// WriteRaw writes b as the daemon's config file.
func (d *Daemon) WriteRaw(b []byte) {
	d.f.t.Helper()
	if err := os.WriteFile(d.ConfigPath, b, 0o644); err != nil {
		d.f.t.Fatalf("write config of %s: %v", d.Name, err)
	}
}

// Start starts the daemon; it fails the test if the daemon is running.
func (d *Daemon) Start() {
	t := d.f.t
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil && !isClosed(d.done) {
		t.Fatalf("daemon %s is already running", d.Name)
	}
	out, err := os.OpenFile(d.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("daemon %s log: %v", d.Name, err)
	}
	defer out.Close() // the child has its own copy
	fmt.Fprintf(out, "### harness: starting %s at %s\n", d.Name, fmtT(time.Now()))
	args := append([]string{"run", "-c", d.ConfigPath, "--id", d.Name, "--log-format", "json", "--log-level", "debug"}, d.Args...)
	cmd := exec.Command(d.f.bins.Leasecron, args...)
	// A race-enabled binary sleeps 1s at exit by default; the supervisor
	// (the same binary) would hold the job's lease that much longer.
	cmd.Env = append(append(append(os.Environ(), "GORACE=atexit_sleep_ms=0"), d.f.cfg.Env...), d.Env...)
	if len(d.Labels) > 0 {
		cmd.Env = append(cmd.Env, "LEASECRON_LABELS="+formatLabels(d.Labels))
	}
	if d.MaxParallel > 0 {
		cmd.Env = append(cmd.Env, "LEASECRON_MAX_PARALLEL="+strconv.Itoa(d.MaxParallel))
	}
	cmd.Dir = d.f.Dir
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group: a terminal's ^C goes to the test, which stops
	// the daemon itself; Pdeathsig is a backstop if the test dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start daemon %s: %v", d.Name, err)
	}
	done := make(chan struct{})
	d.cmd, d.done, d.state, d.paused = cmd, done, nil, false
	go func() {
		_ = cmd.Wait()
		d.mu.Lock()
		d.state = cmd.ProcessState
		d.mu.Unlock()
		close(done)
	}()
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Running reports whether the daemon process is alive (paused counts).
func (d *Daemon) Running() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cmd != nil && !isClosed(d.done)
}

// PID is the daemon's process id (0 before Start).
func (d *Daemon) PID() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return 0
	}
	return d.cmd.Process.Pid
}

// Exited returns a channel closed when the current process exits.
func (d *Daemon) Exited() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.done
}

// ExitState is the state of the last exited process (nil while running).
func (d *Daemon) ExitState() *os.ProcessState {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state
}

func (d *Daemon) signal(sig syscall.Signal) {
	t := d.f.t
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil || isClosed(d.done) {
		t.Fatalf("daemon %s: %v: not running", d.Name, sig)
	}
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("daemon %s: %v: %v", d.Name, sig, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		d.paused = true
	case syscall.SIGCONT:
		d.paused = false
	}
}

// Stop sends SIGTERM and waits for the daemon to exit; it fails the test
// if it does not exit in time or exits non-zero. It returns the exit code.
func (d *Daemon) Stop() int {
	d.f.t.Helper()
	return d.stop(d.f.stopTimeout())
}

func (d *Daemon) stop(timeout time.Duration) int {
	t := d.f.t
	t.Helper()
	if !d.Running() {
		return d.ExitState().ExitCode()
	}
	d.mu.Lock()
	if d.paused {
		_ = d.cmd.Process.Signal(syscall.SIGCONT)
		d.paused = false
	}
	d.mu.Unlock()
	d.signal(syscall.SIGTERM)
	select {
	case <-d.Exited():
	case <-time.After(timeout):
		t.Errorf("daemon %s did not stop within %s of SIGTERM; killing it", d.Name, timeout)
		d.Kill()
	}
	st := d.ExitState()
	if st.ExitCode() != 0 {
		t.Errorf("daemon %s exited with %v after SIGTERM, want 0", d.Name, st)
	}
	return st.ExitCode()
}

// Kill sends SIGKILL to the daemon (not to its jobs) and waits for it.
func (d *Daemon) Kill() {
	t := d.f.t
	t.Helper()
	d.signal(syscall.SIGKILL)
	select {
	case <-d.Exited():
	case <-time.After(10 * time.Second):
		t.Fatalf("daemon %s did not die of SIGKILL", d.Name)
	}
}

// Pause stops the daemon with SIGSTOP (its job supervisors keep running).
func (d *Daemon) Pause() { d.f.t.Helper(); d.signal(syscall.SIGSTOP) }

// Resume continues a paused daemon with SIGCONT.
func (d *Daemon) Resume() { d.f.t.Helper(); d.signal(syscall.SIGCONT) }

// Reload sends SIGHUP.
func (d *Daemon) Reload() { d.f.t.Helper(); d.signal(syscall.SIGHUP) }

// Restart stops the daemon gracefully (if running) and starts it again.
func (d *Daemon) Restart() {
	d.f.t.Helper()
	if d.Running() {
		d.Stop()
	}
	d.Start()
}

// LogContains reports whether the daemon's log contains s.
func (d *Daemon) LogContains(s string) bool {
	b, err := os.ReadFile(d.LogPath)
	return err == nil && bytes.Contains(b, []byte(s))
}
