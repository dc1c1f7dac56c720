//go:build linux

package supervisor

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Main is the supervisor's entry point. The daemon binary calls it, and
// exits with its result, when started with os.Args[1] == [Arg]:
//
//	if len(os.Args) > 1 && os.Args[1] == supervisor.Arg {
//		os.Exit(supervisor.Main(os.Args[2:]))
//	}
//
// It expects the pipes that [Start] sets up as file descriptors 3 (spec),
// 4 (control) and 5 (status); run by hand it reports an error and returns.
// It starts the job, enforces the deadline, reports on the status pipe and
// returns the job's exit code (128+n when the job died of signal n), or 125
// when the job could not be started.
func Main(args []string) int {
	return mainWith(args, superviseOpts{clk: sysClock{}})
}

// superviseOpts are the supervisor's test hooks: the clock it reads and
// whether it watches for a suspend (off only in a negative control).
type superviseOpts struct {
	clk            clock
	noSuspendCheck bool
}

// mainWith is Main with the clock and checks of opts.
func mainWith(args []string, opts superviseOpts) int {
	for _, fd := range []int{specFD, controlFD, statusFD} {
		syscall.CloseOnExec(fd) // the job must not inherit the pipes
	}
	st := &statusWriter{f: os.NewFile(statusFD, "status")}
	defer st.f.Close()
	if len(args) != 0 {
		st.error(errKindSetup, fmt.Errorf("supervisor: unexpected arguments %q", args))
		return exitSetup
	}
	spec, err := readSpec(os.NewFile(specFD, "spec"))
	if err != nil {
		st.error(errKindSetup, err)
		return exitSetup
	}
	return supervise(spec, st, opts)
}

// readSpec reads the JSON spec from the spec pipe.
func readSpec(f *os.File) (wireSpec, error) {
	if f == nil {
		return wireSpec{}, fmt.Errorf("supervisor: no spec pipe on fd %d", specFD)
	}
	defer f.Close()
	var spec wireSpec
	if err := json.NewDecoder(f).Decode(&spec); err != nil {
		return wireSpec{}, fmt.Errorf("supervisor: read spec: %w", err)
	}
	if spec.Path == "" || spec.KillGrace < 0 || spec.Deadline <= 0 {
		return wireSpec{}, fmt.Errorf("%w: path %q, kill grace %d, deadline %d",
			ErrInvalidSpec, spec.Path, spec.KillGrace, spec.Deadline)
	}
	return spec, nil
}

// supervise runs the job described by spec to its end.
func supervise(spec wireSpec, st *statusWriter, opts superviseOpts) int {
	// The daemon decides when a job stops: terminal and session signals
	// are ignored, SIGTERM is forwarded (see killer.run). Handled signals,
	// unlike ignored ones, are reset to default in the job by exec.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP,
		unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU)
	defer signal.Stop(sigs)

	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		st.error(errKindSetup, fmt.Errorf("supervisor: become child subreaper: %w", err))
		return exitSetup
	}
	if err := syscall.SetNonblock(controlFD, true); err != nil {
		st.error(errKindSetup, fmt.Errorf("supervisor: control pipe: %w", err))
		return exitSetup
	}
	ctrl := newControlReader(os.NewFile(controlFD, "control"))

	if now := BootNow(); spec.Deadline <= now {
		st.error(errKindDeadline, fmt.Errorf("%w: %v ago", ErrDeadlinePassed, time.Duration(now-spec.Deadline)))
		return exitSetup
	}
	pid, err := startJob(spec)
	if err != nil {
		st.error(errKindStart, err)
		return exitSetup
	}
	startMono := BootNow()
	fam := newFamily(pid)
	fam.cgroup = spec.Cgroup
	go fam.reap() // ends when no descendant is left; see family.reap
	st.write(startedEvent{Event: eventStarted, PID: pid, StartMono: startMono})

	go ctrl.run()
	defer ctrl.stop()

	k := &killer{
		fam:       fam,
		clk:       opts.clk,
		grace:     spec.KillGrace,
		deadline:  spec.Deadline,
		forceTerm: math.MaxInt64,
		forceKill: math.MaxInt64,
	}
	if os.Getenv(NoDeadlineKillEnv) == "1" {
		k.noDeadline = true
	}
	if !opts.noSuspendCheck {
		k.watch = newSuspendWatch(opts.clk)
	}
	k.run(ctrl.msgs, sigs)
	deadMono := fam.confirm(ConfirmTimeout)

	ev := exitEvent{Event: eventExit, Code: -1, Reason: k.reason, DeadMono: deadMono,
		TermMono: k.termMono, KillMono: k.killMono}
	if ev.Reason == "" {
		ev.Reason = ReasonExited
	}
	ws, reaped, endMono := fam.leaderResult()
	switch {
	case !reaped:
		ev.Error = fmt.Sprintf("job process %d still alive %v after it was killed", pid, ConfirmTimeout)
	case ws.Signaled():
		ev.Code = 128 + int(ws.Signal())
		ev.Signal = unix.SignalName(ws.Signal())
		if ev.Signal == "" {
			ev.Signal = fmt.Sprintf("signal %d", int(ws.Signal()))
		}
		ev.EndMono = endMono
	default:
		ev.Code = ws.ExitStatus()
		ev.EndMono = endMono
	}
	if reaped && deadMono == 0 && ev.Error == "" {
		ev.Error = fmt.Sprintf("processes of job %d still alive %v after they were killed", pid, ConfirmTimeout)
	}
	st.write(ev)
	if ev.Code < 0 {
		return exitSetup
	}
	return ev.Code
}

