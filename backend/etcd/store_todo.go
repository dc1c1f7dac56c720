package etcd

// TEMPORARY (removed by the branch that implements backend.Entries and
// backend.Logs for this backend in this session): lets the tree build.

import (
	"context"
	"errors"

	"github.com/leasecron/leasecron/backend"
)

var errStoreTODO = errors.New("etcd: entries and logs not implemented yet")

// Put is not implemented yet.
func (b *Backend) Put(ctx context.Context, space string, e backend.Entry) error { return errStoreTODO }

// Get is not implemented yet.
func (b *Backend) Get(ctx context.Context, space, name string) (backend.Entry, bool, error) {
	return backend.Entry{}, false, errStoreTODO
}

// List is not implemented yet.
func (b *Backend) List(ctx context.Context, space string) ([]backend.Entry, error) {
	return nil, errStoreTODO
}

// Append is not implemented yet.
func (b *Backend) Append(ctx context.Context, log string, rec backend.Record, limit int) error {
	return errStoreTODO
}

// Log is not implemented yet.
func (b *Backend) Log(ctx context.Context, log string, n int) ([]backend.Record, error) {
	return nil, errStoreTODO
}
