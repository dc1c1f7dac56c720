package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// A job's hooks (on_start, on_success, on_failure, on_missed) fire on one
// host, once per event, never in the scheduler's way:
//
//   - The host where the event happens (the run's host; for a missed
//     tick the host that recorded it) queues it; a full queue drops it
//     (logged and counted): the scheduler never waits for a hook.
//   - A few workers, owned by the scheduler's Run (or by the Exec or
//     Trigger that queued it), take the events from the queue. For an
//     event of a tick, a worker takes the guard of the job's event (see
//     guard.go: a mutex "JOB@hook.EVENT" without epoch, waited for while
//     another host or worker holds it), skips the event if its done mark
//     (JOB.hook.EVENT.<unix tick>) is stored, else delivers it and writes
//     the mark: a tick taken over by another host after its run started,
//     or a failure recorded twice, fires its hook once, whatever the
//     order in which ticks' events come. A manual run's events are its
//     host's alone and fire without a guard.
//   - Delivery is tried 1 + retries times with a doubling backoff;
//     failures are logged and counted (leasecron_hook_failures_total).
//
// The done mark is written before the delivery, so a host that dies while
// it delivers loses the event (the mutex runs out; no host delivers it
// again): hooks are at most once on a host crash, exactly once otherwise. Delivery is bounded by the hook's
// timeout × (1 + retries) plus the backoff, and by the drain at the end.

// HookEvent is what a hook is told: the JSON body of a webhook, the
// LEASECRON_* environment of a command.
type HookEvent struct {
	Event string    `json:"event"` // start, success, failure or missed
	Job   string    `json:"job"`
	Host  string    `json:"host"`
	Tick  time.Time `json:"tick"` // zero for a manual run
	// Manual is set for a run by `leasecron trigger` or `exec` without a
	// schedule.
	Manual   bool    `json:"manual,omitempty"`
	Attempt  int     `json:"attempt,omitempty"`
	Fence    int64   `json:"fence,omitempty"`
	Result   string  `json:"result,omitempty"` // as in the history (missed, skipped for on_missed)
	Exit     int     `json:"exit_code"`
	Signal   string  `json:"signal,omitempty"`
	Duration float64 `json:"duration_seconds"`
	// Reason says why a tick was missed (see MissReasons).
	Reason string `json:"reason,omitempty"`
	// OutputTail is the end of the run's output (stdout and stderr as
	// they came, redacted), at most hookTailSize bytes.
	OutputTail string  `json:"output_tail,omitempty"`
	output     *Output // all of the run's tail, for a command's file
	// Text is a one-line summary, so that a Slack-style incoming webhook
	// (which shows "text") takes the body as it is.
	Text string `json:"text"`
}

// hookTask is one queued event with the hook that fires on it.
type hookTask struct {
	ev   HookEvent
	hook *Hook
	job  *Job
}

// Sizes of the hook machinery.
const (
	hookQueueSize = 256
	hookWorkers   = 4
	// hookDrain bounds how long Run, Exec and Trigger wait, at their end,
	// for queued hooks.
	hookDrain = 10 * time.Second
)

// hookQueue is the bounded queue of events and its workers.
type hookQueue struct {
	ch      chan hookTask
	mu      sync.Mutex
	serving int // workers' owners running (serve calls)
	pending sync.WaitGroup
}

func newHookQueue() *hookQueue { return &hookQueue{ch: make(chan hookTask, hookQueueSize)} }

// fireHook queues the event ev of job j if j has a hook for it. It never
// blocks: with no worker serving, or the queue full, the event is dropped,
// logged and counted.
func (s *Scheduler) fireHook(j *Job, ev HookEvent) {
	h := j.Hooks.For(ev.Event)
	if h == nil {
		return
	}
	ev.Host = s.host
	ev.Text = hookText(ev)
	q := s.hooks
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.serving == 0 {
		s.log.Warn("hook not fired: the scheduler is not running", "job", j.Name, "event", ev.Event)
		s.opts.Metrics.HookFailed(j.Name, ev.Event, "not_running")
		return
	}
	q.pending.Add(1)
	select {
	case q.ch <- hookTask{ev: ev, hook: h, job: j}:
	default:
		q.pending.Done()
		s.log.Error("hook queue full; event dropped", "job", j.Name, "event", ev.Event, "queue", hookQueueSize)
		s.opts.Metrics.HookFailed(j.Name, ev.Event, "queue_full")
	}
}

// startHooks starts the hook workers and returns the function that stops
// them: it waits up to hookDrain for the queued events (the events of
// runs that ended in the shutdown grace still fire), drops the rest and
// returns once its workers are gone. Run, Exec and Trigger each own one.
func (s *Scheduler) startHooks() (stop func()) {
	q := s.hooks
	q.mu.Lock()
	q.serving++
	q.mu.Unlock()
	work, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range hookWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-work.Done():
					return
				case t := <-q.ch:
					s.runHook(work, t)
					q.pending.Done()
				}
			}
		}()
	}
	var once sync.Once
	return func() { once.Do(func() { s.stopHooks(cancel, &wg) }) }
}

