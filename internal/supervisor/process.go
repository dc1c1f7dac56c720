//go:build linux

package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// controlWriteTimeout bounds one write to the control pipe. A message is
// far smaller than the pipe buffer, so a write only waits when the
// supervisor has not read for a long time (it is stopped); Extend and
// Terminate then fail instead of blocking the caller.
const controlWriteTimeout = 100 * time.Millisecond

// Spec describes a job to start.
type Spec struct {
	// Path is the program to run. Without a slash it is looked up in the
	// supervisor's PATH (the daemon's), as exec.Command does.
	Path string
	// Args are the arguments after the program name (argv[1:]).
	Args []string
	// Env is the job's whole environment; nil means the daemon's.
	Env []string
	// Dir is the job's working directory; "" means the daemon's.
	Dir string
	// KillGrace is how long before the deadline the job's process group
	// gets SIGTERM; it gets SIGKILL at the deadline. Also the grace after
	// a SIGTERM to the supervisor or the control pipe closing. Must not be
	// negative.
	KillGrace time.Duration
	// Deadline is the initial kill deadline, CLOCK_BOOTTIME nanoseconds
	// (see BootDeadline). It must be in the future.
	Deadline int64
	// Contain is the daemon's containment (DetectContainment): with
	// cgroups, the job runs in a cgroup of its own, created for it.
	Contain Containment
	// Name names the job's cgroup (with the daemon's pid and a random
	// suffix); "" means "job".
	Name string
	// Limits are applied to the job's cgroup before it starts. Limits
	// that Contain cannot apply (Containment.CanLimit) fail the start
	// with ErrLimits: the job is never run without them.
	Limits Limits
}

// Exit describes how a job ended.
type Exit struct {
	// Code is the job's exit code, 128+n when it died of signal n, or -1
	// when unknown (supervisor lost, job not reaped).
	Code int
	// Signal names the signal the job died of ("SIGKILL"), or "".
	Signal string
	// Reason is why it ended: ReasonExited, ReasonDeadline,
	// ReasonTerminated, ReasonDaemonGone, ReasonSuspended or
	// ReasonSupervisorLost.
	Reason string
	// Started and Ended are when the job started and when its leader
	// process was reaped (zero when unknown), as local times.
	Started, Ended time.Time
	// DeadTime is the CLOCK_BOOTTIME instant (ns) at which the
	// supervisor confirmed that no process of the job was left, or, with
	// ErrSupervisorLost, at which the daemon saw no live process of the
	// job's group left after killing it; 0 when neither could (Wait then
	// returns ErrNotConfirmedDead or ErrSupervisorLost).
	DeadTime int64
	// TermTime and KillTime are the CLOCK_BOOTTIME instants (ns) at which
	// the supervisor sent SIGTERM and SIGKILL to the job (by the deadline,
	// Terminate, Close or a SIGTERM to the supervisor); 0 if it did not.
	// A SIGKILL sent only to clean up after the job leader exited on its
	// own does not count.
	TermTime, KillTime int64
	// Limit names the limit of Spec.Limits the job ran into (LimitMemory,
	// LimitTasks, LimitCPU), read from its cgroup's event counters after
	// it ended; "" for none.
	Limit string
}

// Process is a job running under a supervisor process. Its methods are safe
// for concurrent use.
type Process struct {
	cmd            *exec.Cmd
	stdout, stderr *autoCloseReader
	supStart       uint64 // the supervisor's start, clock ticks after boot

	// contain and cgroup are set by Spare.Start: the daemon's containment
	// and the job's cgroup ("" without one).
	contain Containment
	cgroup  string
	limits  Limits

	mu     sync.Mutex
	ctrl   *os.File // nil once closed
	jobPID int      // set before started is closed

	started    chan struct{} // closed on the "started" event
	statusDone chan struct{} // closed when the status pipe is at EOF
	startMono  int64
	exitEv     *statusEvent // last "exit" event; valid after statusDone
	errorEv    *statusEvent // "error" event; valid after statusDone

	waitOnce sync.Once
	exit     Exit
	waitErr  error
}

