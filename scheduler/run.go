package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leasecron/leasecron/internal/supervisor"
	"github.com/leasecron/leasecron/lease"
)

// RunRecord describes one run of a job; the last one of each job is stored
// beside its lease so `leasecron status` can show it.
type RunRecord struct {
	Job  string    `json:"job"`
	Host string    `json:"host"`
	Tick time.Time `json:"tick"` // zero for a manual trigger
	// Attempt is the attempt of the tick, from 1 (retries: see
	// Job.Retries); 1 for a manual trigger.
	Attempt int       `json:"attempt"`
	Fence   int64     `json:"fence"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Exit    int       `json:"exit"`
	Signal  string    `json:"signal,omitempty"`
	// Result is ok, failed (non-zero exit), timeout, oom or limit (killed
	// or held back by the job's memory_max, tasks_max or cpu_max: see
	// ResultOOM, ResultLimit), aborted (lease lost), shutdown (stopped by
	// the daemon's shutdown), stopped (its job was paused with --stop),
	// error (could not start) or dry_run (won with Options.DryRun: not
	// started, the tick completed); for a tick that did not run, missed
	// or skipped (see Reason). FailedResult says which are failures.
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
	// Reason says why a tick was missed or skipped (result missed or
	// skipped: see MissNoQuorum and the other Miss constants).
	Reason string `json:"reason,omitempty"`
	// Output is the tail of the run's output (output_limit bytes), in
	// the job's history only (see Output).
	Output *Output `json:"output,omitempty"`
}

// Duration is how long the run took.
func (r RunRecord) Duration() time.Duration { return r.End.Sub(r.Start) }

// runState is a running job, for status, shutdown and pause --stop.
type runState struct {
	tick    time.Time
	proc    *supervisor.Process
	started time.Time
	// stop receives the pause flag of a `pause --stop` of the job.
	stop chan PauseInfo
}

// killMargin is how long before the lease's validity ends the supervisor
// must have killed the job: it leaves room for the kill itself and for
// process scheduling delays of the supervisor (lease.KillMargin, the
// margin the config's timing rule counts).
func (s *Scheduler) killMargin() time.Duration { return lease.KillMargin(s.be.Timeout()) }

// runLeased runs attempt attempt (from 1) of job j for tick under lease l
// (already acquired), renewing it while the job runs, records the run in
// the job's history, and completes the tick (or releases the lease when
// the run was cut short by a lost lease, shutdown or pause --stop, or
// when it failed and is to be retried: then retryAt is when the retry is
// due). It fires the job's hooks: on_start once the job started, then
// on_success or on_failure (see endEvent).
//
// Its phases: start the job (startRun), keep its lease (holdRun), wait
// for its end or a reason to cut it short (watchRun), name the result
// (result), decide how the tick ends (settle), record and complete it
// (finish).
func (s *Scheduler) runLeased(hard context.Context, cfg *Config, j *Job, tick time.Time, l lease.Lease, attempt int, log *slog.Logger) (rec RunRecord, retryAt time.Time) {
	manual := l.Epoch() == 0
	rec = RunRecord{Job: j.Name, Host: s.host, Fence: l.Fence(), Start: time.Now(), Attempt: attempt}
	if !manual {
		rec.Tick = tick.UTC()
	}
	log = log.With("fence", l.Fence())
	if attempt > 1 {
		log = log.With("attempt", attempt)
	}
	s.opts.Metrics.Attempt(j.Name, attempt)
	if s.opts.DryRun {
		// Nothing runs: the tick is recorded and completed as if the job
		// had succeeded at once.
		rec.End, rec.Result = time.Now(), "dry_run"
		log.Info("dry run: won the tick; not starting the job")
		s.finish(j, l, nil, rec, !manual, false, log)
		return rec, time.Time{}
	}

	r, err := s.startRun(j, tick, l, manual, rec, log)
	if err != nil {
		log.Error("job could not be started", "err", err)
		rec.End, rec.Result, rec.Exit, rec.Error = time.Now(), "error", -1, err.Error()
		// It did not run: release so another host (or a retry) can try.
		s.finish(j, l, nil, rec, false, false, log)
		s.runEnded(j, rec, manual, false)
		return rec, time.Time{}
	}
	defer r.done()
	s.fireHook(j, runEvent(EventStart, rec, manual))
	hold := s.holdRun(cfg, j, l, r.proc, log)
	w, cut := s.watchRun(hard, j, r, hold, log)
	s.drainOutput(r.proc, &r.out.wg, log)
	rec.End, rec.Output = time.Now(), r.out.result()
	rec.Exit, rec.Signal = w.exit.Code, w.exit.Signal
	rec.Result, rec.Error = s.result(j, r, w, cut, log)
	complete, lapse, retryAt := s.settle(hard, j, tick, l, hold, rec, w, manual, log)
	s.finish(j, l, hold, rec, complete && !manual, lapse, log)
	r.out.done(rec)
	s.runEnded(j, rec, manual, !retryAt.IsZero())
	return rec, retryAt
}

// activeRun is a job started by runLeased: its supervised process, the
// readers of its output, its end and its pause --stop channel.
type activeRun struct {
	proc   *supervisor.Process
	out    *runOutput // its output's readers and tail (output_run.go)
	exited chan runExit
	stop   chan PauseInfo
	done   func() // forgets the run (status, metrics)
}

// runExit is how a job's supervised process ended.
type runExit struct {
	exit supervisor.Exit
	err  error
}

// startRun starts run rec of the job, registers it as running and starts
// the readers of its output and of its end.
func (s *Scheduler) startRun(j *Job, tick time.Time, l lease.Lease, manual bool, rec RunRecord, log *slog.Logger) (*activeRun, error) {
	log.Debug("starting the job")
	proc, err := s.startJob(j, tick, l, manual, rec.Attempt)
	if err != nil {
		return nil, err
	}
	r := &activeRun{proc: proc, exited: make(chan runExit, 1), stop: make(chan PauseInfo, 1)}
	s.mu.Lock()
	s.running[j.Name] = &runState{tick: tick, proc: proc, started: rec.Start, stop: r.stop}
	s.mu.Unlock()
	s.opts.Metrics.Running(j.Name, 1)
	r.done = func() {
		s.mu.Lock()
		delete(s.running, j.Name)
		s.mu.Unlock()
		s.opts.Metrics.Running(j.Name, -1)
	}
	log.Info("job started", "pid", proc.JobPID(), "valid_until", l.ValidUntil())
	r.out = s.captureOutput(j, rec, proc, log) // output.go, output_run.go
	go func() {
		// Not after the output's EOF: a process outside the job's group
		// (or one left by a dead supervisor) may hold the pipes open, and
		// Wait is what kills the group when the supervisor is lost.
		e, err := proc.Wait()
		r.exited <- runExit{e, err}
	}()
	return r, nil
}

// holdRun keeps l renewed while the job runs, extending the supervisor's
// deadline with each renewal.
func (s *Scheduler) holdRun(cfg *Config, j *Job, l lease.Lease, proc *supervisor.Process, log *slog.Logger) *lease.Hold {
	margin := s.killMargin()
	holdOpts := []lease.HoldOption{
		lease.RenewEvery(cfg.Lease.Renew),
		lease.ObserveRenew(func(e lease.RenewEvent) { s.opts.Metrics.Renew(e.Key, e.OK, e.Latency) }),
		lease.OnRenew(func(v time.Time) {
			// Logged before the supervisor is extended, so the log never
			// lags the deadline the supervisor enforces (the fault suite
			// measures abort slack from it).
			log.Debug("lease renewed", "valid_until", v)
			switch err := proc.Extend(supervisor.BootDeadline(v.Add(-margin))); {
			case err == nil:
			case errors.Is(err, syscall.EPIPE) || errors.Is(err, supervisor.ErrClosed):
				// The job just ended and its supervisor with it; Wait
				// reports how.
				log.Debug("supervisor already gone; not extended", "err", err)
			default:
				log.Warn("could not extend the supervisor's deadline", "err", err)
			}
		}),
	}
	if j.Timeout > 0 {
		// Renewal is not forever: past timeout + kill_grace the lease runs
		// out even if the job refuses to die (the supervisor kills it).
		holdOpts = append(holdOpts, lease.MaxLifetime(j.Timeout+j.KillGrace+time.Second))
	}
	return lease.NewHold(l, s.be.Timeout(), holdOpts...)
}

// runCut says why watchRun stopped a run (aborted, timeout, shutdown,
// stopped; "" when nothing did) and when it decided to.
type runCut struct {
	why string
	at  time.Time
}

// watchRun waits for the job's end; a lost lease, the job's timeout, the
// daemon's shutdown (hard) or a pause --stop stop it first. cut says
// which of those did. A lease lost while the job was being stopped for
// another reason makes the cut aborted: the tick is no longer this
// host's, whatever stopped the job. A stop the supervisor did not take
// (askStop) is asked again every terminateRetry until it does.
func (s *Scheduler) watchRun(hard context.Context, j *Job, r *activeRun, hold *lease.Hold, log *slog.Logger) (w runExit, cut runCut) {
	var timeout <-chan time.Time
	if j.Timeout > 0 {
		t := time.NewTimer(j.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	// retry asks for the stop again (through retryC, nil while no ask
	// is due) terminateRetry after one that did not reach the supervisor.
	retry := time.NewTimer(terminateRetry)
	retry.Stop()
	defer retry.Stop()
	var retryC <-chan time.Time
	tries := 0
	ask := func() {
		tries++
		retryC = nil
		if askStop(r.proc, j.KillGrace, tries, log) {
			retry.Reset(terminateRetry)
			retryC = retry.C
		}
	}
	// stopFor stops the run for why (the first reason only). The abort
	// is counted once the run's result is known (result), not here: the
	// job may have ended on its own first.
	stopFor := func(why string, logf func(string, ...any), msg string, args ...any) {
		if cut.why != "" {
			return
		}
		cut = runCut{why: why, at: time.Now()}
		logf(msg, args...)
		ask()
	}
	// Each case fires once: a closed channel left in the select would make
	// it spin for as long as the job lingers.
	holdDone, hardDone, stopC := hold.Done(), hard.Done(), (<-chan PauseInfo)(r.stop)
	for {
		select {
		case w = <-r.exited:
			return w, cut
		case <-holdDone:
			holdDone = nil
			if cut.why != "" {
				log.Error("lease lost while the job was being stopped", "stop", cut.why, "err", hold.Err())
				cut.why = "aborted"
				continue
			}
			stopFor("aborted", log.Error, "lease lost; stopping the job before its validity ends", "err", hold.Err())
		case <-timeout:
			timeout = nil
			stopFor("timeout", log.Warn, "job timed out; stopping it", "timeout", j.Timeout)
		case <-hardDone:
			hardDone = nil
			stopFor("shutdown", log.Warn, "shutting down; stopping the job", "kill_grace", j.KillGrace)
		case pi := <-stopC:
			stopC = nil
			stopFor("stopped", log.Warn, "job paused with --stop; stopping the run",
				"paused_by", pi.By, "reason", pi.Reason, "kill_grace", j.KillGrace)
		case <-retryC:
			ask()
		}
	}
}

// outputDrain bounds how long a run waits, once its job is dead, for the
// rest of the job's output: only a process outside the job's group can
// hold the pipes open that long, and it must not hold up the run.
const outputDrain = time.Second

// drainOutput waits for the output readers to reach EOF, at most
// outputDrain, then closes the pipes (which ends the readers).
func (s *Scheduler) drainOutput(proc *supervisor.Process, outWG *sync.WaitGroup, log *slog.Logger) {
	drained := make(chan struct{})
	go func() { outWG.Wait(); close(drained) }()
	t := time.NewTimer(outputDrain)
	defer t.Stop()
	select {
	case <-drained:
		return
	case <-t.C:
	}
	log.Warn("the job's output is still open after it ended (held by a process outside its group?); closing it",
		"wait", outputDrain)
	_ = proc.Stdout().Close()
	_ = proc.Stderr().Close()
	<-drained
}

// finish records the run in the job's history (first: a completed tick
// always has its record, unless the store stayed unreachable), then
// completes or releases the lease (with lapse: stops renewing it and
// leaves it to run out), stores the last run beside the lease and logs
// it.
func (s *Scheduler) finish(j *Job, l lease.Lease, hold *lease.Hold, rec RunRecord, complete, lapse bool, log *slog.Logger) {
	cfg := s.cfg.Load()
	s.appendHistory(j, rec, log)
	ctx, cancel := context.WithTimeout(context.Background(), max(cfg.Lease.TTL, 5*time.Second))
	defer cancel()
	var err error
	switch {
	case lapse && hold != nil:
		hold.Stop()
		s.lapsed(l)
	case lapse:
		s.lapsed(l)
	case complete && hold != nil:
		err = hold.Complete(ctx)
	case complete:
		err = l.Complete(ctx)
	case hold != nil:
		err = hold.Release(ctx)
	default:
		err = l.Release(ctx)
	}
	if err != nil {
		log.Error("could not complete/release the lease", "complete", complete, "err", err)
	}
	completed := complete && !lapse && err == nil // confirmed on the store
	s.opts.Metrics.RunFinished(rec.Job, rec.Result, rec.Duration())
	note := rec
	note.Output = nil // in the history only: a note stays small
	if b, jerr := json.Marshal(note); jerr == nil {
		if err := s.be.SetNote(ctx, l.Key(), rec.End.UnixMilli(), string(b)); err != nil {
			log.Warn("could not record the run", "err", err)
		}
	}
	log.Info("job finished", "result", rec.Result, "exit", rec.Exit, "signal", rec.Signal,
		"duration", rec.Duration().Round(time.Millisecond), "completed", completed, "attempt", rec.Attempt)
}

// startJob starts the job's supervisor with the LEASECRON_* environment.
func (s *Scheduler) startJob(j *Job, tick time.Time, l lease.Lease, manual bool, attempt int) (*supervisor.Process, error) {
	env := jobEnv(os.Environ(), j.Env)
	tickUnix := tick.Unix()
	env = append(env,
		"LEASECRON_JOB="+j.Name,
		"LEASECRON_TICK="+tick.UTC().Format(time.RFC3339),
		"LEASECRON_TICK_UNIX="+strconv.FormatInt(tickUnix, 10),
		"LEASECRON_FENCING_TOKEN="+strconv.FormatInt(l.Fence(), 10),
		"LEASECRON_HOST="+s.host,
		"LEASECRON_ATTEMPT="+strconv.Itoa(attempt),
	)
	if manual {
		env = append(env, "LEASECRON_MANUAL=1")
	}
	// supervisor.Spec.Args are argv[1:] (the program name is not repeated).
	path, args := "/bin/sh", []string{"-c", j.Shell}
	if len(j.Command) > 0 {
		path, args = j.Command[0], j.Command[1:]
	}
	deadline := supervisor.BootDeadline(l.ValidUntil().Add(-s.killMargin()))
	proc, err := s.startSupervised(supervisor.Spec{
		Path: path, Args: args, Env: env, Dir: j.Dir, KillGrace: j.KillGrace, Deadline: deadline,
		Contain: s.contain, Name: j.Name, Limits: jobLimits(j),
	})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", j.Name, err)
	}
	return proc, nil
}

// Trigger runs job once now, under its lease, and waits for it. It does not
// mark any tick completed. It fails at once if the lease is held, or if
// the job's limits cannot be applied on this host (CannotLimit).
func (s *Scheduler) Trigger(ctx context.Context, name string) (RunRecord, error) {
	cfg := s.cfg.Load()
	j := cfg.Job(name)
	if j == nil {
		return RunRecord{}, fmt.Errorf("trigger: no job named %q in %s", name, cfg.File)
	}
	if err := s.CannotLimit(j); err != nil {
		return RunRecord{}, fmt.Errorf("trigger: %w", err) // never run unlimited
	}
	// A fresh process: open the connections first, so that the node
	// timeout measures the acquisition, not a dial and TLS handshake.
	s.warm(ctx)
	// One attempt: trigger fails at once when the job runs anywhere.
	res := s.be.TryAcquireBatch(ctx, []lease.Request{{Key: s.key(j.Name), TTL: cfg.Lease.TTL, Owner: "tick=manual host=" + s.host}})[0]
	l, err := res.Lease, res.Err
	if err != nil {
		return RunRecord{}, fmt.Errorf("trigger %s: %w", name, err)
	}
	log := s.log.With("job", j.Name, "tick", "manual")
	defer s.startHooks()()
	rec, _ := s.runLeased(ctx, cfg, j, s.now(), l, 1, log)
	if rec.Result == "error" {
		return rec, errors.New(rec.Error)
	}
	return rec, nil
}

// jobEnv is the environment a job starts with: the daemon's own, minus what
// belongs to the daemon alone (systemd's notify socket, watchdog and socket
// activation variables, which would let a job speak for the service, and
// any LEASECRON_* variable, which the run's own values replace), plus the
// job's env from the config.
func jobEnv(daemon []string, extra map[string]string) []string {
	env := make([]string, 0, len(daemon)+len(extra)+6)
	for _, kv := range daemon {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "NOTIFY_SOCKET", strings.HasPrefix(name, "WATCHDOG_"),
			strings.HasPrefix(name, "LISTEN_"), strings.HasPrefix(name, "LEASECRON_"):
			continue
		}
		env = append(env, kv)
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}
