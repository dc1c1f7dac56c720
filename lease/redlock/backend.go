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

// Open connects to the Redlock nodes (see New for the URL forms and
// options) and returns a Client whose lease, entry and log keys start
// with prefix + ":" (leasecron: "leasecron"), so that several fleets, or
// other data, can share the nodes. The prefix must not contain braces
// (they would break the hash tag). Errors and Lease.Key name the keys
// without the prefix.
func Open(urls []string, prefix string, opts ...Option) (*Client, error) {
	if strings.ContainsAny(prefix, "{}") {
		return nil, errors.New("redis backend: prefix " + prefix + " must not contain braces")
	}
	c, err := New(urls, opts...)
	if err != nil {
		return nil, err
	}
	c.prefix = prefix + ":"
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
