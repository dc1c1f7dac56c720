package lease

import (
	"fmt"
	"time"
)

// DefaultDrift is the clock drift factor every driver subtracts from a
// validity unless configured otherwise (1 %).
const DefaultDrift = 0.01

// driftFloor is the constant part of the drift margin: what a validity
// loses even for a tiny TTL (clock granularity, scheduling).
const driftFloor = 2 * time.Millisecond

// Validity is how much of a grant or extension of ttl is certainly the
// caller's: ttl − elapsed − (ttl × drift + 2 ms), where elapsed is the time
// since start, the local monotonic instant read before the request left.
// The lease is valid until start.Add(Validity(...)) when that is positive;
// at or below zero the answer came too late to leave any validity and the
// grant must not be used. It is the Redlock algorithm's formula, and every
// driver counts validity with it.
func Validity(start time.Time, ttl time.Duration, drift float64) time.Duration {
	return ttl - time.Since(start) - (time.Duration(float64(ttl)*drift) + driftFloor)
}

// NoDrift, as a driver Config's Drift, asks for no drift allowance at
// all (a drift factor of 0), which the zero value cannot say: a Drift of
// 0 means DefaultDrift. See DriftOf.
const NoDrift = -1.0

// DriftOf is the drift factor a driver Config's Drift field stands for:
// DefaultDrift for 0 (the zero value), 0 for NoDrift, else drift itself
// (checked by CheckDrift).
func DriftOf(drift float64) float64 {
	switch drift {
	case 0:
		return DefaultDrift
	case NoDrift:
		return 0
	}
	return drift
}

// CheckDrift refuses a drift factor outside [0, 1).
func CheckDrift(drift float64) error {
	if drift < 0 || drift >= 1 {
		return fmt.Errorf("drift must be in [0,1), got %v", drift)
	}
	return nil
}

// KillMargin is how long before a lease's validity ends the work it
// protects must have been killed, for a backend whose per-request timeout
// is timeout: 200 ms for the kill itself and process scheduling, plus two
// timeouts.
func KillMargin(timeout time.Duration) time.Duration {
	return 200*time.Millisecond + 2*timeout
}

// RenewalNeed is what ttl·(1−drift) must cover (see RenewalFits) so that
// a renewal's reply reaches the work's supervisor before it sends SIGTERM
// (killGrace before the kill deadline, which is KillMargin before the
// validity ends), and work whose lease cannot be renewed is dead before
// the lease runs out: renew + killGrace + KillMargin(timeout) + 2×timeout.
// A renewal is due renew after the start of the previous one (whose
// validity is counted from that start, less the time its round took, up
// to one timeout) and its reply lands within another timeout.
func RenewalNeed(renew, killGrace, timeout time.Duration) time.Duration {
	return renew + killGrace + KillMargin(timeout) + 2*timeout
}

// Usable is the part of ttl that the drift factor leaves: ttl·(1−drift).
func Usable(ttl time.Duration, drift float64) time.Duration {
	return time.Duration(float64(ttl) * (1 - drift))
}

// RenewalFits reports whether a TTL of ttl with drift, renewed every
// renew, leaves room for the largest kill grace of the work it protects:
// ttl·(1−drift) ≥ RenewalNeed(renew, killGrace, timeout).
func RenewalFits(ttl time.Duration, drift float64, renew, killGrace, timeout time.Duration) bool {
	return Usable(ttl, drift) >= RenewalNeed(renew, killGrace, timeout)
}
