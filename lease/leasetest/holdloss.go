package leasetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// testHoldLossOnKill: a Hold whose servers are all killed closes Done,
// with an error wrapping ErrLost, before the validity its last
// successful renewal promised ends. A second Hold, deliberately set to
// report its loss after the validity (a negative safety margin), shows
// that the check can fail.
func testHoldLossOnKill(t *testing.T, s *suite) {
	s.holdLoss(t, func(f *faults) { f.kill(s.all()...) })
}

// testHoldLossOnPause is testHoldLossOnKill with every server paused
// (SIGSTOP) instead: requests hang rather than fail.
func testHoldLossOnPause(t *testing.T, s *suite) {
	s.holdLoss(t, func(f *faults) { f.pause(s.all()...) })
}

// watchedHold is a Hold whose renewals and loss are recorded.
type watchedHold struct {
	name string
	l    lease.Lease
	h    *lease.Hold

	mu         sync.Mutex
	validUntil time.Time // as of the last successful renewal (OnRenew)
	renewals   int       // OnRenew calls, the first one at the start
	doneAt     time.Time // when Done closed
	closed     chan struct{}
}

// watch starts a Hold on l and a goroutine that records when its Done
// closes (it ends then; a cleanup releases the hold in any case).
func watch(t *testing.T, name string, l lease.Lease, timeout time.Duration, opts ...lease.HoldOption) *watchedHold {
	w := &watchedHold{name: name, l: l, closed: make(chan struct{})}
	w.h = lease.NewHold(l, timeout, append(opts, lease.OnRenew(func(v time.Time) {
		w.mu.Lock()
		w.validUntil = v
		w.renewals++
		w.mu.Unlock()
	}))...)
	go func() {
		<-w.h.Done()
		w.mu.Lock()
		w.doneAt = time.Now()
		w.mu.Unlock()
		close(w.closed)
	}()
	t.Cleanup(func() {
		_ = w.h.Release(ctx(t, 5*time.Second))
		<-w.closed
	})
	return w
}

// renewed reports whether the hold renewed at least once.
func (w *watchedHold) renewed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.renewals >= 2 // the initial call and one renewal
}

// lossBeforeValidity checks that Done closed before the validity of the
// last successful renewal (and the lease's ValidUntil) ended, with an
// error wrapping ErrLost, and returns how long before.
func (w *watchedHold) lossBeforeValidity() (time.Duration, error) {
	w.mu.Lock()
	doneAt, vu := w.doneAt, w.validUntil
	w.mu.Unlock()
	if !doneAt.Before(vu) {
		return 0, fmt.Errorf("%s: Done closed %s AFTER the validity of the last renewal ended", w.name, doneAt.Sub(vu))
	}
	if lv := w.l.ValidUntil(); !doneAt.Before(lv) {
		return 0, fmt.Errorf("%s: Done closed %s after the lease's ValidUntil", w.name, doneAt.Sub(lv))
	}
	if err := w.h.Err(); !errors.Is(err, lease.ErrLost) {
		return 0, fmt.Errorf("%s: Hold.Err() = %v, want an error wrapping ErrLost", w.name, err)
	}
	if w.h.Ctx().Err() == nil {
		return 0, fmt.Errorf("%s: Hold.Ctx() not cancelled after Done closed", w.name)
	}
	return vu.Sub(doneAt), nil
}

// holdLoss holds two leases, lets them renew at least once, injects fault
// and checks that the properly configured Hold closes Done before the
// validity of its last renewal ends, while the late one (negative
// control) is caught closing it after.
func (s *suite) holdLoss(t *testing.T, fault func(*faults)) {
	b := s.open(t)
	good := watch(t, "hold", mustAcquire(t, b, lease.Request{Key: s.key(t), TTL: s.h.TTL, Owner: "holder"}), b.Timeout())
	// Negative control: Done closes a fifth of a TTL after the validity.
	late := watch(t, "late hold (negative control)",
		mustAcquire(t, b, lease.Request{Key: s.key(t, "late"), TTL: s.h.TTL, Owner: "late holder"}), b.Timeout(),
		lease.SafetyMargin(-b.Timeout()-s.h.TTL/5))
	for deadline := time.Now().Add(liveness); !good.renewed() || !late.renewed(); time.Sleep(10 * time.Millisecond) {
		for _, w := range []*watchedHold{good, late} {
			select {
			case <-w.closed:
				t.Fatalf("%s ended before any fault: %v", w.name, w.h.Err())
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no renewal within %s", liveness)
		}
	}

	f := s.faults(t)
	fault(f)
	faultAt := time.Now()
	for _, w := range []*watchedHold{good, late} {
		select {
		case <-w.closed:
		case <-time.After(liveness):
			t.Fatalf("%s: Done did not close within %s of the fault", w.name, liveness)
		}
	}
	if margin, err := good.lossBeforeValidity(); err != nil {
		t.Error(err)
	} else {
		t.Logf("Done closed %s after the fault, %s before the validity ended: %v",
			good.doneAt.Sub(faultAt).Round(time.Millisecond), margin.Round(time.Millisecond), good.h.Err())
	}
	if _, err := late.lossBeforeValidity(); err == nil {
		t.Errorf("negative control: the check passed a Hold whose safety margin is negative")
	} else {
		t.Logf("negative control caught: %v", err)
	}
	f.heal()
}
