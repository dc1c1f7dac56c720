package lease

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// HoldOption configures NewHold.
type HoldOption func(*holdOptions)

type holdOptions struct {
	every    time.Duration
	lifetime time.Duration
	margin   time.Duration
	onRenew  func(time.Time)
	observe  func(RenewEvent)
	// afterReturn times each renewal from when the previous Extend
	// returned instead of from the validity it set; only tests set it
	// (the timer the Hold had before, for negative controls).
	afterReturn bool
}

// RenewEvery sets how often the lease is extended. Default TTL/3. The
// period is counted from the start of the extension (or acquisition) that
// set the current validity, read off the validity itself: the next renewal
// is due when ValidUntil − now ≤ TTL − d. A slow reply therefore does not
// push the renewals after it back by its latency.
func RenewEvery(d time.Duration) HoldOption { return func(o *holdOptions) { o.every = d } }

// MaxLifetime bounds the hold: d after NewHold was called, renewing stops
// and Done closes with ErrMaxLifetime (the lease stays valid until its
// current validity ends; release it). Default: no limit.
func MaxLifetime(d time.Duration) HoldOption { return func(o *holdOptions) { o.lifetime = d } }

// SafetyMargin sets how long before the validity ends Done closes when
// renewals keep failing. Default: 2 × the backend's per-request timeout +
// 5 ms, at most TTL/10 when the TTL is short.
func SafetyMargin(d time.Duration) HoldOption { return func(o *holdOptions) { o.margin = d } }

// OnRenew calls f with the new validity end after every successful renewal,
// and once at the start with the lease's current one. f runs on the Hold's
// goroutine and must be quick (e.g. pass the deadline to a supervisor).
func OnRenew(f func(validUntil time.Time)) HoldOption {
	return func(o *holdOptions) { o.onRenew = f }
}

// ObserveRenew calls f after every renewal attempt, successful or not (for
// metrics). f runs on the Hold's goroutine and must be quick.
func ObserveRenew(f func(RenewEvent)) HoldOption { return func(o *holdOptions) { o.observe = f } }

// RenewEvent describes one renewal attempt of a Hold.
type RenewEvent struct {
	Key     string
	OK      bool
	Latency time.Duration
	Err     error
}

// Hold keeps a lease alive by extending it periodically, much like an etcd
// concurrency.Session keeps its lease alive: Done closes and Ctx is
// cancelled when the lease is lost, which is always before its validity
// ends, and Err says why. Release or Complete stop it. The renew loop and
// its loss timing are the same for every backend.
type Hold struct {
	l       Lease
	timeout time.Duration
	o       holdOptions
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{} // closed when the lease is lost or given up
	stop    chan struct{}
	exited  chan struct{} // closed when the goroutine returned
	once    sync.Once
	halted  sync.Once

	mu  sync.Mutex
	err error
}

// NewHold starts renewing l in a goroutine owned by the returned Hold.
// timeout is the backend's per-request timeout (Backend.Timeout): it sets
// the default safety margin and how soon a failed renewal is retried.
// Renewals happen every RenewEvery, counted from the start of the
// previous successful one (see RenewEvery); after a failed one the Hold retries
// quickly while validity remains, and closes Done (ErrLost) the safety
// margin plus one timeout before the validity ends — or at once when an
// extension is refused with ErrNotHeld (the store says the lease is not
// ours any more).
func NewHold(l Lease, timeout time.Duration, opts ...HoldOption) *Hold {
	ttl := l.TTL()
	o := holdOptions{every: ttl / 3}
	o.margin = min(2*timeout+5*time.Millisecond, max(ttl/10, time.Millisecond))
	for _, opt := range opts {
		opt(&o)
	}
	if o.every <= 0 {
		o.every = ttl / 3
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hold{l: l, timeout: timeout, o: o, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), stop: make(chan struct{}), exited: make(chan struct{})}
	go h.run()
	return h
}

// Done returns a channel that closes when the lease is lost, reaches its
// maximum lifetime, or the Hold is stopped. When it closes because of a
// loss, the lease's validity has not ended yet (by the safety margin).
func (h *Hold) Done() <-chan struct{} { return h.done }

// Ctx returns a context cancelled when Done closes.
func (h *Hold) Ctx() context.Context { return h.ctx }

// Err returns why Done closed: an error wrapping ErrLost or ErrMaxLifetime,
// or nil while the lease is held (and after a clean Release/Complete).
func (h *Hold) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Lease returns the held lease.
func (h *Hold) Lease() Lease { return h.l }

// ValidUntil returns the end of the current validity.
func (h *Hold) ValidUntil() time.Time { return h.l.ValidUntil() }

