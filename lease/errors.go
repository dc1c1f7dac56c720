package lease

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. Test for them with errors.Is; the concrete error usually
// carries more detail (see RefusedError and NodeError).
var (
	// ErrNotObtained is wrapped by every failed acquisition.
	ErrNotObtained = errors.New("lease: not obtained")
	// ErrHeld means another holder has the lease on enough nodes.
	ErrHeld = errors.New("lease: held by another owner")
	// ErrEpochDone means the requested epoch (or a later one) was already
	// marked completed; retrying cannot succeed.
	ErrEpochDone = errors.New("lease: epoch already completed")
	// ErrNoQuorum means too few nodes answered in time (or the answers came
	// too late to leave any validity).
	ErrNoQuorum = errors.New("lease: no quorum")
	// ErrLost is reported by a Hold whose lease could not be renewed.
	ErrLost = errors.New("lease: lost")
	// ErrMaxLifetime is reported by a Hold that reached its MaxLifetime.
	ErrMaxLifetime = errors.New("lease: maximum lifetime reached")
	// ErrNotHeld is returned by Extend when the lease is no longer ours on a
	// quorum of nodes.
	ErrNotHeld = errors.New("lease: not held")
	// ErrRestarted is the per-node reason a grant did not count: the node
	// restarted, failed over or lost its data less than the restart guard
	// ago.
	ErrRestarted = errors.New("lease: node restarted recently, not voting")
	// ErrDataYounger is the per-node reason a grant did not count for a
	// Request with EpochTime: the node's data is younger than EpochTime
	// plus the restart guard (it restarted, failed over or lost its
	// dataset since), so it may have lost the epoch's completion mark.
	ErrDataYounger = errors.New("lease: node's data is younger than the epoch, not voting for it")
	// ErrClosed is returned by calls on a closed Client.
	ErrClosed = errors.New("lease: client closed")
)

// NodeError is one node's failure, naming the node by its redacted URL.
type NodeError struct {
	Node string
	Err  error
}

func (e *NodeError) Error() string { return e.Node + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *NodeError) Unwrap() error { return e.Err }

// RefusedError explains why an acquisition failed. It matches
// ErrNotObtained and exactly one of ErrHeld, ErrEpochDone or ErrNoQuorum
// with errors.Is; NodeErrs holds the failures of individual nodes.
type RefusedError struct {
	Key string
	// Reason is ErrHeld, ErrEpochDone or ErrNoQuorum.
	Reason error
	// Holder is the Owner of the current holder when Reason is ErrHeld.
	Holder string
	// HolderTTL is how long until the lease is free on a quorum of the
	// nodes that answered (the moment a waiting caller should try again).
	HolderTTL time.Duration
	// HolderNodes is how many of the nodes that answered hold the lease
	// for Holder. When it reaches the client's Quorum, Holder has the lease
	// on a quorum (its attempt won, unless its own answers came too late
	// for it); below that, the votes may have split between contenders
	// so that nobody won, and a retry after a short random delay may.
	HolderNodes int
	// DoneEpoch is the highest completed epoch reported.
	DoneEpoch int64
	// NodeErrs is errors.Join of *NodeError for nodes that failed.
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

// Unwrap returns the per-node errors.
func (e *RefusedError) Unwrap() error { return e.NodeErrs }
