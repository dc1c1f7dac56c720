package redis

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// Backend adapts a *lease.Client to lease.Backend. It is safe for
// concurrent use.
type Backend struct {
	c      *redlock.Client
	prefix string
}

var _ lease.Backend = (*Backend)(nil)

// Config names the Redlock nodes and how to use them.
type Config struct {
	// Nodes are the URLs of the Redis masters (see redlock.New for the
	// forms); a lease needs len(Nodes)/2+1 of them.
	Nodes []string
	// Prefix starts every key: PREFIX:KEY. It must not contain braces
	// (they would break the hash tag).
	Prefix string
	// Options configure the Redlock client: redlock.WithTimeout,
	// WithDrift, WithRestartGuard, WithObserver, ...
	Options []redlock.Option
}

// Open makes a Redlock client of cfg's nodes and returns a Backend whose
// keys start with cfg.Prefix + ":". The client dials lazily: Open
// contacts no node, and ctx is not kept.
func Open(_ context.Context, cfg Config) (*Backend, error) {
	if strings.ContainsAny(cfg.Prefix, "{}") {
		return nil, errors.New("redis backend: prefix " + cfg.Prefix + " must not contain braces")
	}
	c, err := redlock.New(cfg.Nodes, cfg.Options...)
	if err != nil {
		return nil, err
	}
	return New(c, cfg.Prefix), nil
}

// New wraps an open client. Close closes it.
func New(c *redlock.Client, prefix string) *Backend { return &Backend{c: c, prefix: prefix} }

// Client returns the wrapped lease client.
func (b *Backend) Client() *redlock.Client { return b.c }

// Key returns the Redis lease key for a backend key: PREFIX:KEY.
func (b *Backend) Key(key string) string { return b.prefix + ":" + key }

func (b *Backend) request(r lease.Request) redlock.Request {
	return redlock.Request{Key: b.Key(r.Key), TTL: r.TTL, Epoch: r.Epoch, EpochTime: r.EpochTime, Owner: r.Owner}
}

// Lease is a held Redlock lease whose Key is the backend key (without the
// prefix). Lease.Lease returns the underlying *lease.Lease.
type Lease struct {
	*redlock.Lease
	key string
}

// Key returns the key as given in the lease.Request.
func (l *Lease) Key() string { return l.key }

// unprefixed returns err with a *lease.RefusedError's Key set back to
// the backend key the caller named (the lease client names the Redis key,
// PREFIX:KEY). A context error joined to it stays joined.
func unprefixed(err error, key string) error {
	var re *lease.RefusedError
	if !errors.As(err, &re) || re.Key == key {
		return err
	}
	c := *re
	c.Key = key
	var out error = &c
	for _, e := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			out = errors.Join(out, e)
		}
	}
	return out
}

// Acquire takes the lease (lease.Client.Acquire).
func (b *Backend) Acquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	l, err := b.c.Acquire(ctx, b.request(req))
	if err != nil {
		return nil, unprefixed(err, req.Key)
	}
	return &Lease{Lease: l, key: req.Key}, nil
}

// TryAcquireBatch makes one attempt per request in one pipelined round per
// node (lease.Client.TryAcquireBatch).
func (b *Backend) TryAcquireBatch(ctx context.Context, reqs []lease.Request) []lease.Result {
	lr := make([]redlock.Request, len(reqs))
	for i, r := range reqs {
		lr[i] = b.request(r)
	}
	res := b.c.TryAcquireBatch(ctx, lr)
	out := make([]lease.Result, len(res))
	for i, r := range res {
		if r.Err != nil {
			out[i].Err = unprefixed(r.Err, reqs[i].Key)
			continue
		}
		out[i].Lease = &Lease{Lease: r.Lease, key: reqs[i].Key}
	}
	return out
}

// Inspect reads the lease's state from every node (lease.Client.Inspect).
func (b *Backend) Inspect(ctx context.Context, key string) (lease.Info, error) {
	in, err := b.c.Inspect(ctx, b.Key(key))
	if err != nil {
		return lease.Info{}, err
	}
	return lease.Info{
		Holder: in.Holder, HolderNodes: in.HolderNodes, TTL: in.TTL, DoneEpoch: in.DoneEpoch,
		Fence: in.Fence, Note: in.Note, NoteVersion: in.NoteVersion, Answered: in.Answered, NodeErrs: in.NodeErrs,
	}, nil
}

// SetNote stores note beside the lease (lease.Client.SetNote).
func (b *Backend) SetNote(ctx context.Context, key string, version int64, note string) error {
	return b.c.SetNote(ctx, b.Key(key), version, note)
}

// Health pings every node (lease.Client.Ping).
func (b *Backend) Health(ctx context.Context) []lease.ServerStatus {
	ps := b.c.Ping(ctx)
	out := make([]lease.ServerStatus, len(ps))
	for i, p := range ps {
		out[i] = lease.ServerStatus{Server: p.Node, Err: p.Err, Latency: p.Latency,
			Voting: p.Voting, VotingAt: p.VotingAt, RestartedAt: p.RestartedAt}
	}
	return out
}

// Warm opens every node's connection (lease.Client.Warm).
func (b *Backend) Warm(ctx context.Context) error { return b.c.Warm(ctx) }

// Timeout is the per-node timeout.
func (b *Backend) Timeout() time.Duration { return b.c.Timeout() }

// Quorum is N/2+1.
func (b *Backend) Quorum() int { return b.c.Quorum() }

// Servers lists the nodes' redacted URLs.
func (b *Backend) Servers() []string { return b.c.Nodes() }

// Close closes the client.
func (b *Backend) Close() error { return b.c.Close() }
