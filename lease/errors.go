package lease

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors, shared by every backend. Test for them with errors.Is;
// the concrete error usually carries more detail (see RefusedError and
// NodeError). Every driver returns these values (wrapped with context);
// none defines its own copy.
var (
	// ErrNotObtained is wrapped by every failed acquisition.
	ErrNotObtained = errors.New("lease: not obtained")
	// ErrHeld means another holder has the lease.
	ErrHeld = errors.New("lease: held by another owner")
	// ErrEpochDone means the requested epoch (or a later one) was already
	// marked completed; retrying cannot succeed.
	ErrEpochDone = errors.New("lease: epoch already completed")
	// ErrNoQuorum means too few servers answered in time (or the answers
	// came too late to leave any validity).
	ErrNoQuorum = errors.New("lease: no quorum")
	// ErrLost is reported by a Hold whose lease could not be renewed.
	ErrLost = errors.New("lease: lost")
	// ErrMaxLifetime is reported by a Hold that reached its MaxLifetime.
	ErrMaxLifetime = errors.New("lease: maximum lifetime reached")
	// ErrNotHeld is returned by Extend when the lease is no longer ours,
	// and by Complete when a newer holder took the key.
	ErrNotHeld = errors.New("lease: not held")
	// ErrDataYounger is a server's reason not to vote for an epoch: its
	// data is younger than the Request's EpochTime (plus a guard), so it
	// may have lost the epoch's completion mark (a Redlock node that
	// restarted empty or failed over since). It is found in a refusal's
	// NodeErrs; a tick refused for it is not taken over — the price of
	// never running a completed tick again.
	ErrDataYounger = errors.New("lease: node's data is younger than the epoch, not voting for it")
	// ErrRestarted is a server's reason not to count yet: it started,
	// restarted, failed over or lost its data less than the restart guard
	// ago (Redlock), so its grants and its answers to reads do not count
	// until the guard has passed. It is found in the NodeErrs of a refusal
	// and in the node errors of a store read that found no quorum; unlike
	// ErrDataYounger it ends with the guard (Health says when: VotingAt).
	ErrRestarted = errors.New("lease: node restarted recently, not voting")
	// ErrClosed is returned by calls on a closed Backend.
	ErrClosed = errors.New("lease: client closed")
)

// NodeError is one server's failure, naming the server by its redacted URL
// or address.
type NodeError struct {
	Node string
	Err  error
}

func (e *NodeError) Error() string { return e.Node + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *NodeError) Unwrap() error { return e.Err }

// RefusedError explains why an acquisition failed. It matches
// ErrNotObtained and exactly one of ErrHeld, ErrEpochDone or ErrNoQuorum
// with errors.Is; NodeErrs holds the failures of individual servers.
type RefusedError struct {
	Key string
	// Reason is ErrHeld, ErrEpochDone or ErrNoQuorum.
	Reason error
	// Holder is the Owner of the current holder when Reason is ErrHeld.
	Holder string
	// HolderTTL is how long until the lease is free (on a quorum of the
	// nodes that answered, for Redlock): the moment a waiting caller
	// should try again.
	HolderTTL time.Duration
	// HolderNodes is how many of the servers that answered hold the lease
	// for Holder. When it reaches the backend's Quorum, Holder has the
	// lease; below that (Redlock only), the votes may have split between
	// contenders so that nobody won, and a retry after a short random
	// delay may succeed.
	HolderNodes int
	// DoneEpoch is the highest completed epoch reported.
	DoneEpoch int64
	// NodeErrs is errors.Join of *NodeError for servers that failed.
	NodeErrs error
	// Detail adds context, e.g. how long the attempt took.
	Detail string
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "acquire %s: %v", e.Key, e.Reason)
	switch {
	case errors.Is(e.Reason, ErrHeld):
		fmt.Fprintf(&b, " (holder %q, free in %s)", e.Holder, e.HolderTTL.Round(time.Millisecond))
	case errors.Is(e.Reason, ErrEpochDone):
		fmt.Fprintf(&b, " (completed epoch %d)", e.DoneEpoch)
	}
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	if e.NodeErrs != nil {
		b.WriteString("; nodes: " + strings.ReplaceAll(e.NodeErrs.Error(), "\n", "; "))
	}
	return b.String()
}

// Is reports whether target is ErrNotObtained or the refusal reason.
func (e *RefusedError) Is(target error) bool {
	return target == ErrNotObtained || target == e.Reason
}

// Unwrap returns the per-server errors.
func (e *RefusedError) Unwrap() error { return e.NodeErrs }