func (h *Hold) finish(err error) {
	h.once.Do(func() {
		h.mu.Lock()
		h.err = err
		h.mu.Unlock()
		h.cancel()
		close(h.done)
	})
}

func (h *Hold) run() {
	defer close(h.exited)
	start := time.Now()
	l := h.l
	if h.o.onRenew != nil {
		h.o.onRenew(l.ValidUntil())
	}
	renew := time.NewTimer(h.renewWait())
	defer renew.Stop()
	lossTimer := time.NewTimer(time.Until(h.lossAt()))
	defer lossTimer.Stop()
	var lifetime <-chan time.Time
	if h.o.lifetime > 0 {
		lt := time.NewTimer(h.o.lifetime - time.Since(start))
		defer lt.Stop()
		lifetime = lt.C
	}
	var lastErr error
	for {
		select {
		case <-h.stop:
			return
		case <-lifetime:
			h.finish(fmt.Errorf("hold %s: %w (%s)", l.Key(), ErrMaxLifetime, h.o.lifetime))
			return
		case <-lossTimer.C:
			h.finish(fmt.Errorf("hold %s: %w: validity ends in %s: %v", l.Key(), ErrLost, time.Until(l.ValidUntil()).Round(time.Millisecond), lastErr))
			return
		case <-renew.C:
		}
		t0 := time.Now()
		err := l.Extend(h.ctx, l.TTL())
		if h.o.observe != nil {
			h.o.observe(RenewEvent{Key: l.Key(), OK: err == nil, Latency: time.Since(t0), Err: err})
		}
		if err == nil {
			lastErr = nil
			if h.o.onRenew != nil {
				h.o.onRenew(l.ValidUntil())
			}
			renew.Reset(h.renewWait())
			lossTimer.Reset(time.Until(h.lossAt()))
			continue
		}
		lastErr = err
		if errors.Is(err, ErrNotHeld) {
			// The store says the lease is not ours any more: nothing to
			// wait for, stop the holder now.
			h.finish(fmt.Errorf("hold %s: %w: %w", l.Key(), ErrLost, err))
			return
		}
		// Retry soon, while validity remains; the loss timer ends it.
		renew.Reset(Jitter(max(h.timeout, 10*time.Millisecond)))
	}
}

// minRenewWait bounds how soon a renewal follows the previous successful
// one, for a lease whose validity is shorter than TTL − RenewEvery right
// after an extension (no renewal loop at full speed).
const minRenewWait = 10 * time.Millisecond

// renewWait is how long until the next renewal is due: when ValidUntil −
// now ≤ TTL − every. The validity is counted from the start of the last
// successful Extend (or of the acquisition), so the renewal period is too,
// and the time an Extend took before returning is not added to it — with
// the period counted from the return, each renewal's reply could land up
// to two request timeouts after the previous validity's renew point.
func (h *Hold) renewWait() time.Duration {
	if h.o.afterReturn {
		return h.o.every
	}
	wait := time.Until(h.l.ValidUntil().Add(h.o.every - h.l.TTL()))
	return max(wait, min(h.o.every, minRenewWait))
}

// lossAt is when Done must close if no renewal succeeds: the safety margin
// plus one request timeout (an extend in flight can delay noticing) before
// the validity ends.
func (h *Hold) lossAt() time.Time {
	return h.l.ValidUntil().Add(-h.o.margin - h.timeout)
}

// halt stops the renew goroutine and waits for it.
func (h *Hold) halt() {
	h.halted.Do(func() { close(h.stop) })
	<-h.exited
}

// Stop stops renewing without releasing or completing the lease: it runs
// out at its ValidUntil, as if its holder had died. Use it when the work
// the lease protects may still be going on (a process that could not be
// confirmed dead), so that nobody else gets the lease before it would
// have expired anyway. Done closes; Err stays as it was. It is safe to
// call more than once.
func (h *Hold) Stop() {
	h.halt()
	h.finish(nil)
}

// Release stops renewing and releases the lease without completing its
// epoch (another owner may then take the same epoch over). It is safe to
// call more than once.
func (h *Hold) Release(ctx context.Context) error {
	h.halt()
	h.finish(nil)
	return h.l.Release(ctx)
}

// Complete stops renewing, marks the epoch completed (retrying until ctx
// ends) and releases the lease.
func (h *Hold) Complete(ctx context.Context) error {
	h.halt()
	h.finish(nil)
	return h.l.Complete(ctx)
}

// Jitter returns d ± 25 %, at random: backends use it to spread retries
// of contending clients.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	q := int64(d) / 4
	if q <= 0 {
		return d
	}
	return d - time.Duration(q) + time.Duration(rand.Int64N(2*q+1))
}