// Start starts a supervisor — the executable self, normally the daemon's own
// os.Executable(), run with the single argument [Arg] — and has it start the
// job described by spec. It returns once the job runs, with its pid known.
//
// The job's stdout and stderr are pipes, read through Stdout and Stderr;
// the caller must drain both while the job runs (a full pipe stalls the job).
//
// ctx bounds the start only. If it is cancelled before the job has started,
// Start closes the control pipe, waits until the supervisor has killed
// whatever it started (at most spec.KillGrace, and never past the
// deadline), and returns ctx's error. Once Start has returned, the job runs
// until it exits, its deadline passes, or Terminate or Close is called.
//
// Errors: ErrDeadlinePassed if spec.Deadline is not in the future, ErrStart
// if the program cannot be started, and wrapped exec errors if self cannot.
func Start(ctx context.Context, self string, spec Spec) (*Process, error) {
	if err := checkSpec(ctx, spec); err != nil {
		return nil, err
	}
	sp, err := Prepare(self)
	if err != nil {
		return nil, err
	}
	return sp.Start(ctx, spec)
}

// checkSpec rejects a spec that cannot start, and a cancelled ctx.
func checkSpec(ctx context.Context, spec Spec) error {
	if spec.Path == "" {
		return fmt.Errorf("%w: empty Path", ErrInvalidSpec)
	}
	if spec.KillGrace < 0 {
		return fmt.Errorf("%w: negative KillGrace %v", ErrInvalidSpec, spec.KillGrace)
	}
	if now := BootNow(); spec.Deadline <= now {
		return fmt.Errorf("%w: %v ago", ErrDeadlinePassed, time.Duration(now-spec.Deadline))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("supervisor: start: %w", err)
	}
	if err := spec.Contain.CanLimit(spec.Limits); err != nil {
		return fmt.Errorf("%w: %w", ErrLimits, err)
	}
	return nil
}

// trimPrefix removes the text of sentinel from the start of msg, which is
// about to be wrapped with it again.
func trimPrefix(msg string, sentinel error) string {
	return strings.TrimPrefix(msg, sentinel.Error()+": ")
}

// readStatus reads status events until the supervisor exits.
func (p *Process) readStatus(f *os.File) {
	defer close(p.statusDone)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev statusEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue
		}
		switch ev.Event {
		case eventStarted:
			select {
			case <-p.started:
			default:
				p.mu.Lock()
				p.jobPID = ev.PID
				p.mu.Unlock()
				p.startMono = ev.StartMono
				close(p.started)
			}
		case eventExit:
			p.exitEv = &ev
		case eventError:
			p.errorEv = &ev
		}
	}
}

// Stdout returns the read end of the job's stdout. Read it to EOF (it then
// closes itself), or Close it. EOF comes when every process holding the
// pipe — the job and what it started — has exited.
func (p *Process) Stdout() io.ReadCloser { return p.stdout }

// Stderr returns the read end of the job's stderr, like Stdout.
func (p *Process) Stderr() io.ReadCloser { return p.stderr }

// JobPID returns the job's pid, which is also its process group id.
func (p *Process) JobPID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jobPID
}

// SupervisorPID returns the supervisor process's pid.
func (p *Process) SupervisorPID() int { return p.cmd.Process.Pid }

// Extend sets the job's kill deadline (CLOCK_BOOTTIME ns, see
// BootDeadline). The latest value written wins, also when it is earlier
// than the previous one. A deadline already passed makes the supervisor
// kill the job at once. Extend does not block for long: it fails after
// 100ms if the supervisor does not read its pipe. It returns ErrClosed
// after Close or Wait, and an error if the supervisor has exited.
func (p *Process) Extend(deadline int64) error {
	return p.send(msgDeadline, deadline)
}

// Terminate sends SIGTERM to the job's process group now and SIGKILL after
// grace, or at the deadline if that is earlier. The job ends with
// ReasonTerminated (unless it was already being killed). Like Extend, it
// does not wait for the job: use Wait.
func (p *Process) Terminate(grace time.Duration) error {
	return p.send(msgTerm, int64(max(grace, 0)))
}

func (p *Process) send(kind string, value int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctrl == nil {
		return fmt.Errorf("supervisor: %s: %w", kind, ErrClosed)
	}
	if err := p.ctrl.SetWriteDeadline(time.Now().Add(controlWriteTimeout)); err != nil {
		return fmt.Errorf("supervisor: %s: %w", kind, err)
	}
	// Less than PIPE_BUF bytes: written whole or not at all.
	if _, err := p.ctrl.Write(formatControl(kind, value)); err != nil {
		return fmt.Errorf("supervisor: %s: %w", kind, err)
	}
	return nil
}

