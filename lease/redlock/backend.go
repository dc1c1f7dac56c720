package redlock

import (
	"context"
	"errors"
	"strings"

	"github.com/leasecron/leasecron/lease"
)

// A Client is a lease.Backend: leasecron's scheduler and CLI use it
// through that interface, a library user directly.
var _ lease.Backend = (*Client)(nil)

// Config names the Redlock nodes and how to use them (Open).
type Config struct {
	// Nodes are the URLs of the Redis masters (see New for the forms); a
	// lease needs len(Nodes)/2+1 of them.
	Nodes []string
	// Prefix starts every lease, entry and log key: PREFIX:KEY
	// (leasecron: "leasecron"), so that several fleets, or other data,
	// can share the nodes. It must not contain braces (they would break
	// the hash tag).
	Prefix string
	// Options configure the client: WithTimeout, WithDrift,
	// WithRestartGuard, WithObserver, ...
	Options []Option
}

// Open makes a Client of cfg's nodes whose keys start with cfg.Prefix +
// ":"; errors and Lease.Key name the keys without the prefix. It is the
// shape every leasecron driver opens with; the client dials lazily, so
// Open contacts no node and ctx is not kept.
func Open(_ context.Context, cfg Config) (*Client, error) {
	if strings.ContainsAny(cfg.Prefix, "{}") {
		return nil, errors.New("redis backend: prefix " + cfg.Prefix + " must not contain braces")
	}
	c, err := New(cfg.Nodes, cfg.Options...)
	if err != nil {
		return nil, err
	}
	c.prefix = cfg.Prefix + ":"
	return c, nil
}

// Hold starts renewing l (a Lease of this Client) in a goroutine owned by
// the returned lease.Hold: lease.NewHold with the client's per-node
// timeout, and the client's Observer.OnRenew seeing every attempt.
// Renewals happen every lease.RenewEvery (default TTL/3); after a failed
// one it retries quickly while validity remains.
func (c *Client) Hold(l lease.Lease, opts ...lease.HoldOption) *lease.Hold {
	if f := c.opts.observer.OnRenew; f != nil {
		opts = append([]lease.HoldOption{lease.ObserveRenew(f)}, opts...)
	}
	return lease.NewHold(l, c.opts.timeout, opts...)
}

// entriesKey is the Redis key of a space of entries: PREFIX:entries:SPACE
// (PutEntry adds the hash tag and the expiry index beside it).
func (c *Client) entriesKey(space string) string { return c.prefix + "entries:" + space }

// logKey is the Redis key of a log: PREFIX:log:LOG (AppendLog adds the
// hash tag and the records' hash beside it).
func (c *Client) logKey(log string) string { return c.prefix + "log:" + log }

// Put stores e in space on every node, keeping the highest version of a
// live entry (PutEntry).
func (c *Client) Put(ctx context.Context, space string, e lease.Entry) error {
	if err := lease.CheckEntry(space, e); err != nil {
		return err
	}
	return c.PutEntry(ctx, c.entriesKey(space), e)
}

// Get returns the live entry name of space (GetEntry).
func (c *Client) Get(ctx context.Context, space, name string) (lease.Entry, bool, error) {
	if err := lease.CheckName("space", space); err != nil {
		return lease.Entry{}, false, err
	}
	if err := lease.CheckName("entry name", name); err != nil {
		return lease.Entry{}, false, err
	}
	return c.GetEntry(ctx, c.entriesKey(space), name)
}

// List returns the live entries of space sorted by name (ListEntries).
func (c *Client) List(ctx context.Context, space string) ([]lease.Entry, error) {
	if err := lease.CheckName("space", space); err != nil {
		return nil, err
	}
	return c.ListEntries(ctx, c.entriesKey(space))
}

// Append adds rec to log and trims it to limit records (AppendLog).
func (c *Client) Append(ctx context.Context, log string, rec lease.Record, limit int) error {
	if err := lease.CheckRecord(log, rec, limit); err != nil {
		return err
	}
	return c.AppendLog(ctx, c.logKey(log), rec, limit)
}

// Log returns up to n of the newest records of log, newest first
// (ReadLog).
func (c *Client) Log(ctx context.Context, log string, n int) ([]lease.Record, error) {
	if err := lease.CheckName("log", log); err != nil {
		return nil, err
	}
	if err := lease.CheckLimit(n); err != nil {
		return nil, err
	}
	return c.ReadLog(ctx, c.logKey(log), n)
}
