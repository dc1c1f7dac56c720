package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasecron/leasecron/lease"
)

// Znodes of the entries, logs and server clock, under the root. Their
// names hold '@', which job names (and so the scheduler's lease keys)
// cannot; checkKey refuses them as keys.
const (
	entriesNode = "@entries"
	logsNode    = "@logs"
	clockNode   = "@clock"
)

// putTries bounds Put's compare-and-set loop (another writer of the same
// entry made each try fail).
const putTries = 10

// fanOut bounds the requests one List or Log has in flight at once (they
// are pipelined on the session's connection).
const fanOut = 32

// reservedKey reports whether key is the name of a znode the store keeps
// under the root.
func reservedKey(key string) bool {
	return key == entriesNode || key == logsNode || key == clockNode || key == beatsNode || key == layoutNode
}

// spacePath is the znode of space, whose children are its entry znodes.
// Every write of an entry znode also raises the data version of the
// space's znode, in the same multi: a reader that kept what it read
// learns from that version alone whether the space changed since
// (beatkept.go). Only deleting an entry that expired leaves it as it is:
// readers judge expiry themselves.
func (b *Backend) spacePath(space string) string {
	return b.cfg.Root + "/" + entriesNode + "/" + space
}

// Put stores e in space unless a live entry of the same name has a
// version >= e.Version: a compare-and-set on the entry znode's version
// (Create when absent), retried when another writer came first; the
// space's znode's version is raised in the same multi.
func (b *Backend) Put(ctx context.Context, space string, e lease.Entry) error {
	if err := lease.CheckEntry(space, e); err != nil {
		return err
	}
	err := b.put(ctx, space, e)
	if err != nil {
		return fmt.Errorf("zookeeper: put %s/%s: %w", space, e.Name, err)
	}
	return nil
}

func (b *Backend) put(ctx context.Context, space string, e lease.Entry) error {
	path := b.spacePath(space) + "/" + e.Name
	data := encodeEntry(e)
	for try := range putTries {
		if try > 0 {
			// Lost a race, or this server had not yet seen the winner:
			// catch up with the leader before reading again.
			if err := b.sync(ctx); err != nil {
				return err
			}
		}
		var raw []byte
		var st *zk.Stat
		err := b.call(ctx, b.cfg.Timeout, func() error {
			var err error
			raw, st, err = b.conn.Get(path)
			return err
		}, nil)
		if errors.Is(err, zk.ErrNoNode) {
			err = b.createEntry(ctx, space, path, data)
			if errors.Is(err, zk.ErrNodeExists) {
				continue
			}
			return err
		}
		if err != nil {
			return b.nodeErr(err)
		}
		if cur, ok := decodeEntry(e.Name, raw); ok && cur.Version >= e.Version {
			exp, err := b.expired(ctx, cur, st)
			if err != nil {
				return err
			}
			if !exp {
				// A no-op, unless what this server showed is stale: the
				// check goes through the leader.
				err := b.call(ctx, b.cfg.Timeout, func() error {
					_, err := b.conn.Multi(&zk.CheckVersionRequest{Path: path, Version: st.Version})
					return err
				}, nil)
				if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
					continue
				}
				if err != nil {
					return b.nodeErr(err)
				}
				return nil
			}
		}
		err = b.setEntry(ctx, space, path, data, st.Version)
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return b.nodeErr(err)
		}
		return nil
	}
	return fmt.Errorf("%d writers in a row came first", putTries)
}

// setEntry sets the entry znode path of space at version and raises the
// version of the space's znode, in one multi (one request within the
// timeout), and notes the server's clock from the write's mtime. A failed
// write returns the entry znode's error (zk.ErrBadVersion: another
// writer came first).
func (b *Backend) setEntry(ctx context.Context, space, path string, data []byte, version int32) error {
	return b.call(ctx, b.cfg.Timeout, func() error {
		res, err := b.conn.Multi(b.withSpaceVersion(space, &zk.SetDataRequest{Path: path, Data: data, Version: version})...)
		if err == nil {
			b.clock.observe(res[0].Stat.Mtime, b.clientNow())
		}
		if len(res) > 0 && res[0].Error != nil {
			return res[0].Error
		}
		return err
	}, nil)
}

// setObserved sets path's data at version (one request within the
// timeout) and notes the server's clock from the write's mtime.
func (b *Backend) setObserved(ctx context.Context, path string, data []byte, version int32) (*zk.Stat, error) {
	var st *zk.Stat
	err := b.call(ctx, b.cfg.Timeout, func() error {
		var err error
		st, err = b.conn.Set(path, data, version)
		if err == nil {
			b.clock.observe(st.Mtime, b.clientNow())
		}
		return err
	}, nil)
	if err != nil {
		return nil, err // st is the late request's (see call)
	}
	return st, nil
}

// withSpaceVersion returns ops, writes of space's entry znodes, and the
// write that raises the version of the space's znode.
func (b *Backend) withSpaceVersion(space string, ops ...any) []any {
	if b.test.noSpaceVersion {
		return ops
	}
	return append(ops, &zk.SetDataRequest{Path: b.spacePath(space), Version: -1})
}

