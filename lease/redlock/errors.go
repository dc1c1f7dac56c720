package redlock

import "github.com/leasecron/leasecron/lease"

// Sentinel errors. Test for them with errors.Is; the concrete error usually
// carries more detail (see RefusedError and NodeError). They are the
// backend package's values, so a caller that tests for lease.ErrHeld
// also matches an error from this package.
var (
	// ErrNotObtained is wrapped by every failed acquisition.
	ErrNotObtained = lease.ErrNotObtained
	// ErrHeld means another holder has the lease on enough nodes.
	ErrHeld = lease.ErrHeld
	// ErrEpochDone means the requested epoch (or a later one) was already
	// marked completed; retrying cannot succeed.
	ErrEpochDone = lease.ErrEpochDone
	// ErrNoQuorum means too few nodes answered in time (or the answers came
	// too late to leave any validity).
	ErrNoQuorum = lease.ErrNoQuorum
	// ErrLost is reported by a Hold whose lease could not be renewed.
	ErrLost = lease.ErrLost
	// ErrMaxLifetime is reported by a Hold that reached its MaxLifetime.
	ErrMaxLifetime = lease.ErrMaxLifetime
	// ErrNotHeld is returned by Extend when the lease is no longer ours on a
	// quorum of nodes, and by Complete when too many nodes name a newer
	// holder for a quorum to mark the epoch.
	ErrNotHeld = lease.ErrNotHeld
	// ErrRestarted is the per-node reason a grant or an answer to a read
	// did not count: the node restarted, failed over or lost its data less
	// than the restart guard ago.
	ErrRestarted = lease.ErrRestarted
	// ErrDataYounger is the per-node reason a grant did not count for a
	// Request with EpochTime: the node's data is younger than EpochTime
	// plus the restart guard (it restarted, failed over or lost its
	// dataset since), so it may have lost the epoch's completion mark.
	ErrDataYounger = lease.ErrDataYounger
	// ErrClosed is returned by calls on a closed Client.
	ErrClosed = lease.ErrClosed
)

// NodeError is one node's failure, naming the node by its redacted URL.
type NodeError = lease.NodeError

// RefusedError explains why an acquisition failed. It matches
// ErrNotObtained and exactly one of ErrHeld, ErrEpochDone or ErrNoQuorum
// with errors.Is; NodeErrs holds the failures of individual nodes.
type RefusedError = lease.RefusedError
