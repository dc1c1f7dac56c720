package redlock

import (
	"time"

	"github.com/leasecron/leasecron/lease"
)

// HoldOption configures Lease.Hold.
type HoldOption = lease.HoldOption

// RenewEvery sets how often the lease is extended. Default TTL/3.
func RenewEvery(d time.Duration) HoldOption { return lease.RenewEvery(d) }

// MaxLifetime bounds the hold: d after Hold was called, renewing stops and
// Done closes with ErrMaxLifetime (the lease stays valid until its current
// validity ends; release it). Default: no limit.
func MaxLifetime(d time.Duration) HoldOption { return lease.MaxLifetime(d) }

// SafetyMargin sets how long before the validity ends Done closes when
// renewals keep failing. Default: 2 × the client's per-node timeout + 5 ms,
// at most TTL/10 when the TTL is short.
func SafetyMargin(d time.Duration) HoldOption { return lease.SafetyMargin(d) }

// OnRenew calls f with the new validity end after every successful renewal,
// and once at the start with the lease's current one. f runs on the Hold's
// goroutine and must be quick (e.g. pass the deadline to a supervisor).
func OnRenew(f func(validUntil time.Time)) HoldOption { return lease.OnRenew(f) }

// Hold keeps a lease alive by extending it periodically, much like an etcd
// Session keeps its lease alive: Done closes and Ctx is cancelled when the
// lease is lost, which is always before its validity ends, and Err says why.
// Release or Complete stop it. It is lease.Hold (the renew loop every
// backend shares) with Lease returning this package's *Lease.
type Hold struct {
	*lease.Hold
	l *Lease
}

// Hold starts renewing the lease in a goroutine owned by the returned
// Hold. Renewals happen every RenewEvery; after a failed one it retries
// quickly while validity remains. The client's Observer.OnRenew sees every
// attempt.
func (l *Lease) Hold(opts ...HoldOption) *Hold {
	all := make([]HoldOption, 0, len(opts)+1)
	if f := l.c.opts.observer.OnRenew; f != nil {
		all = append(all, lease.ObserveRenew(f))
	}
	all = append(all, opts...)
	return &Hold{Hold: lease.NewHold(l, l.c.opts.timeout, all...), l: l}
}

// Lease returns the held lease.
func (h *Hold) Lease() *Lease { return h.l }