// createEntry creates the entry znode (and its space's znode if missing)
// and raises the version of the space's znode. The multi's SetData
// returns the znode's Stat, whose mtime refreshes the estimate of the
// server's clock.
func (b *Backend) createEntry(ctx context.Context, space, path string, data []byte) error {
	for range 2 {
		err := b.call(ctx, b.cfg.Timeout, func() error {
			res, err := b.conn.Multi(b.withSpaceVersion(space, &zk.CreateRequest{Path: path, Data: data, Acl: b.acl()},
				&zk.SetDataRequest{Path: path, Data: data, Version: 0})...)
			if err == nil {
				b.clock.observe(res[1].Stat.Mtime, b.clientNow())
			}
			return err
		}, nil)
		if !errors.Is(err, zk.ErrNoNode) {
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return b.nodeErr(err)
			}
			return err
		}
		if err := b.makeDirs(ctx, entriesNode, space); err != nil {
			return err
		}
	}
	return fmt.Errorf("create %s: its parent vanished twice", path)
}

// makeDirs creates ROOT/top and ROOT/top/sub as persistent znodes, where
// missing (another daemon may create them at the same time). A top-level
// znode made again (the root deleted and made again by hand under running
// daemons) comes with the layout marker when the root lacks it, in the
// same multi: a root never holds a top-level znode without a marker.
func (b *Backend) makeDirs(ctx context.Context, top, sub string) error {
	for i, p := range []string{b.cfg.Root + "/" + top, b.cfg.Root + "/" + top + "/" + sub} {
		err := b.call(ctx, b.cfg.Timeout, func() error {
			if i == 0 {
				return b.createTop(p)
			}
			_, err := b.conn.Create(p, nil, 0, b.acl())
			return err
		}, nil)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, b.nodeErr(err))
		}
	}
	return nil
}

// Get returns the entry name of space, if stored and not expired. It
// syncs the server first, so it sees every write acknowledged before.
func (b *Backend) Get(ctx context.Context, space, name string) (lease.Entry, bool, error) {
	if err := lease.CheckName("space", space); err != nil {
		return lease.Entry{}, false, err
	}
	if err := lease.CheckName("entry name", name); err != nil {
		return lease.Entry{}, false, err
	}
	e, ok, err := b.get(ctx, space, name)
	if err != nil {
		return lease.Entry{}, false, fmt.Errorf("zookeeper: get %s/%s: %w", space, name, err)
	}
	return e, ok, nil
}

func (b *Backend) get(ctx context.Context, space, name string) (lease.Entry, bool, error) {
	if err := b.sync(ctx); err != nil {
		return lease.Entry{}, false, err
	}
	e, ok, err := b.getZnode(ctx, space, name)
	if err != nil {
		return lease.Entry{}, false, err
	}
	beats, err := b.beatEntries(ctx, space)
	if err != nil {
		return lease.Entry{}, false, err
	}
	for _, be := range beats {
		if be.Name == name && (!ok || be.Version > e.Version) {
			return be, true, nil
		}
	}
	return e, ok, nil
}

// getZnode reads the entry znode name of space (after a sync).
func (b *Backend) getZnode(ctx context.Context, space, name string) (lease.Entry, bool, error) {
	path := b.spacePath(space) + "/" + name
	var raw []byte
	var st *zk.Stat
	err := b.call(ctx, b.cfg.Timeout, func() error {
		var err error
		raw, st, err = b.conn.Get(path)
		return err
	}, nil)
	if errors.Is(err, zk.ErrNoNode) {
		return lease.Entry{}, false, nil
	}
	if err != nil {
		return lease.Entry{}, false, b.nodeErr(err)
	}
	e, ok := decodeEntry(name, raw)
	if !ok {
		return lease.Entry{}, false, nil
	}
	exp, err := b.expired(ctx, e, st)
	if err != nil {
		return lease.Entry{}, false, err
	}
	if exp {
		b.dropExpired(ctx, []string{path}, []int32{st.Version})
		return lease.Entry{}, false, nil
	}
	return e, true, nil
}

// sync makes the server this session talks to catch up with the leader,
// so that the reads after it see every write acknowledged before it
// (ZooKeeper's sync; reads are otherwise served from the server's own,
// possibly lagging, copy).
func (b *Backend) sync(ctx context.Context) error {
	if b.test.noSync {
		return nil
	}
	err := b.call(ctx, b.cfg.Timeout, func() error {
		_, err := b.conn.Sync(b.cfg.Root)
		return err
	}, nil)
	if err != nil {
		return fmt.Errorf("sync: %w", b.nodeErr(err))
	}
	return nil
}

// fanTimeout bounds a pipelined burst of n requests.
func (b *Backend) fanTimeout(n int) time.Duration {
	return b.cfg.Timeout + time.Duration(n)*100*time.Microsecond
}

// each runs f(0..n-1) on at most fanOut goroutines and returns the first
// error.
func each(n int, f func(i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, fanOut)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// encodeEntry is an entry znode's data: "VERSION TTL_NS\n" then the data.
func encodeEntry(e lease.Entry) []byte {
	head := strconv.FormatInt(e.Version, 10) + " " + strconv.FormatInt(int64(e.TTL), 10) + "\n"
	return append([]byte(head), e.Data...)
}

// decodeEntry parses an entry znode's data; ok is false for data that is
// not an entry (treated as absent, and overwritten by the next Put).
func decodeEntry(name string, raw []byte) (e lease.Entry, ok bool) {
	head, data, found := strings.Cut(string(raw), "\n")
	if !found {
		return e, false
	}
	v, ttl, found := strings.Cut(head, " ")
	if !found {
		return e, false
	}
	version, err1 := strconv.ParseInt(v, 10, 64)
	ns, err2 := strconv.ParseInt(ttl, 10, 64)
	if err1 != nil || err2 != nil || ns < 0 {
		return e, false
	}
	return lease.Entry{Name: name, Version: version, Data: []byte(data), TTL: time.Duration(ns)}, true
}
