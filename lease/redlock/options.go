package redlock

import (
	"crypto/tls"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// Defaults used by New when the matching option is not given.
const (
	DefaultTimeout = 50 * time.Millisecond
	DefaultDrift   = lease.DefaultDrift
	// DefaultFenceExpiry is how long a key's fencing counter is kept after
	// the last acquisition raised it (see WithFenceExpiry).
	DefaultFenceExpiry = time.Hour
)

// Option configures a Client.
type Option func(*options)

type options struct {
	timeout      time.Duration
	drift        float64
	retry        RetryStrategy
	restartGuard time.Duration // 0: longest TTL requested so far
	detect       bool
	fencing      bool
	observer     Observer
	tls          *tls.Config
	connTimeout  time.Duration
	fenceExpiry  time.Duration
}

func defaultOptions() options {
	return options{
		timeout:     DefaultTimeout,
		drift:       DefaultDrift,
		retry:       NoRetry(),
		detect:      true,
		fencing:     true,
		connTimeout: 5 * time.Second,
		fenceExpiry: DefaultFenceExpiry,
	}
}

// WithTimeout sets the per-node timeout of every request (acquire, extend,
// release, ...). It should be small against the TTL. Default 50 ms.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithDrift sets the clock drift factor subtracted from every validity:
// validity = ttl - elapsed - (ttl*drift + 2ms). Default 0.01.
func WithDrift(f float64) Option { return func(o *options) { o.drift = f } }

// WithRetry sets how Acquire retries a failed attempt. Default NoRetry().
func WithRetry(r RetryStrategy) Option { return func(o *options) { o.retry = r } }

// WithRestartGuard sets how long a node that lost its data (restarted,
// failed over or was promoted, flushed, or had its dataset replaced) is kept
// from voting: it must be at least the longest TTL any client uses on these
// keys, and more than the offset between the wall clocks of the client
// hosts (it is also the margin of Request.EpochTime). Default: the longest
// TTL this Client has been asked for so far (by Acquire or by Extend: an
// Extend to a longer TTL raises the guard before its round counts votes),
// which is right when every client of a key uses the same TTL. See the package documentation for
// Sentinel groups.
func WithRestartGuard(d time.Duration) Option { return func(o *options) { o.restartGuard = d } }

// WithoutRestartDetection makes nodes vote at once after a restart,
// failover or data loss, and for any Request.EpochTime. This is unsafe for
// nodes without fsync-always persistence and exists for tests that must
// show the double grant it allows.
func WithoutRestartDetection() Option { return func(o *options) { o.detect = false } }

// WithoutFencing turns fencing tokens off: the acquire script leaves the
// key's counter alone, no second (fencing) round is ever needed, and
// Lease.Fence returns 0. With fencing an acquisition usually takes one round
// trip too (the script raises the counter); a second follows only when the
// nodes' counters disagree. Use it only when nothing downstream checks
// tokens.
func WithoutFencing() Option { return func(o *options) { o.fencing = false } }

// WithFenceExpiry sets how long a key's fencing counter is kept on a node
// after the last acquisition raised it (each raise starts the time anew;
// never less than the restart guard or the longest TTL requested).
// Default DefaultFenceExpiry (1 hour). A counter that expired is like one
// lost with a node's data: the next token comes from the time floor (the
// acquiring client's unix microseconds), so tokens keep increasing across
// the gap as long as the client hosts' wall clocks differ by less than
// the expiry. Longer keeps more keys: one counter per key acquired within
// the last expiry.
func WithFenceExpiry(d time.Duration) Option { return func(o *options) { o.fenceExpiry = d } }

// WithObserver installs hooks for metrics. Hooks are called synchronously
// from the client's goroutines and must be fast and safe for concurrent use.
func WithObserver(ob Observer) Option { return func(o *options) { o.observer = ob } }

// WithTLSConfig sets the TLS configuration used for rediss:// nodes
// (default: system roots, server name from the URL).
func WithTLSConfig(c *tls.Config) Option { return func(o *options) { o.tls = c } }

// Vote is one node's answer to one request.
type Vote int

// Votes reported to Observer.OnVote.
const (
	VoteGranted   Vote = iota // the node granted / applied the request
	VoteRefused               // the node answered no (held by another, not ours)
	VoteFailed                // error or timeout
	VoteNotVoting             // granted, but the node's data is too young (a recent restart or data loss, or younger than the request's EpochTime): the vote did not count
)

func (v Vote) String() string {
	switch v {
	case VoteGranted:
		return "granted"
	case VoteRefused:
		return "refused"
	case VoteFailed:
		return "failed"
	case VoteNotVoting:
		return "not_voting"
	}
	return "unknown"
}

// VoteEvent describes one node's answer to one request.
type VoteEvent struct {
	Node    string // redacted URL
	Op      string // "acquire", "fence", "extend", "release", "complete"
	Vote    Vote
	Latency time.Duration // time until the answer (or the timeout)
}

// RenewEvent describes one renewal attempt of a Hold.
type RenewEvent = lease.RenewEvent

// Observer receives events for metrics. Nil fields are skipped.
type Observer struct {
	OnVote    func(VoteEvent)
	OnRenew   func(RenewEvent)
	OnRestart func(node string, votingAgainAt time.Time) // a node restart, failover or data loss was detected
}
