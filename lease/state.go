package lease

import (
	"sync"
	"time"
)

// State is the part of a held lease that is the same in every driver:
// the Request it was acquired for, its token and fence, and its validity
// on the local monotonic clock. A driver's Lease embeds it (which gives it
// Key, Owner, Token, Epoch, TTL, Fence and ValidUntil) and adds what talks
// to its store: Extend, Release, Complete.
//
// Fencing tokens: the fence a driver hands to NewState must be strictly
// greater than the fence of every earlier holder of the key (a counter the
// acquisition raised in the same atomic step that granted it, or the
// store's revision of that step). A driver whose store cannot promise that
// hands 0 and documents it.
//
// Validity: SetValidUntil sets it after a grant or an extension, counted
// with Validity from before the request left; Invalidate ends it locally
// when the lease is given up (released, completed, or no longer ours); a
// State once invalidated never becomes valid again. Safe for concurrent use.
type State struct {
	req   Request
	token string
	fence int64

	mu         sync.Mutex
	validUntil time.Time
	gone       bool
}

// NewState returns the state of an acquisition of req with token and
// fence; it is not valid until SetValidUntil.
func NewState(req Request, token string, fence int64) State {
	return State{req: req, token: token, fence: fence}
}

// Key returns the Request's Key.
func (s *State) Key() string { return s.req.Key }

// Owner returns the Request's Owner.
func (s *State) Owner() string { return s.req.Owner }

// Token returns the random token that identifies this acquisition (see
// NewToken).
func (s *State) Token() string { return s.token }

// Epoch returns the Request's epoch (0 if none).
func (s *State) Epoch() int64 { return s.req.Epoch }

// TTL returns the TTL of the acquisition and of each extension.
func (s *State) TTL() time.Duration { return s.req.TTL }

// Fence returns the fencing token: strictly greater than the Fence of
// every earlier holder of the key (see State for the rule a driver keeps).
func (s *State) Fence() int64 { return s.fence }

// Request returns the Request the lease was acquired for.
func (s *State) Request() Request { return s.req }

// ValidUntil returns the local instant (with a monotonic clock reading)
// at which the validity ends, as of the last successful acquire or
// extend; zero once the lease was given up (Invalidate).
func (s *State) ValidUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.validUntil
}

// SetValidUntil moves the end of the validity to v (a grant's or an
// extension's start plus its Validity). It reports false, changing
// nothing, once the lease was given up: an extension that raced with
// Invalidate or Lapse must then report the lease not held.
func (s *State) SetValidUntil(v time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return false
	}
	s.validUntil = v
	return true
}

// Invalidate ends the validity locally (ValidUntil becomes zero): the
// lease is being given up. It reports whether it was given up already.
func (s *State) Invalidate() (already bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	already = s.gone
	s.validUntil, s.gone = time.Time{}, true
	return already
}

// Lapse gives the lease up if its validity has ended by now, keeping
// ValidUntil (in the past) as it was; it reports whether it did. The check
// and the giving up are one step: a SetValidUntil that lands at the same
// moment either moved the validity first (then nothing lapses) or finds
// the lease given up.
func (s *State) Lapse(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone || now.Before(s.validUntil) {
		return false
	}
	s.gone = true
	return true
}

// Gone reports whether the lease was given up (Invalidate or Lapse).
func (s *State) Gone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}