// startJob starts the job in its own process group, with SIGKILL as its
// parent-death signal, in the cgroups v1 spec.V1, and in the cgroup
// spec.Cgroup if set: clone3 puts
// the child there before it runs a single instruction of its own, so that
// nothing it forks can be outside. Pdeathsig fires when the thread that forked the job
// exits (golang/go#27505), so the fork happens on a locked thread; Go ends a
// thread only when a goroutine exits while locked to it, which this one
// does not.
func startJob(spec wireSpec) (int, error) {
	cmd := exec.Command(spec.Path, spec.Args...)
	if cmd.Err != nil {
		return 0, fmt.Errorf("%w: %w", ErrStart, cmd.Err)
	}
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	cmd.Stdout = os.Stdout // the daemon's pipes, inherited by the supervisor
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if spec.Cgroup != "" {
		cg, err := os.Open(spec.Cgroup)
		if err != nil {
			return 0, fmt.Errorf("%w: open job cgroup: %w", ErrStart, err)
		}
		defer cg.Close()
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(cg.Fd())
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The job's cgroups v1: this thread enters them, forks the job there
	// and returns home (see limitsv1.go). New threads of the runtime are
	// not cloned from a locked one, so none of them lands there.
	err := enterV1(spec.V1)
	if err == nil {
		err = cmd.Start()
	}
	if leave := leaveV1(spec.V1); leave != nil && err == nil {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		return 0, fmt.Errorf("%w: %w", ErrStart, leave)
	}
	if err != nil {
		if spec.Dir != "" { // a bad Dir is reported as the program's error
			return 0, fmt.Errorf("%w: %w (working directory %q)", ErrStart, err, spec.Dir)
		}
		return 0, fmt.Errorf("%w: %w", ErrStart, err)
	}
	pid := cmd.Process.Pid
	// The job is reaped by family.reap with wait4, not by cmd.Wait; drop
	// the handle (a pidfd) without waiting.
	_ = cmd.Process.Release()
	return pid, nil
}

// killer decides when to signal the job. All instants are CLOCK_BOOTTIME
// nanoseconds, read from clk.
type killer struct {
	fam      *family
	clk      clock
	watch    *suspendWatch // nil: no suspend check (a negative control)
	grace    int64         // KillGrace
	deadline int64         // latest deadline received

	// noDeadline turns the deadline kill off (NoDeadlineKillEnv): a
	// negative control for tests only.
	noDeadline bool

	// forceTerm/forceKill: SIGTERM/SIGKILL instants requested by Terminate,
	// a SIGTERM to the supervisor or the daemon going away; MaxInt64 if
	// none. forceReason names the first such request.
	forceTerm, forceKill int64
	forceReason          string

	reason             string // why the first signal was sent; "" if none was
	termSent, killSent bool
	termMono, killMono int64 // when SIGTERM and SIGKILL were sent
}

func (k *killer) termAt() int64 {
	if k.noDeadline {
		return k.forceTerm
	}
	return min(k.deadline-k.grace, k.forceTerm)
}

func (k *killer) killAt() int64 {
	if k.noDeadline {
		return k.forceKill
	}
	return min(k.deadline, k.forceKill)
}

// force requests SIGTERM at termAt and SIGKILL at killAt (or at the deadline
// if that is earlier).
func (k *killer) force(reason string, termAt, killAt int64) {
	if k.forceReason == "" {
		k.forceReason = reason
	}
	k.forceTerm = min(k.forceTerm, termAt)
	k.forceKill = min(k.forceKill, killAt)
}

// step sends the signals due at now and returns when the next one is due.
func (k *killer) step(now int64) int64 {
	if !k.termSent && now >= k.termAt() {
		k.noteReason(now, k.forceTerm)
		k.fam.signal(unix.SIGTERM)
		k.termSent, k.termMono = true, now
	}
	if !k.killSent && now >= k.killAt() {
		k.noteReason(now, k.forceKill)
		k.fam.signal(unix.SIGKILL)
		k.killSent, k.killMono = true, now
	}
	switch {
	case !k.termSent:
		return k.termAt()
	case !k.killSent:
		return k.killAt()
	}
	return math.MaxInt64
}

func (k *killer) noteReason(now, forced int64) {
	if k.reason != "" {
		return
	}
	if forced <= now {
		k.reason = k.forceReason
	} else {
		k.reason = ReasonDeadline
	}
}

// run handles deadlines, control messages and signals until the job leader
// has exited or SIGKILL has been sent. It ends by the deadline at the
// latest, unless a later deadline arrives through the control pipe.
//
// When the host was suspended since the job started (CLOCK_BOOTTIME ran
// ahead of CLOCK_MONOTONIC), the lease may have expired on the servers
// while no timer here or in the daemon ran: the job is SIGKILLed at once
// (ReasonSuspended), whatever deadline the daemon sends.
func (k *killer) run(ctrl <-chan controlMsg, sigs <-chan os.Signal) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var check <-chan time.Time
	if k.watch != nil {
		t := time.NewTicker(suspendCheckEvery)
		defer t.Stop()
		check = t.C
	}
	for {
		now := k.clk.boot()
		if k.watch != nil {
			if d := k.watch.suspended(); d > suspendThreshold && !k.killSent {
				// SIGKILL now, without SIGTERM: the grace is past.
				k.force(ReasonSuspended, now, now)
				k.termSent = true
			}
		}
		next := k.step(now)
		if k.killSent {
			return
		}
		timer.Reset(time.Duration(next - now))
		select {
		case <-k.fam.leaderExit:
			return
		case m, ok := <-ctrl:
			now := k.clk.boot()
			switch {
			case !ok: // the daemon closed the pipe or died
				ctrl = nil
				k.force(ReasonDaemonGone, now, now+k.grace)
			case m.kind == msgDeadline:
				k.deadline = m.value // the latest value wins, earlier or not
			case m.kind == msgTerm:
				k.force(ReasonTerminated, now, now+max(m.value, 0))
			}
		case sig := <-sigs:
			if sig == unix.SIGTERM {
				now := k.clk.boot()
				k.force(ReasonTerminated, now, now+k.grace)
			}
		case <-timer.C:
		case <-check:
		}
	}
}

