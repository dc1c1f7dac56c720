package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"

	"github.com/leasecron/leasecron/lease"
)

// List returns the live entries of space, sorted by name: the space's
// children, then their data (requests pipelined, at most fanOut in
// flight). Expired entries found are deleted.
func (b *Backend) List(ctx context.Context, space string) ([]lease.Entry, error) {
	if err := lease.CheckName("space", space); err != nil {
		return nil, err
	}
	l, err := b.list(ctx, space)
	if err != nil {
		return nil, fmt.Errorf("zookeeper: list %s: %w", space, err)
	}
	return l, nil
}

func (b *Backend) list(ctx context.Context, space string) ([]lease.Entry, error) {
	if err := b.sync(ctx); err != nil {
		return nil, err
	}
	out, err := b.listZnodes(ctx, space)
	if err != nil {
		return nil, err
	}
	beats, err := b.beatEntries(ctx, space)
	if err != nil {
		return nil, err
	}
	return mergeBeats(out, beats), nil
}

// listZnodes returns the live entry znodes of space, sorted by name,
// without a sync first.
func (b *Backend) listZnodes(ctx context.Context, space string) ([]lease.Entry, error) {
	l, err := b.listDir(ctx, space)
	return l.entries, err
}

// dirList is a space's entry znodes as read: the live ones, sorted by
// name, each one's mtime, and the data version of the space's znode when
// its children were listed (-1: the space has no znode).
type dirList struct {
	entries []lease.Entry
	mtimes  []int64
	version int32
}

// listDir reads space's entry znodes (see listZnodes).
func (b *Backend) listDir(ctx context.Context, space string) (dirList, error) {
	dir := b.spacePath(space)
	names, dst, err := b.childrenStat(ctx, dir)
	if err != nil {
		return dirList{}, err
	}
	list := dirList{version: -1}
	if dst != nil {
		list.version = dst.Version
	}
	slices.Sort(names) // the entries come out sorted by name
	raws := make([][]byte, len(names))
	stats := make([]*zk.Stat, len(names))
	err = b.call(ctx, b.fanTimeout(len(names)), func() error {
		return each(len(names), func(i int) error {
			raw, st, err := b.conn.Get(dir + "/" + names[i])
			if errors.Is(err, zk.ErrNoNode) {
				return nil // deleted since: absent
			}
			raws[i], stats[i] = raw, st
			return err
		})
	}, nil)
	if err != nil {
		return dirList{}, b.nodeErr(err)
	}
	var stale []string
	var staleVer []int32
	for i, name := range names {
		if stats[i] == nil {
			continue
		}
		e, ok := decodeEntry(name, raws[i])
		if !ok {
			continue
		}
		exp, err := b.expired(ctx, e, stats[i])
		if err != nil {
			return dirList{}, err
		}
		if exp {
			stale, staleVer = append(stale, dir+"/"+name), append(staleVer, stats[i].Version)
			continue
		}
		list.entries, list.mtimes = append(list.entries, e), append(list.mtimes, stats[i].Mtime)
	}
	b.dropExpired(ctx, stale, staleVer)
	return list, nil
}

// dropExpired deletes expired entries, each only if still at the version
// read (a Put since then keeps it). Best effort: an entry left behind is
// absent for every reader and deleted by the next one.
func (b *Backend) dropExpired(ctx context.Context, paths []string, versions []int32) {
	if len(paths) == 0 {
		return
	}
	_ = b.call(ctx, b.fanTimeout(len(paths)), func() error {
		return each(len(paths), func(i int) error {
			_ = b.conn.Delete(paths[i], versions[i])
			return nil
		})
	}, nil)
}

// children lists dir's children; a missing dir has none.
func (b *Backend) children(ctx context.Context, dir string) ([]string, error) {
	names, _, err := b.childrenStat(ctx, dir)
	return names, err
}

// childrenStat lists dir's children, with dir's stat as of the listing;
// a missing dir has none, and a nil stat.
func (b *Backend) childrenStat(ctx context.Context, dir string) ([]string, *zk.Stat, error) {
	var names []string
	var st *zk.Stat
	err := b.call(ctx, b.cfg.Timeout, func() error {
		var err error
		names, st, err = b.conn.Children(dir)
		return err
	}, nil)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, b.nodeErr(err)
	}
	return names, st, nil
}
