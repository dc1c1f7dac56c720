package zookeeper

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"

	"github.com/leasecron/leasecron/lease"
)

// Watched spaces. Every heartbeat, Beat reads spaces that rarely change:
// the pause flags, and the entry znodes of the hosts' space (heartbeats
// themselves live in the beat znode it writes). Reading them afresh would
// cost 3 of a heartbeat's 5 requests. So Beat keeps what it read of each
// such znode — a space's children, each entry znode, the space's beat
// znode — with a ZooKeeper watch on it, and reads a znode again only once
// its watch fired.
//
// That is as fresh as reading: a server sends a session the watch event
// of a change before the reply to any request it handles after that
// change, and go-zookeeper hands the event to the watch's channel before
// it reads the next reply. So once Beat's write (or its read of the beat
// znode) was answered, every kept znode whose watch has not fired is as
// that server had it when it answered: what a read sent then would have
// returned. That holds on one connection only: after a reconnect
// go-zookeeper sets the session's watches again, possibly behind
// requests queued meanwhile, so what was read on another connection than
// the current one is read again, all of it.
//
// A watch that never fires stays registered with go-zookeeper until the
// session ends (it has no way to remove one). A watch is set only by
// reading a znode whose watch fired, so they grow with the changes, and
// with reconnects (everything is read again, the old watches left) and
// requests given up on (a read that answers after its timeout still sets
// its watch), never with the heartbeats as such.

// watchedSpace is what Beat last read of one space, on conn.
type watchedSpace struct {
	conn     *boundedConn
	dir      watchedZnode            // the space's znode: its children
	children map[string]watchedZnode // entry znodes, by name
	beat     watchedZnode            // the space's beat znode
}

// watchedZnode is a znode as last read, and the watch set by that read.
type watchedZnode struct {
	ch     <-chan zk.Event // nil: read again
	exists bool
	names  []string // children (the space's znode)
	raw    []byte   // data (entry and beat znodes)
	st     zk.Stat
}

// fired reports whether the znode must be read again: its watch fired
// (a change, or the session's watches were dropped), or it has none.
func (w watchedZnode) fired() bool {
	if w.ch == nil {
		return true
	}

	select {
	case <-w.ch:
		return true
	default:
		return false
	}
}

// watched returns what Beat knows of space, its fired znodes read again
// (with new watches); its beat znode only when withBeat (the space a Beat
// writes has its beat znode as written, and every host's heartbeat would
// fire its watch). Call it with watchMu held, after a reply on the
// session's connection (see above).
func (b *Backend) watched(ctx context.Context, space string, withBeat bool) (*watchedSpace, error) {
	conn := b.cur.Load()
	w := b.watchedSpaces[space]
	if w != nil && b.test.ignoreWatches {
		return w, nil
	}
	if w == nil || w.conn != conn || conn == nil {
		// (No connection on record: the unboundedConnect test hook.)
		w = &watchedSpace{conn: conn, children: map[string]watchedZnode{}}
		b.watchedSpaces[space] = w
	}
	// A read that fails leaves w as it was, each znode fired or not: the
	// unfired ones' watches still stand, and setting new ones would leave
	// them registered to nobody.
	dir := b.spacePath(space)
	if w.dir.fired() {
		var d watchedZnode
		err := b.call(ctx, b.cfg.Timeout, func() error {
			var err error
			d, err = watchChildren(b.conn, dir)
			return err
		}, nil)
		if err != nil {
			return nil, b.nodeErr(err)
		}
		w.dir = d
		listed := make(map[string]bool, len(d.names))
		for _, n := range d.names {
			listed[n] = true
		}
		for n := range w.children {
			if !listed[n] {
				delete(w.children, n)
			}
		}
	}
	var stale []string
	for _, n := range w.dir.names {
		if w.children[n].fired() {
			stale = append(stale, n)
		}
	}
	read := make([]watchedZnode, len(stale))
	var beat watchedZnode
	beatStale := withBeat && w.beat.fired()
	err := b.call(ctx, b.fanTimeout(len(stale)+1), func() error {
		return each(len(stale)+1, func(i int) error {
			if i == len(stale) {
				if !beatStale {
					return nil
				}
				var err error
				beat, err = watchData(b.conn, b.beatPath(space))
				return err
			}
			var err error
			read[i], err = watchData(b.conn, dir+"/"+stale[i])
			return err
		})
	}, nil)
	if err != nil {
		return nil, b.nodeErr(err)
	}
	for i, n := range stale {
		w.children[n] = read[i]
	}
	if beatStale {
		w.beat = beat
	}
	return w, nil
}

// watchedZnodes returns the live entries of space's entry znodes, as
// listZnodes does, from what Beat knows of them (see watched).
func (b *Backend) watchedZnodes(ctx context.Context, w *watchedSpace, space string) ([]lease.Entry, error) {
	dir := b.spacePath(space)
	var out []lease.Entry
	var stale []string
	var staleVer []int32
	for _, n := range w.dir.names {
		z := w.children[n]
		if !z.exists {
			continue
		}
		e, ok := decodeEntry(n, z.raw)
		if !ok {
			continue
		}
		st := z.st
		exp, err := b.expired(ctx, e, &st)
		if err != nil {
			return nil, err
		}
		if exp {
			stale, staleVer = append(stale, dir+"/"+n), append(staleVer, st.Version)
			continue
		}
		out = append(out, e)
	}
	b.dropExpired(ctx, stale, staleVer)
	sortEntries(out)
	return out, nil
}

// watchedBeats returns the live entries of space's beat znode (none when
// it is missing), from what Beat knows of it (see watched).
func (b *Backend) watchedBeats(ctx context.Context, w *watchedSpace) ([]lease.Entry, error) {
	if !w.beat.exists {
		return nil, nil
	}
	st := w.beat.st
	return b.liveRecs(ctx, parseBeats(w.beat.raw, &st))
}

// watchChildren reads dir's children and watches them; a missing dir has
// none, and is watched for its creation.
func watchChildren(conn *zk.Conn, dir string) (watchedZnode, error) {
	return watchZnode(conn, dir, func() (watchedZnode, error) {
		names, _, ch, err := conn.ChildrenW(dir)
		return watchedZnode{ch: ch, exists: true, names: names}, err
	})
}

// watchData reads path's data and watches it; a missing znode is watched
// for its creation.
func watchData(conn *zk.Conn, path string) (watchedZnode, error) {
	return watchZnode(conn, path, func() (watchedZnode, error) {
		raw, st, ch, err := conn.GetW(path)
		if err != nil {
			return watchedZnode{}, err
		}
		return watchedZnode{ch: ch, exists: true, raw: raw, st: *st}, nil
	})
}

// watchZnode reads the znode at path with read (a request that sets a
// watch); when it is missing, it watches for its creation instead (a
// znode created in between is read again).
func watchZnode(conn *zk.Conn, path string, read func() (watchedZnode, error)) (watchedZnode, error) {
	for range putTries {
		z, err := read()
		if !errors.Is(err, zk.ErrNoNode) {
			return z, err
		}
		exists, _, ch, err := conn.ExistsW(path)
		if err != nil {
			return watchedZnode{}, err
		}
		if !exists {
			return watchedZnode{ch: ch}, nil
		}
	}
	return watchedZnode{}, errors.New("a znode kept being created and deleted while read")
}
