//go:build linux

package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// Spare is a supervisor started ahead of time: the process runs and waits
// for the job it is to start, so that starting a job at a tick costs one
// exec (the job's) instead of two. A Spare is used once, by Start, or
// dropped with Close; an unused Spare's supervisor exits when Close is
// called or the daemon dies (its spec pipe closes).
type Spare struct {
	p     *Process
	specW *os.File
	self  string
}

// Prepare starts a supervisor (the executable self with the single
// argument [Arg]) that waits for its job; hand it one with Spare.Start.
//
// It makes the calling process a child subreaper (PR_SET_CHILD_SUBREAPER):
// should a supervisor die, the job processes it leaves behind are
// re-parented to the caller, which [Process.Wait] kills and reaps.
func Prepare(self string) (*Spare, error) {
	var pipes [5][2]*os.File // spec, control, status, stdout, stderr: {read, write}
	closeAll := func() {
		for _, p := range pipes {
			for _, f := range p {
				if f != nil {
					_ = f.Close()
				}
			}
		}
	}
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("supervisor: create pipe: %w", err)
		}
		pipes[i] = [2]*os.File{r, w}
	}
	specR, specW := pipes[0][0], pipes[0][1]
	ctrlR, ctrlW := pipes[1][0], pipes[1][1]
	statR, statW := pipes[2][0], pipes[2][1]
	outR, outW := pipes[3][0], pipes[3][1]
	errR, errW := pipes[4][0], pipes[4][1]

	// The job processes a dying supervisor leaves behind come to the
	// daemon, which kills and reaps them (see killLostGroup). Without it
	// (a kernel older than 3.4) they go to init and are still killed.
	_ = becomeSubreaper()

	cmd := exec.Command(self, Arg)
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.ExtraFiles = []*os.File{specR, ctrlR, statW} // fds 3, 4, 5
	// Its own process group: a signal to the daemon's group (Ctrl-C,
	// Ctrl-Z in a terminal) does not reach the supervisor.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := cmd.Start()
	for _, f := range []*os.File{specR, ctrlR, statW, outW, errW} {
		_ = f.Close() // the supervisor has its copies
	}
	if err != nil {
		for _, f := range []*os.File{specW, ctrlW, statR, outR, errR} {
			_ = f.Close()
		}
		return nil, fmt.Errorf("supervisor: start supervisor %s: %w", self, err)
	}

	st, _ := readProcStat(cmd.Process.Pid) // it cannot have been reaped yet
	p := &Process{
		cmd:        cmd,
		supStart:   st.start,
		stdout:     &autoCloseReader{f: outR},
		stderr:     &autoCloseReader{f: errR},
		ctrl:       ctrlW,
		started:    make(chan struct{}),
		statusDone: make(chan struct{}),
	}
	go p.readStatus(statR) // ends when the supervisor exits

	return &Spare{p: p, specW: specW, self: self}, nil
}

// Close stops an unused Spare's supervisor and waits for it to exit. It
// is a no-op after Start.
func (sp *Spare) Close() error {
	if sp.specW == nil {
		return nil
	}
	_ = sp.specW.Close() // the supervisor reads EOF and exits
	sp.specW = nil
	_ = sp.p.Close()
	_, _ = sp.p.Wait()
	_ = sp.p.stdout.Close()
	_ = sp.p.stderr.Close()
	return nil
}

// Start has the spare supervisor start the job described by spec, with the
// semantics and errors of the package-level Start. A Spare can start one
// job (a spec that fails the checks before the supervisor sees it, such as
// a deadline already passed, leaves it unused); a later call fails. A
// Spare is not safe for concurrent use. When the spare's supervisor is gone (killed
// while it waited), Start fails with an error that is neither
// ErrDeadlinePassed nor ErrStart; the caller may start afresh.
func (sp *Spare) Start(ctx context.Context, spec Spec) (*Process, error) {
	if sp.specW == nil {
		return nil, errors.New("supervisor: spare already used or closed")
	}
	if err := checkSpec(ctx, spec); err != nil {
		return nil, err // the spare stays unused
	}
	p, specW, self := sp.p, sp.specW, sp.self
	sp.specW = nil
	p.contain = spec.Contain
	if spec.Contain.Cgroup() {
		name := spec.Name
		if name == "" {
			name = "job"
		}
		cg, err := newJobCgroup(spec.Contain.dir, name)
		if err != nil {
			_ = specW.Close() // the supervisor exits; Close/Wait reap it
			_ = p.Close()
			_, _ = p.Wait()
			_ = p.stdout.Close()
			_ = p.stderr.Close()
			return nil, fmt.Errorf("%w: %w", ErrStart, err)
		}
		p.cgroup, p.limits = cg, spec.Limits
		if err := applyLimits(cg, spec.Limits); err != nil {
			removeCgroup(cg)
			_ = specW.Close()
			_ = p.Close()
			_, _ = p.Wait()
			_ = p.stdout.Close()
			_ = p.stderr.Close()
			return nil, fmt.Errorf("%w: %w", ErrLimits, err)
		}
	}
	data, _ := json.Marshal(wireSpec{
		Path:      spec.Path,
		Args:      spec.Args,
		Env:       spec.Env,
		Dir:       spec.Dir,
		KillGrace: int64(spec.KillGrace),
		Deadline:  spec.Deadline,
		Cgroup:    p.cgroup,
	})
	_, werr := specW.Write(data) // a dead supervisor shows up as statusDone
	_ = specW.Close()

	select {
	case <-p.started:
	case <-p.statusDone:
	case <-ctx.Done():
	}
	select {
	case <-p.started: // also when it has ended already: Wait reports that
		return p, nil
	default:
	}
	// Not started, and either not startable or no longer wanted: make sure
	// nothing is left running, then say why.
	if ctx.Err() != nil {
		_ = p.Close()
	}
	_, waitErr := p.Wait()
	_ = p.stdout.Close()
	_ = p.stderr.Close()
	if ev := p.errorEv; ev != nil {
		switch ev.Kind {
		case errKindDeadline:
			return nil, fmt.Errorf("%w: %s", ErrDeadlinePassed, trimPrefix(ev.Error, ErrDeadlinePassed))
		case errKindStart:
			return nil, fmt.Errorf("%w: %s", ErrStart, trimPrefix(ev.Error, ErrStart))
		}
		return nil, fmt.Errorf("supervisor: setup failed: %s", ev.Error)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("supervisor: start: %w", err)
	}
	return nil, fmt.Errorf("supervisor: %s did not start the job: %w", self, errors.Join(waitErr, werr))
}