// Close closes the control pipe. The supervisor treats that as the daemon
// being gone: SIGTERM to the job's group now, SIGKILL after
// min(KillGrace, deadline-now); the job ends with ReasonDaemonGone if it
// was still running. Close does not wait; call Wait. It is safe to call
// more than once and after Wait.
func (p *Process) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctrl == nil {
		return nil
	}
	err := p.ctrl.Close()
	p.ctrl = nil
	if err != nil {
		return fmt.Errorf("supervisor: close control pipe: %w", err)
	}
	return nil
}

// Wait waits until the job and every process it started are dead and the
// supervisor has exited, and returns how the job ended. It then closes the
// control pipe. Wait may be called more than once, also concurrently; all
// calls return the same result.
//
// Errors, with Exit filled in as far as known: ErrNotConfirmedDead when the
// supervisor could not confirm that every process of the job was gone;
// ErrSupervisorLost when the supervisor died without a report. Wait then
// SIGKILLs the job's whole process group itself (the leader got SIGKILL
// through its parent-death signal, its children did not) until no member
// is alive, reaps the members re-parented to the calling process, and sets
// Exit.DeadTime to when none was alive (0 if some still was after
// ConfirmTimeout). Wait does not depend on the job's output: it returns
// also when a process outside the job holds its stdout open.
func (p *Process) Wait() (Exit, error) {
	p.waitOnce.Do(func() { p.exit, p.waitErr = p.wait() })
	return p.exit, p.waitErr
}

func (p *Process) wait() (Exit, error) {
	<-p.statusDone
	cmdErr := p.cmd.Wait()
	_ = p.Close()
	ev := p.exitEv
	if ev == nil {
		exit := Exit{Code: -1, Reason: ReasonSupervisorLost, Started: bootTime(p.startMono)}
		if pid := p.JobPID(); pid > 0 && os.Getenv(NoLostGroupKillEnv) != "1" {
			// The leader died with the supervisor (parent-death signal);
			// its children did not. Kill all of the job now, without
			// waiting for anything else (its output may never end).
			exit.DeadTime = p.killLost(pid, ConfirmTimeout)
		}
		p.removeCgroup(exit.DeadTime != 0)
		if p.errorEv != nil {
			return exit, fmt.Errorf("%w: %s", ErrSupervisorLost, p.errorEv.Error)
		}
		return exit, fmt.Errorf("%w: %w", ErrSupervisorLost, cmdErr)
	}
	exit := Exit{
		Code:     ev.Code,
		Signal:   ev.Signal,
		Reason:   ev.Reason,
		Started:  bootTime(p.startMono),
		Ended:    bootTime(ev.EndMono),
		DeadTime: ev.DeadMono,
		TermTime: ev.TermMono,
		KillTime: ev.KillMono,
	}
	if ev.DeadMono != 0 && p.cgroup != "" {
		// The supervisor saw its descendants gone; the cgroup says
		// whether anything of the job is left anywhere.
		if populated, err := cgroupPopulated(p.cgroup); err != nil || populated {
			exit.DeadTime = killCgroup(p.cgroup, ConfirmTimeout)
			if exit.DeadTime == 0 {
				ev.Error = fmt.Sprintf("job cgroup %s not empty %v after it was killed", p.cgroup, ConfirmTimeout)
			}
		}
	}
	if p.cgroup != "" {
		exit.Limit = limitHit(p.cgroup, p.limits)
	}
	p.removeCgroup(exit.DeadTime != 0)
	if exit.DeadTime == 0 {
		return exit, fmt.Errorf("%w: %s", ErrNotConfirmedDead, ev.Error)
	}
	return exit, nil
}

// removeCgroup removes the job's cgroup once nothing of the job is left
// (empty); a cgroup that may still hold processes is left as it is.
func (p *Process) removeCgroup(empty bool) {
	if p.cgroup == "" {
		return
	}
	if !empty {
		if populated, err := cgroupPopulated(p.cgroup); err != nil || populated {
			return
		}
	}
	removeCgroup(p.cgroup)
}

// autoCloseReader is a pipe's read end that closes itself at EOF.
type autoCloseReader struct {
	f   *os.File
	eof atomic.Bool
}

func (r *autoCloseReader) Read(b []byte) (int, error) {
	if r.eof.Load() {
		return 0, io.EOF
	}
	n, err := r.f.Read(b)
	if errors.Is(err, io.EOF) {
		r.eof.Store(true)
		_ = r.f.Close()
	}
	return n, err
}

// Close closes the pipe; it may be called more than once.
func (r *autoCloseReader) Close() error {
	if err := r.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("supervisor: close output pipe: %w", err)
	}
	return nil
}