// stopHooks is startHooks' stop: the last owner to stop drains the queue.
func (s *Scheduler) stopHooks(cancel context.CancelFunc, wg *sync.WaitGroup) {
	q := s.hooks
	q.mu.Lock()
	q.serving--
	last := q.serving == 0
	q.mu.Unlock()
	if !last {
		cancel()
		wg.Wait()
		return
	}
	drained := make(chan struct{})
	go func() { q.pending.Wait(); close(drained) }()
	t := time.NewTimer(hookDrain)
	select {
	case <-drained:
	case <-t.C:
		s.log.Warn("hooks still queued or running at the end; dropping them", "waited", hookDrain)
	}
	t.Stop()
	cancel()
	wg.Wait()
	// The workers are gone: drop what is left, so the drain goroutine ends.
	for {
		select {
		case t := <-q.ch:
			s.opts.Metrics.HookFailed(t.job.Name, t.ev.Event, "shutdown")
			q.pending.Done()
			continue
		default:
		}
		break
	}
	<-drained
}

// hookKey is the lease key of the mutex that guards the hooks of event
// of job (see guard.go).
func (s *Scheduler) hookKey(job, event string) string { return s.key(job) + "@hook." + event }

// runHook delivers one event: for a tick, under the hook's guard, unless
// a host marked it done. Delivery ends with ctx (the workers', cancelled
// at the end of the drain) or when the guard's mutex is lost.
func (s *Scheduler) runHook(ctx context.Context, t hookTask) {
	log := s.log.With("job", t.job.Name, "event", t.ev.Event, "hook", t.hook.Describe())
	if !t.ev.Tick.IsZero() {
		log = log.With("tick", t.ev.Tick.UTC().Format(time.RFC3339))
	}
	if t.ev.Tick.IsZero() || s.noHookGuard {
		s.deliverCounted(ctx, t, log)
		return
	}
	cfg := s.cfg.Load()
	owner := "hook " + t.ev.Event + " tick=" + strconv.FormatInt(t.ev.Tick.Unix(), 10) + " host=" + s.host
	l, err := s.lockGuard(ctx, s.hookKey(t.job.Name, t.ev.Event), owner, log)
	if err != nil {
		log.Error("hook not fired: its guard could not be taken", "err", err)
		s.opts.Metrics.HookFailed(t.job.Name, t.ev.Event, "no_lease")
		return
	}
	hold := lease.NewHold(l, s.be.Timeout(), lease.RenewEvery(cfg.Lease.Renew))
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), s.requestWait())
		defer cancel()
		if err := hold.Release(rctx); err != nil {
			log.Debug("could not release the hook's guard; it runs out", "err", err)
		}
	}()
	if s.test.hookIgnoresDrain {
		ctx = context.Background()
	}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(hold.Ctx(), cancel)()
	name := s.doneName(t.job.Name, "hook."+t.ev.Event, t.ev.Tick)
	done, err := s.readDone(dctx, name)
	switch {
	case err != nil:
		log.Error("hook not fired: could not read whether a host fired it", "err", err)
		s.opts.Metrics.HookFailed(t.job.Name, t.ev.Event, "no_lease")
		return
	case done:
		log.Debug("hook already fired by a host")
		return
	}
	// The mark goes first: a host that dies while it delivers loses the
	// event rather than have another host (one that queued the same event
	// of the tick: a takeover) deliver it a second time.
	if err := s.markDone(dctx, name, log); err != nil {
		log.Error("hook not fired: could not mark it fired", "err", err)
		s.opts.Metrics.HookFailed(t.job.Name, t.ev.Event, "no_lease")
		return
	}
	s.deliverCounted(dctx, t, log)
}

// deliverCounted delivers t's hook with its retries and counts the
// outcome.
func (s *Scheduler) deliverCounted(ctx context.Context, t hookTask, log *slog.Logger) {
	err := s.deliver(ctx, t, log)
	if err != nil {
		log.Error("hook failed", "err", err)
		s.opts.Metrics.HookFailed(t.job.Name, t.ev.Event, "failed")
		return
	}
	log.Info("hook fired")
	s.opts.Metrics.HookFired(t.job.Name, t.ev.Event)
}

// deliver tries the hook 1 + Retries times, doubling the wait from 1s.
func (s *Scheduler) deliver(ctx context.Context, t hookTask, log *slog.Logger) error {
	wait := time.Second
	var err error
	for try := 0; try <= t.hook.Retries; try++ {
		if try > 0 {
			tm := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				tm.Stop()
				return errors.Join(err, ctx.Err())
			case <-tm.C:
			}
			wait = min(2*wait, 30*time.Second)
		}
		if t.hook.URL != "" {
			err = s.post(ctx, t)
		} else {
			err = s.runHookCommand(ctx, t)
		}
		if err == nil {
			return nil
		}
		if try < t.hook.Retries {
			log.Warn("hook failed; retrying", "err", err, "try", try+1, "retry_in", wait)
		}
	}
	return err
}