// controlReader turns control-pipe lines into messages; msgs is closed at
// EOF or on a read error.
type controlReader struct {
	f       *os.File
	msgs    chan controlMsg
	done    chan struct{}
	stopped chan struct{}
}

func newControlReader(f *os.File) *controlReader {
	return &controlReader{
		f:       f,
		msgs:    make(chan controlMsg),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
}

func (c *controlReader) run() {
	defer close(c.stopped)
	defer close(c.msgs)
	sc := bufio.NewScanner(c.f)
	for sc.Scan() {
		m, err := parseControl(sc.Text())
		if err != nil {
			continue // unknown or malformed: ignored, for compatibility
		}
		select {
		case c.msgs <- m:
		case <-c.done:
			return
		}
	}
}

// stop ends run: the pipe is non-blocking, so Close interrupts a Read.
func (c *controlReader) stop() {
	close(c.done)
	_ = c.f.Close()
	<-c.stopped
}

// statusWriter writes status events; errors are ignored, as the daemon may
// be gone.
type statusWriter struct {
	mu sync.Mutex
	f  *os.File
}

func (s *statusWriter) write(v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		_, _ = s.f.Write(marshalLine(v)) // one write, < PIPE_BUF: atomic
	}
}

func (s *statusWriter) error(kind string, err error) {
	s.write(errorEvent{Event: eventError, Kind: kind, Error: err.Error()})
}
