package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// A hook of a tick and a missed record are done once across the fleet by
// a guard of two parts:
//
//   - a mutex: a short lease without an epoch on a key derived from the
//     job's (JOB@hook.EVENT, JOB@missed), held only while one host
//     checks and marks the tick done and delivers (records); a host that
//     finds it held waits for it (bounded by guardWaitFor);
//   - a done mark: an entry per job, event and tick (space SpaceDone,
//     name JOB.EVENT.<unix tick>) written under the mutex — for a hook
//     before it is delivered, for a missed record once it is written (its
//     append is idempotent) —, expiring doneTTL after it was written, so
//     that the store stays bounded whatever the number of ticks.
//
// The mark is checked under the mutex before the work: a tick's event
// done by any host, in any order of ticks, is not done again, and no tick
// keeps another's event from being done.

// SpaceDone is the space of entries (lease.Entries) that mark a tick's
// hook delivered or its missed record written, for doneTTL.
const SpaceDone = "done"

// doneTTL is how long a done mark is kept: longer than any host may try
// to deliver an event or record a miss (missedRecordFor).
const doneTTL = 24 * time.Hour

// guardTries bounds the attempts at a guard's mutex that find no quorum,
// and at reading or writing a done mark (askAgain).
const guardTries = 8

// guardWaitFor bounds how long a host waits for a guard's mutex held by
// another host (or another worker of its own): longer than the longest
// delivery of a hook (11 tries of at most a minute, and their backoff).
const guardWaitFor = 20 * time.Minute

// doneName is the name of the done mark of what (hook.EVENT, missed) of
// tick of job.
func (s *Scheduler) doneName(job, what string, tick time.Time) string {
	return storeName(s.key(job) + "." + what + "." + strconv.FormatInt(tick.Unix(), 10))
}

// isDone reports whether the done mark name is stored.
func (s *Scheduler) isDone(ctx context.Context, name string) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, s.requestWait())
	defer cancel()
	_, ok, err := s.be.Get(rctx, SpaceDone, name)
	if err != nil {
		return false, fmt.Errorf("read done mark %s: %w", name, err)
	}
	return ok, nil
}

// askAgain runs try until it succeeds, ctx ends or guardTries attempts
// failed, waiting 200 ms before the second and twice as long before each
// next one, up to 2 s: one or two slow answers of the store do not decide
// that a tick's event cannot be done.
func askAgain(ctx context.Context, try func() error) error {
	wait := 200 * time.Millisecond
	for n := 1; ; n++ {
		err := try()
		if err == nil || ctx.Err() != nil || n == guardTries {
			return err
		}
		t := time.NewTimer(lease.Jitter(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// readDone is isDone asked again (askAgain) while ctx lives: the caller
// holds the guard, and ctx ends when it loses it.
func (s *Scheduler) readDone(ctx context.Context, name string) (done bool, err error) {
	err = askAgain(ctx, func() error {
		var e error
		done, e = s.isDone(ctx, name)
		return e
	})
	return done, err
}

// markDone stores the done mark name, asked again (askAgain) while ctx
// lives: for a hook, while its guard is held — a mark written after the
// guard was lost would keep every host from delivering an event this one
// no longer delivers. A mark that could not be stored is logged and
// returned.
func (s *Scheduler) markDone(ctx context.Context, name string, log *slog.Logger) error {
	e := lease.Entry{Name: name, Version: 1, Data: []byte(s.host), TTL: doneTTL}
	err := askAgain(ctx, func() error {
		rctx, cancel := context.WithTimeout(ctx, s.requestWait())
		defer cancel()
		return s.be.Put(rctx, SpaceDone, e)
	})
	if err != nil {
		log.Warn("could not mark the tick's event done", "mark", name, "err", err)
	}
	return err
}

// lockGuard takes the mutex lease key (no epoch) for owner (which ends
// with " host=" and this host's id). While it is held it waits for it, up
// to guardWaitFor; an attempt that finds no quorum is retried with a
// backoff from 1s, up to guardTries times.
func (s *Scheduler) lockGuard(ctx context.Context, key, owner string, log *slog.Logger) (lease.Lease, error) {
	req := lease.Request{Key: key, TTL: s.cfg.Load().Lease.TTL, Owner: owner}
	giveUp := time.Now().Add(guardWaitFor)
	backoff := time.Second
	var err error
	for tries := 0; tries < guardTries; {
		res := s.be.TryAcquireBatch(ctx, []lease.Request{req})[0]
		if res.Err == nil {
			return res.Lease, nil
		}
		err = res.Err
		wait := heldBy(err)
		if wait == 0 {
			tries++
			wait, backoff = lease.Jitter(backoff), min(2*backoff, 30*time.Second)
		}
		if !time.Now().Add(wait).Before(giveUp) {
			return nil, fmt.Errorf("guard %s held for %s: %w", key, guardWaitFor, err)
		}
		log.Debug("guard held or unreachable; waiting", "key", key, "err", err, "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
	return nil, err
}

// guardPoll bounds the wait before another look at a held guard: its
// holder releases it as soon as it is done, long before its TTL.
const guardPoll = 500 * time.Millisecond

// heldBy reports, for a refusal err because the lease is held, how long
// to wait before another look: until it is free (at least 50ms), at most
// about guardPoll (jittered); 0 for any other error.
func heldBy(err error) time.Duration {
	var rerr *lease.RefusedError
	if !errors.As(err, &rerr) || !errors.Is(rerr.Reason, lease.ErrHeld) {
		return 0
	}
	return min(max(rerr.HolderTTL, 0)+50*time.Millisecond, lease.Jitter(guardPoll))
}
