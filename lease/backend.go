package lease

import (
	"context"
	"time"
)

// Backend is a lease store. Implementations are safe for concurrent use;
// every call is bounded by its context and by the backend's per-request
// Timeout.
type Backend interface {
	// Acquire takes the lease described by req, retrying failed attempts
	// (with the backend's backoff) until it is held, the epoch is found
	// completed, or ctx ends. A failure is a *RefusedError (errors.Is
	// ErrNotObtained and one of ErrHeld, ErrEpochDone, ErrNoQuorum), joined
	// with ctx.Err() when ctx ended.
	Acquire(ctx context.Context, req Request) (Lease, error)
	// TryAcquireBatch makes one attempt for each request, in as few round
	// trips as the store allows (a tick's jobs: one round per server). The
	// results are in the order of reqs.
	TryAcquireBatch(ctx context.Context, reqs []Request) []Result
	// Inspect reads the state of key (holder, time left, done epoch, fence,
	// note) for `leasecron status`.
	Inspect(ctx context.Context, key string) (Info, error)
	// SetNote stores note beside key's lease (leasecron keeps the last run
	// record there) unless a note with a higher version is already stored.
	SetNote(ctx context.Context, key string, version int64, note string) error
	// Health reports each server's reachability, latency and whether it
	// counts (votes) now, for /healthz and `leasecron status`.
	Health(ctx context.Context) []ServerStatus
	// Warm opens the connections before the first round, so that a dial or
	// TLS handshake does not count against the first request's timeout.
	// Errors need no handling: the next round reports them again.
	Warm(ctx context.Context) error
	// Timeout is the per-request timeout. Hold's safety margin and the
	// scheduler's kill margin are derived from it.
	Timeout() time.Duration
	// Quorum is how many servers must agree (1 for a single server).
	Quorum() int
	// Servers names the servers, with passwords redacted.
	Servers() []string
	// Close releases the connections; leases still held expire by their
	// TTL, except on ZooKeeper, where they end with the session (see the
	// package documentation).
	Close() error

	// Entries keeps fleet-wide flags, heartbeats and retry state, and Logs
	// the run history, beside the leases (see store.go).
	Entries
	Logs
}

// Lease is a held acquisition of a key. A Lease does not renew itself; see
// NewHold.
type Lease interface {
	// Key returns the lease's key.
	Key() string
	// Owner returns the Request's Owner.
	Owner() string
	// Token returns the random token that identifies this acquisition.
	Token() string
	// Epoch returns the Request's epoch (0 if none).
	Epoch() int64
	// TTL returns the TTL of the acquisition and of each extension.
	TTL() time.Duration
	// Fence returns the fencing token: strictly greater than the Fence of
	// every earlier holder of the key.
	Fence() int64
	// ValidUntil returns the local instant (with a monotonic clock reading)
	// at which the validity ends, as of the last successful acquire or
	// extend; zero once the lease was released or completed.
	ValidUntil() time.Time
	// Extend resets the TTL (ttl <= 0: the Request's TTL), with validity
	// counted from the moment before the request left. On failure
	// ValidUntil is unchanged and the error matches ErrNotHeld (the lease
	// is no longer ours) or ErrNoQuorum (too few servers answered).
	Extend(ctx context.Context, ttl time.Duration) error
	// Release gives the lease up without completing its epoch, so another
	// owner may take the same epoch over. An error means the store could
	// not be told; the lease then expires by its TTL.
	Release(ctx context.Context) error
	// Complete marks the lease's epoch completed and releases it, retrying
	// until the mark is durable or ctx ends; from then on no acquisition
	// of this epoch or an older one succeeds. It succeeds after the lease
	// ran out as long as no newer holder took the key, and fails with
	// ErrNotHeld (the epoch left open) when one did. Without an epoch it
	// is Release. Call it only after the epoch's work has really finished.
	Complete(ctx context.Context) error
}

// Request names one lease to acquire.
type Request struct {
	// Key names the lease (leasecron: one key per job).
	Key string
	// TTL is the validity of the acquisition and of each renewal.
	TTL time.Duration
	// Epoch, when positive, makes the acquisition a run-once attempt: it
	// is refused once Key's completed epoch is >= Epoch (leasecron: the
	// tick's Unix time).
	Epoch int64
	// EpochTime is the instant the epoch's work became due (leasecron: the
	// tick), zero if unknown. A Redlock node whose data is younger than it
	// cannot vouch that the epoch was not completed and does not vote.
	EpochTime time.Time
	// Owner is free text stored with the lease and reported to refused
	// callers (leasecron: "tick=1700000000 host=web1").
	Owner string
}

// Result is the outcome of one Request of TryAcquireBatch: Lease when held,
// else Err (a *RefusedError).
type Result struct {
	Lease Lease
	Err   error
}

// Info is the state of a lease as read by Inspect.
type Info struct {
	// Holder is the Owner of the current holder, "" when free. When
	// Redlock nodes disagree it is the value held by the most nodes.
	Holder string
	// HolderNodes is how many of the answering servers hold it for Holder.
	HolderNodes int
	// TTL is how long until the lease is free.
	TTL time.Duration
	// DoneEpoch is the highest completed epoch.
	DoneEpoch int64
	// Fence is the highest fencing token handed out.
	Fence int64
	// Note is the newest note (see Backend.SetNote); NoteVersion its
	// version, -1 if none.
	Note        string
	NoteVersion int64
	// Answered is how many servers answered.
	Answered int
	// NodeErrs joins the *NodeError of servers that did not answer.
	NodeErrs error
}

// ServerStatus is one server's health as seen by Backend.Health.
type ServerStatus struct {
	Server  string        // redacted URL or address
	Err     error         // nil when the server answered and can serve rounds
	Latency time.Duration // round trip of the health request
	// Voting is false while the server does not count (a Redlock node
	// that restarted recently, say).
	Voting bool
	// VotingAt is when it counts again (zero if it counts).
	VotingAt time.Time
	// RestartedAt is the last detected restart or failover (zero: none).
	RestartedAt time.Time
}
